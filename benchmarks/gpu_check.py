"""Does the verl engine learn PASR on one GPU? ``bash recipe/scripts/gpu_check.sh`` (this module:
``python3 -m benchmarks.gpu_check``), every start-up included.

1. **Warm-up** the embedded SmolLM2-135M with the local engine on the GPU, as ``pasr train``
   does (the demo preset's supervised warm-up: 100 steps whose refine-prompt traces nearly all
   refine, so the model refines whatever its trajectory, docs/results/demo.md), and evaluate it
   greedily on the 300 held-out problems of ``benchmarks.learning_signal``; or take a warmed-up
   HF folder (``--warmup-model``).
2. **verl, run 1**: PASR with ``python3 -m recipe.main_pasr`` from that checkpoint on the same
   synthetic arithmetic, with the local engine's reward settings (:func:`verl_overrides` says which
   and why any differ). While step ``--stop-at`` runs, the driver gets SIGTERM: verl's real loop
   must finish that step, checkpoint it and exit 0 (:mod:`recipe.verl_engine.stopping`).
   Meanwhile the local engine trains PASR from the same warm-up for the same steps (engine parity).
3. **verl, run 2**: the same command resumes from that checkpoint and finishes ``--steps``.
4. **Evaluate** the merged final checkpoint the same way as the warm-up; paired sign tests.
5. Print the checks, the table and PASS/FAIL; write ``benchmarks/results/gpu_check.json``.

``--part first`` runs 1-2 and ``--part resume`` 3-5, as two commands: each verl start-up took
150-170 s on an H100 and about 250 s on an H200 (docs/results/gpu_check.md), so two of them, the
warm-up and the evaluations do not fit one 9-minute command there, while each half does; the
machine keeps the run directory between the two. ``--part all`` (the default) runs everything.
Each command runs under its own wall-clock budget (``--budget-s``): a phase that would overrun it
is stopped the way a user would stop it (SIGTERM, a checkpoint). The result is rebuilt from the
run directory after every phase (:mod:`benchmarks.gpu_check_report`), so a command killed by a
machine's limit still leaves its figures, and ``--report RUN_DIR`` rebuilds them afterwards.
Without a GPU, ``--dry-run`` composes and checks the verl config and prints the commands.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.gpu_check_report import build_result, latest_checkpoint, print_report, read_json, write_result
from benchmarks.watched_run import ROOT, WatchedRun, run_to_end, stop_during

VERL_DRIVER = "recipe.main_pasr"


# --------------------------------------------------------------------------- settings
def local_common(args) -> list[str]:
    """Overrides every local-engine run of the check shares (warm-up, parity run, evaluations).
    The ``<think>`` prefill (``pasr.prefill_think``) is the preset's, and :func:`verl_overrides`
    gives verl the same: both engines put it in the prompt, so the warm-up, both RL phases and
    every evaluation here prompt the model alike."""
    qps = [] if not args.queries_per_step else [f"rollout.queries_per_step={args.queries_per_step}"]
    return [
        f"model.device={args.device}",
        f"data.eval_size={args.eval_size}",
        *qps,
        f"trainer.seed={args.seed}",
        f"warmup.seed={args.seed}",
        "trainer.eval_plain=false",
        "trainer.dump_rollouts=true",
        *args.local_override,
    ]


def local_cmd(args, run_dir: Path, *overrides: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "recipe",
        "train",
        "--preset",
        args.preset,
        "--run-dir",
        str(run_dir),
        *local_common(args),
        *overrides,
    ]


def warmup_cmd(args, run_dir: Path, cfg) -> list[str]:
    """The warm-up and its evaluation (``eval/warmup.jsonl``), checkpointed once at its end: the
    default's checkpoint every 10 steps cost 20 of its 82 s on the H100."""
    return local_cmd(
        args,
        run_dir,
        "trainer.steps=0",
        f"trainer.save_every={cfg.warmup.steps}",
        "trainer.eval_at_start=false",
        "trainer.eval_after_warmup=true",
    )


def eval_cmd(args, run_dir: Path, model: str | Path) -> list[str]:
    """A greedy evaluation of ``model`` on the held-out problems (``eval/base.jsonl``)."""
    return local_cmd(
        args,
        run_dir,
        f"model.path={model}",
        "warmup.steps=0",
        "trainer.steps=0",
        "trainer.eval_at_start=true",
        "trainer.eval_after_warmup=false",
        "trainer.eval_at_end=false",
    )


def local_pasr_cmd(args, run_dir: Path, warm: Path) -> list[str]:
    """The local engine's PASR steps from the same warm-up (``eval/final.jsonl``)."""
    return local_cmd(
        args,
        run_dir,
        f"model.path={warm}",
        "warmup.steps=0",
        f"trainer.steps={args.steps}",
        "trainer.eval_at_start=false",
        "trainer.eval_after_warmup=false",
        "trainer.eval_at_end=true",
    )


def local_settings(args):
    """The local engine's config for this check (the reward and the sizes verl copies)."""
    from recipe.local_engine.config import load_config

    return load_config(
        preset=args.preset, overrides=[o for o in local_common(args) if not o.startswith("model.device")]
    )


def verl_overrides(args, cfg, train_file: Path, val_file: Path, model: Path, ckpt_dir: Path) -> list[str]:
    """``recipe.main_pasr`` overrides that train what the local engine's ``cfg`` trains.

    Same as the local engine: the data (synthetic arithmetic, its train seed), queries per step,
    group sizes (``pasr.n_refine`` refine + ``pasr.n_plain`` plain rollouts), temperature, response
    budget, every ``pasr.*`` reward setting and prompt, the ``<think>`` prefill, the RL learning rate and its linear
    ramp, AdamW without weight decay, KL (low-var, 0.04), clip 0.2, grad-norm clip, one optimizer step
    per RL step (the mini-batch is the whole batch), GRPO with std normalisation.
    Where they differ, by verl's design: rollouts sample from vLLM in bf16 (the local engine
    samples from its fp32 policy), verl shuffles the training set with its own sampler, and it
    keeps zero-advantage rows in the loss's token mean (the local engine drops them). The ramp
    matches: verl logged lr 1e-6, 2e-6, ... at steps 1, 2, ... on the H100 run.
    Start-up choices for a small model on one GPU: eager vLLM (no CUDA-graph capture), no
    torch.compile in the actor, no parameter offload, one agent-loop worker, no DataLoader worker
    processes, no validation (this check evaluates on its own held-out set), and no FlashInfer
    autotune in vLLM's kernel warm-up (``--no-enable-flashinfer-autotune``, what vLLM's own ``-O0``
    does): on the H100 it ran in the last seconds before the engine was ready, tuning kernels for
    batch shapes a 135M model on 48-96 sequences never reaches."""
    p = cfg.pasr
    algo = cfg.algo
    out = [
        "method=pasr",
        f"data.train_files={train_file}",
        f"data.val_files={val_file}",
        f"data.train_batch_size={cfg.rollout.queries_per_step}",
        "data.max_prompt_length=512",
        f"data.max_response_length={cfg.rollout.max_new_tokens}",
        "data.dataloader_num_workers=0",
        f"data.seed={args.seed}",
        f"actor_rollout_ref.model.path={model}",
        "actor_rollout_ref.model.enable_gradient_checkpointing=false",
        f"actor_rollout_ref.actor.optim.lr={algo.lr}",
        f"actor_rollout_ref.actor.optim.lr_warmup_steps={algo.lr_warmup_steps if algo.lr_warmup_steps > 0 else -1}",
        "actor_rollout_ref.actor.optim.weight_decay=0.0",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={cfg.rollout.queries_per_step}",
        f"actor_rollout_ref.actor.ppo_epochs={algo.ppo_epochs}",
        f"actor_rollout_ref.actor.clip_ratio={algo.clip_ratio}",
        f"actor_rollout_ref.actor.clip_ratio_low={algo.clip_ratio}",
        f"actor_rollout_ref.actor.clip_ratio_high={algo.clip_ratio}",
        f"actor_rollout_ref.actor.grad_clip={algo.max_grad_norm}",
        f"actor_rollout_ref.actor.use_kl_loss={str(algo.kl_coef > 0).lower()}",
        f"actor_rollout_ref.actor.kl_loss_coef={algo.kl_coef}",
        f"actor_rollout_ref.actor.kl_loss_type={algo.kl_type}",
        f"actor_rollout_ref.actor.loss_agg_mode={algo.loss_agg_mode}",
        "actor_rollout_ref.actor.use_torch_compile=false",
        "actor_rollout_ref.actor.fsdp_config.param_offload=false",
        "actor_rollout_ref.actor.fsdp_config.optimizer_offload=false",
        "actor_rollout_ref.ref.fsdp_config.param_offload=false",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
        f"actor_rollout_ref.rollout.gpu_memory_utilization={args.gpu_memory_utilization}",
        f"actor_rollout_ref.rollout.enforce_eager={str(args.enforce_eager).lower()}",
        "+actor_rollout_ref.rollout.engine_kwargs.vllm.enable_flashinfer_autotune="
        f"{str(not args.enforce_eager).lower()}",
        f"actor_rollout_ref.rollout.temperature={cfg.rollout.temperature}",
        f"actor_rollout_ref.rollout.top_p={cfg.rollout.top_p}",
        "actor_rollout_ref.rollout.agent.num_workers=1",
        f"algorithm.norm_adv_by_std_in_grpo={str(algo.norm_adv_by_std).lower()}",
        f"pasr.n_refine={p.n_refine}",
        f"pasr.n_plain={p.n_plain}",
        f"pasr.tie_value={p.tie_value}",
        f"pasr.zeta={p.zeta}",
        f"pasr.empty_refine_value={'null' if p.empty_refine_value is None else p.empty_refine_value}",
        f"pasr.refine_compare={p.refine_compare}",
        f"pasr.weights.format={p.weights.format}",
        f"pasr.weights.acc={p.weights.acc}",
        f"pasr.weights.refine={p.weights.refine}",
        f"pasr.prompts.refine={p.prompts.refine}",
        f"pasr.prompts.plain={p.prompts.plain}",
        f"pasr.prefill_think={str(p.prefill_think).lower()}",
        f"pasr.judge.kind={p.judge.kind}",
        "pasr_verl.dump_validation=false",
        "trainer.n_gpus_per_node=1",
        "trainer.nnodes=1",
        "trainer.total_epochs=1",
        f"trainer.total_training_steps={args.steps}",
        f"trainer.save_freq={args.save_every}",
        "trainer.test_freq=-1",
        "trainer.val_before_train=false",
        "trainer.max_actor_ckpt_to_keep=2",
        "trainer.resume_mode=auto",
        f"trainer.default_local_dir={ckpt_dir}",
        "trainer.experiment_name=gpu-check",
        "trainer.logger=[console]",
    ]
    return [*out, *args.verl_override]


def write_verl_data(cfg, data_dir: Path, n_val: int = 16) -> tuple[Path, Path]:
    """The local engine's training problems as verl's RL parquet (the refine system prompt in
    each row; PASR's rollout sets the system prompt per variant anyway), and a few held-out ones
    as the validation file verl wants even when it never validates."""
    from data.generated_sets import heldout_seed
    from data.loaders import load_examples
    from data.verl_parquet import write_rl_parquet
    from prompts import load_prompt

    d = cfg.data
    if d.source != "synthetic":
        raise SystemExit(f"gpu_check: data.source={d.source}: this check trains on the synthetic arithmetic")
    system = load_prompt(cfg.pasr.prompts.refine)
    train = load_examples("synthetic", split="train", limit=d.train_size, seed=d.seed, difficulty=d.difficulty)
    val = load_examples("synthetic", split="test", limit=n_val, seed=heldout_seed(d.seed), difficulty=d.difficulty)
    data_dir.mkdir(parents=True, exist_ok=True)
    return (
        write_rl_parquet(train, data_dir / "train.parquet", system),
        write_rl_parquet(val, data_dir / "val.parquet", system),
    )


# --------------------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gpu_check", description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--run-dir", default="runs/gpu-check", help="everything the check writes (cleared first)")
    p.add_argument("--warmup-model", help="a warmed-up HF folder: skip the warm-up, only evaluate it")
    p.add_argument("--steps", type=int, default=None, help="PASR steps (default: the local preset's trainer.steps)")
    p.add_argument("--stop-at", type=int, default=2, help="the step during which run 1 gets SIGTERM (>= 2)")
    p.add_argument("--stop-delay-s", type=float, default=1.0, help="how far into that step the SIGTERM comes")
    p.add_argument(
        "--save-every",
        type=int,
        default=10,
        help="trainer.save_freq of the verl runs (the stop and the last step checkpoint anyway)",
    )
    p.add_argument(
        "--queries-per-step",
        type=int,
        default=16,
        help="queries a PASR step, both engines (16: on the CPU demo's warm-ups 16 queries a step "
        "learned where 8 did not always, docs/results/demo.md; a verl step costs little more); "
        "0 keeps the preset's",
    )
    p.add_argument("--eval-size", type=int, default=300, help="held-out problems, the learning benchmark's")
    p.add_argument("--seed", type=int, default=0, help="warm-up sampling and data order, both engines' RL phase")
    p.add_argument(
        "--preset",
        default="demo",
        help="the local preset whose warm-up and reward are used (demo: a 100-step warm-up that always refines; "
        "default: the 160-step one measured in docs/results/gpu_check.md)",
    )
    p.add_argument("--device", default="cuda", help="model.device of the local-engine parts")
    p.add_argument(
        "--budget-s", type=float, default=540.0, help="wall-clock budget; a phase that would overrun it is stopped"
    )
    p.add_argument(
        "--eval-reserve-s",
        type=float,
        default=50.0,
        help="run 2 gets SIGTERM this long before the budget ends, to leave time for its last step, "
        "the merge and the evaluation (H100: a step 4 s, merge 18 s, evaluation 17 s); the final "
        "evaluation may run up to --eval-grace-s past the budget rather than be lost",
    )
    p.add_argument(
        "--eval-grace-s",
        type=float,
        default=60.0,
        help="how far past the budget the final evaluation may run (keep budget + grace inside the "
        "machine's per-command limit)",
    )
    p.add_argument("--gpu-memory-utilization", type=float, default=0.3)
    p.add_argument("--enforce-eager", type=lambda s: s.lower() in ("1", "true", "yes"), default=True)
    p.add_argument("--no-local", action="store_true", help="skip the local engine's parity run")
    p.add_argument("--verl-driver", default=VERL_DRIVER, help="module (or .py file) run as the verl driver")
    p.add_argument("--verl-override", action="append", default=[], help="extra Hydra override for the verl runs")
    p.add_argument("--local-override", action="append", default=[], help="extra override for the local-engine runs")
    p.add_argument("--out", default="benchmarks/results/gpu_check.json")
    p.add_argument(
        "--part",
        choices=("all", "first", "resume"),
        default="all",
        help="all: the whole check; first: warm-up and verl run 1 (stopped); resume: run 2 and the "
        "evaluation, in the run directory --part first left (two commands where one is too short)",
    )
    p.add_argument(
        "--report",
        metavar="RUN_DIR",
        help="only rebuild the result of RUN_DIR (e.g. one fetched from a "
        "machine whose command was cut off) and write it to --out",
    )
    p.add_argument("--dry-run", action="store_true", help="compose and check the verl config, print the commands")
    return p


def driver_cmd(driver: str, overrides: list[str]) -> list[str]:
    head = [driver] if driver.endswith(".py") else ["-m", driver]
    return [sys.executable, *head, *overrides]


def device_name(device: str) -> str:
    if device == "cpu":
        from benchmarks.training_stages import cpu_model

        return f"cpu: {cpu_model()}"
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else device
    except (OSError, subprocess.TimeoutExpired):
        return device


class Progress:
    """One command's part of the check: phase times and findings in ``state.json``, and the
    result rebuilt from the run directory and written after every phase."""

    def __init__(self, root: Path, part: str, out: Path, budget_s: float):
        self.root, self.part, self.out = root, part, out
        self.t_start = time.monotonic()
        self.deadline = self.t_start + budget_s
        self.state = read_json(root / "state.json")
        self.state.setdefault("parts", {})[part] = {"wall_s": 0.0, "budget_s": budget_s}
        self.state.setdefault("phases", {})

    def phase(self, name: str, t: float, **found) -> None:
        self.state["phases"][name] = round(time.monotonic() - t, 1)
        self.state.update(found)
        print(
            f"gpu_check: {name} {self.state['phases'][name]} s (at {time.monotonic() - self.t_start:.0f} s)", flush=True
        )
        self.save()

    def save(self) -> dict:
        self.state["parts"][self.part]["wall_s"] = round(time.monotonic() - self.t_start, 1)
        (self.root / "state.json").write_text(json.dumps(self.state, indent=1) + "\n")
        result = build_result(self.root)
        write_result(result, self.out)
        return result


def warmup_checkpoint(args, cfg, root: Path) -> Path:
    """The model verl starts from: ``--warmup-model``, or the check's own warm-up's last step."""
    if args.warmup_model:
        return Path(args.warmup_model).resolve()
    from recipe.step_files import step_name

    return root / "warmup" / "checkpoints" / step_name(cfg.warmup.steps)


def first_part(args, cfg, root: Path, run: Progress) -> WatchedRun | None:
    """Warm-up, data, verl run 1 stopped during step ``--stop-at``; the local parity run beside it.
    Returns the parity run if it is still going (``--part all`` waits for it later)."""
    warm_dir = root / "warmup"
    warm_ckpt = warmup_checkpoint(args, cfg, root)
    t = time.monotonic()
    if args.warmup_model:
        warm = run_to_end("warmup-eval", eval_cmd(args, warm_dir, warm_ckpt), root / "warmup.log", run.deadline)
    else:
        warm = run_to_end("warmup", warmup_cmd(args, warm_dir, cfg), root / "warmup.log", run.deadline)
    run.phase("warmup", t)
    if warm.rc != 0 or not warm_ckpt.is_dir():
        print(f"gpu_check: the warm-up failed (exit {warm.rc}); see {root / 'warmup.log'}", file=sys.stderr)

    t = time.monotonic()
    write_verl_data(cfg, root / "data")  # the paths are in settings.json's verl overrides
    run.phase("data", t)
    local = None
    if not args.no_local and warm_ckpt.is_dir():
        local = WatchedRun(
            "local", local_pasr_cmd(args, root / "local_pasr", warm_ckpt), root / "local_pasr.log"
        ).start()
    t = time.monotonic()
    overrides = read_json(root / "settings.json")["verl_overrides"]
    run1 = WatchedRun(
        "verl-1",
        driver_cmd(args.verl_driver, overrides),
        root / "verl_1.log",
        on_step=stop_during(args.stop_at, args.stop_delay_s),
    )
    run1.start().wait(run.deadline - (args.eval_reserve_s if args.part == "all" else 0))
    run.phase("verl_run1", t, stop_checkpoint=latest_checkpoint(root / "verl"))
    if local is not None and args.part == "first":
        local.wait(run.deadline)
        run.phase("local_pasr", local.t0)
        return None
    return local


def resume_part(args, root: Path, run: Progress, local: WatchedRun | None) -> None:
    """verl run 2 (the same command, which resumes) until ``--steps``, then the merged final
    checkpoint evaluated as the warm-up was."""
    t = time.monotonic()
    overrides = read_json(root / "settings.json")["verl_overrides"]
    WatchedRun("verl-2", driver_cmd(args.verl_driver, overrides), root / "verl_2.log").start().wait(
        run.deadline - args.eval_reserve_s
    )
    run.phase("verl_run2", t)
    if local is not None:
        local.wait(run.deadline - 20)
        run.phase("local_pasr", local.t0)
    t = time.monotonic()
    try:
        from runtime.hf_export import merged_model_dir

        ckpt_dir = root / "verl"
        merged = merged_model_dir(ckpt_dir, cache=root / "merged")
        run.phase("merge", t, final_checkpoint=latest_checkpoint(ckpt_dir))
        t = time.monotonic()
        run_to_end(
            "final-eval",
            eval_cmd(args, root / "final_eval", merged),
            root / "final_eval.log",
            run.deadline + args.eval_grace_s,
        )
        run.phase("final_eval", t, complete=True)
    except Exception as exc:  # the figures gathered so far still go out
        print(f"gpu_check: cannot merge / evaluate the final checkpoint: {type(exc).__name__}: {exc}", file=sys.stderr)


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    out = Path(args.out)
    if args.report:
        result = build_result(Path(args.report))
        write_result(result, out)
        print_report(result)
        return 0 if result["passed"] else 1
    cfg = local_settings(args)
    args.steps = args.steps if args.steps is not None else cfg.trainer.steps
    if not 2 <= args.stop_at < args.steps:
        raise SystemExit(f"gpu_check: --stop-at must be >= 2 and below --steps ({args.steps}), got {args.stop_at}")
    root = (ROOT / args.run_dir).resolve() if not Path(args.run_dir).is_absolute() else Path(args.run_dir)
    warm_ckpt = warmup_checkpoint(args, cfg, root)
    overrides = verl_overrides(
        args, cfg, root / "data" / "train.parquet", root / "data" / "val.parquet", warm_ckpt, root / "verl"
    )

    if args.dry_run:
        from recipe.verl_engine.config import compose_config, preflight

        # the GPU and vLLM are the device's: here only the config and PASR's own checks
        preflight(compose_config(overrides), local_gpus=lambda: 1, find_module=lambda name: True)
        print("warm-up:  ", " ".join(warmup_cmd(args, root / "warmup", cfg)))
        print("verl:     ", " ".join(driver_cmd(args.verl_driver, overrides)))
        print("local:    ", " ".join(local_pasr_cmd(args, root / "local_pasr", warm_ckpt)))
        print("eval:     ", " ".join(eval_cmd(args, root / "final_eval", "<merged final checkpoint>")))
        return 0

    if args.part == "resume":
        if not (root / "settings.json").is_file() or not (root / "verl_1.log").is_file():
            raise SystemExit(f"gpu_check: --part resume needs the run directory of --part first ({root})")
    else:
        if root.exists():
            shutil.rmtree(root)
        root.mkdir(parents=True)
        settings = {
            "device": device_name(args.device),
            "steps": args.steps,
            "seed": args.seed,
            "preset": args.preset,
            "eval_size": args.eval_size,
            "stop_at": args.stop_at,
            "queries_per_step": cfg.rollout.queries_per_step,
            "save_every": args.save_every,
            "budget_s": args.budget_s,
            "verl_overrides": overrides,
            "local_overrides": local_common(args),
        }
        (root / "settings.json").write_text(json.dumps(settings, indent=1) + "\n")
    run = Progress(root, args.part, out, args.budget_s)
    print(
        f"gpu_check: {read_json(root / 'settings.json')['device']}; part {args.part}; run directory {root}", flush=True
    )
    local = first_part(args, cfg, root, run) if args.part in ("all", "first") else None
    if args.part in ("all", "resume"):
        resume_part(args, root, run, local)
    result = run.save()
    print_report(result)
    if args.part == "first":
        print("gpu_check: next, within the machine's loan: the same command with --part resume")
    print(f"gpu_check: wrote {out}; logs in {root}")
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
