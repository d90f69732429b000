"""Does the verl engine learn PASR on one GPU? One command, every start-up included:
``bash recipe/scripts/gpu_check.sh`` (this module: ``python3 -m benchmarks.gpu_check``).

1. **Warm-up** the embedded SmolLM2-135M with the local engine on the GPU, as ``pasr train``
   does (the demo preset's supervised warm-up: 100 steps whose refine-prompt traces nearly all
   refine, so the model refines whatever its trajectory, docs/results/demo.md), and evaluate it
   greedily on the 300 held-out problems of ``benchmarks.learning_signal``; or take a warmed-up HF folder (``--warmup-model``).
2. **verl, run 1**: PASR with ``python3 -m recipe.main_pasr`` from that checkpoint on the same
   synthetic arithmetic, with the local engine's reward settings (:func:`verl_overrides` says which
   and why any differ). While step ``--stop-at`` runs, the driver gets SIGTERM: verl's real loop
   must finish that step, checkpoint it and exit 0 (:mod:`recipe.verl_engine.stopping`).
3. **verl, run 2**: the same command resumes from that checkpoint and finishes ``--steps``.
   Meanwhile the local engine trains PASR from the same warm-up for the same steps (engine parity).
4. **Evaluate** the merged final checkpoint the same way as the warm-up; paired sign tests.
5. Print the checks, the table and PASS/FAIL; write ``benchmarks/results/gpu_check.json``.

Everything runs under one wall-clock budget (``--budget-s``): a phase that would overrun it is
stopped the way a user would stop it (SIGTERM, a checkpoint) and the result says so, so the
command always ends with figures. The verl driver is a subprocess whose output is read line by
line with a timestamp, which is where the start-up timeline and the step timings come from.
Without a GPU, ``--dry-run`` composes and checks the verl config and prints the commands.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from statistics import fmean

from benchmarks.watched_run import ROOT, WatchedRun, run_to_end, stop_during
from eval.significance import paired_counts, sign_test

VERL_DRIVER = "recipe.main_pasr"
ROW_KEYS = ("acc", "format", "refine_rate", "refine_fix_rate", "tokens", "n")
STEP_PARTS = ("timing_s/gen", "timing_s/old_log_prob", "timing_s/ref", "timing_s/update_actor", "timing_s/step")
# the start-up timeline of a verl run: the first line matching each, in seconds from the command
MARKS = {
    "ray_up": re.compile(r"Started a local Ray instance|Connected to Ray cluster"),
    "task_runner": re.compile(r"pasr verl: task runner on"),
    "vllm_engine": re.compile(r"Initializing a V1 LLM engine|vLLM is using|Initializing an LLM engine"),
    "vllm_ready": re.compile(r"KV cache size|Available KV cache memory|init engine .* took"),
    "fit_start": re.compile(r"Training from scratch|Resuming from"),
}


# --------------------------------------------------------------------------- settings
def local_common(args) -> list[str]:
    """Overrides every local-engine run of the check shares (warm-up, parity run, evaluations).

    ``rollout.prefill_think=false``: the local engine starts refine rollouts with ``<think>`` as a
    cold-start aid, and its warm-up then puts ``<think>`` in the prompt; verl's agent loop
    generates from the chat template with no assistant prefill, so the warm-up must teach the
    model to write ``<think>`` itself, and every evaluation here generates without it too."""
    qps = [] if not args.queries_per_step else [f"rollout.queries_per_step={args.queries_per_step}"]
    return ["rollout.prefill_think=false", f"model.device={args.device}", f"data.eval_size={args.eval_size}", *qps,
            f"trainer.seed={args.seed}", f"warmup.seed={args.seed}", "trainer.eval_plain=false",
            "trainer.dump_rollouts=true", *args.local_override]


def local_cmd(args, run_dir: Path, *overrides: str) -> list[str]:
    return [sys.executable, "-m", "recipe", "train", "--preset", args.preset, "--run-dir", str(run_dir),
            *local_common(args), *overrides]


def warmup_cmd(args, run_dir: Path, cfg) -> list[str]:
    """The warm-up and its evaluation (``eval/warmup.jsonl``), checkpointed once at its end: the
    default's checkpoint every 10 steps cost 20 of its 82 s on the H100."""
    return local_cmd(args, run_dir, "trainer.steps=0", f"trainer.save_every={cfg.warmup.steps}",
                     "trainer.eval_at_start=false", "trainer.eval_after_warmup=true")


def eval_cmd(args, run_dir: Path, model: str | Path) -> list[str]:
    """A greedy evaluation of ``model`` on the held-out problems (``eval/base.jsonl``)."""
    return local_cmd(args, run_dir, f"model.path={model}", "warmup.steps=0", "trainer.steps=0",
                     "trainer.eval_at_start=true", "trainer.eval_after_warmup=false", "trainer.eval_at_end=false")


def local_pasr_cmd(args, run_dir: Path, warm: Path) -> list[str]:
    """The local engine's PASR steps from the same warm-up (``eval/final.jsonl``)."""
    return local_cmd(args, run_dir, f"model.path={warm}", "warmup.steps=0", f"trainer.steps={args.steps}",
                     "trainer.eval_at_start=false", "trainer.eval_after_warmup=false", "trainer.eval_at_end=true")


def local_settings(args):
    """The local engine's config for this check (the reward and the sizes verl copies)."""
    from recipe.local_engine.config import load_config

    return load_config(preset=args.preset, overrides=[o for o in local_common(args) if not o.startswith("model.device")])


def verl_overrides(args, cfg, train_file: Path, val_file: Path, model: Path, ckpt_dir: Path) -> list[str]:
    """``recipe.main_pasr`` overrides that train what the local engine's ``cfg`` trains.

    Same as the local engine: the data (synthetic arithmetic, its train seed), queries per step,
    group sizes (``pasr.n_refine`` refine + ``pasr.n_plain`` plain rollouts), temperature, response
    budget, every ``pasr.*`` reward setting and prompt, the RL learning rate and its linear ramp,
    AdamW without weight decay, KL (low-var, 0.04), clip 0.2, grad-norm clip, one optimizer step
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
        f"data.train_files={train_file}", f"data.val_files={val_file}",
        f"data.train_batch_size={cfg.rollout.queries_per_step}",
        "data.max_prompt_length=512", f"data.max_response_length={cfg.rollout.max_new_tokens}",
        "data.dataloader_num_workers=0", f"data.seed={args.seed}",
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
        f"+actor_rollout_ref.rollout.engine_kwargs.vllm.enable_flashinfer_autotune={str(not args.enforce_eager).lower()}",
        f"actor_rollout_ref.rollout.temperature={cfg.rollout.temperature}",
        f"actor_rollout_ref.rollout.top_p={cfg.rollout.top_p}",
        "actor_rollout_ref.rollout.agent.num_workers=1",
        f"algorithm.norm_adv_by_std_in_grpo={str(algo.norm_adv_by_std).lower()}",
        f"pasr.n_refine={p.n_refine}", f"pasr.n_plain={p.n_plain}",
        f"pasr.tie_value={p.tie_value}", f"pasr.zeta={p.zeta}",
        f"pasr.empty_refine_value={'null' if p.empty_refine_value is None else p.empty_refine_value}",
        f"pasr.refine_compare={p.refine_compare}",
        f"pasr.draft_credit={p.draft_credit}",
        f"pasr.weights.format={p.weights.format}", f"pasr.weights.acc={p.weights.acc}",
        f"pasr.weights.refine={p.weights.refine}",
        f"pasr.prompts.refine={p.prompts.refine}", f"pasr.prompts.plain={p.prompts.plain}",
        f"pasr.judge.kind={p.judge.kind}",
        "pasr_verl.dump_validation=false",
        "trainer.n_gpus_per_node=1", "trainer.nnodes=1", "trainer.total_epochs=1",
        f"trainer.total_training_steps={args.steps}",
        f"trainer.save_freq={args.save_every}", "trainer.test_freq=-1", "trainer.val_before_train=false",
        "trainer.max_actor_ckpt_to_keep=2", "trainer.resume_mode=auto",
        f"trainer.default_local_dir={ckpt_dir}", "trainer.experiment_name=gpu-check", "trainer.logger=[console]",
    ]
    return [*out, *args.verl_override]


def write_verl_data(cfg, data_dir: Path, n_val: int = 16) -> tuple[Path, Path]:
    """The local engine's training problems as verl's RL parquet (the refine system prompt in
    each row; PASR's rollout sets the system prompt per variant anyway), and a few held-out ones
    as the validation file verl wants even when it never validates."""
    from data.synthetic import generate_problems
    from data.verl_parquet import write_rl_parquet
    from prompts import load_prompt

    d = cfg.data
    if d.source != "synthetic":
        raise SystemExit(f"gpu_check: data.source={d.source}: this check trains on the synthetic arithmetic")
    system = load_prompt(cfg.pasr.prompts.refine)
    train = [p.as_example() for p in generate_problems(d.train_size, seed=d.seed, difficulty=d.difficulty, split="train")]
    val = [p.as_example() for p in generate_problems(n_val, seed=d.seed + 1, difficulty=d.difficulty, split="test")]
    data_dir.mkdir(parents=True, exist_ok=True)
    return (write_rl_parquet(train, data_dir / "train.parquet", system),
            write_rl_parquet(val, data_dir / "val.parquet", system))


# --------------------------------------------------------------------------- results
def eval_summary(path: Path) -> dict | None:
    """The row (acc, format, refine_rate, refine_fix_rate, ...) of an evaluation dump, or None."""
    from benchmarks.learning_signal import eval_row

    if not path.is_file():
        return None
    row = eval_row(path)
    return {k: row.get(k) for k in ROW_KEYS}


def paired(a: Path, b: Path) -> dict | None:
    """Paired sign test of ``b`` against ``a`` (per-question greedy correctness)."""
    from benchmarks.learning_signal import correct_by_query

    if not (a.is_file() and b.is_file()):
        return None
    wins, losses = paired_counts(correct_by_query(a), correct_by_query(b))
    return {"wins": wins, "losses": losses, "p": sign_test(wins, losses)}


def latest_checkpoint(ckpt_dir: Path) -> int | None:
    tracker = ckpt_dir / "latest_checkpointed_iteration.txt"
    try:
        return int(tracker.read_text().strip())
    except (OSError, ValueError):
        return None


def step_timings(runs: list[WatchedRun]) -> dict:
    """Mean step time and its parts over the steps of ``runs`` (the first step of each run, which
    pays one-off warm-ups, is reported alone)."""
    rows = [m for r in runs for s, (_, m) in sorted(r.steps.items())[1:]]
    firsts = [sorted(r.steps.items())[0][1][1] for r in runs if r.steps]
    mean = {k.removeprefix("timing_s/"): round(fmean(m[k] for m in rows if k in m), 2)
            for k in STEP_PARTS if any(k in m for m in rows)}
    first = {k.removeprefix("timing_s/"): round(fmean(m[k] for m in firsts if k in m), 2)
             for k in STEP_PARTS if any(k in m for m in firsts)}
    return {"mean_step": mean, "first_step": first, "n_steps_averaged": len(rows)}


def startup(run: WatchedRun) -> dict:
    """The run's start-up timeline (seconds from its command) and the time to its first step's
    start: when the first step line was logged, less that step's own ``timing_s/step``."""
    out = {name: (None if (t := run.first(p)) is None else round(t, 1)) for name, p in MARKS.items()}
    if run.steps:
        first = min(run.steps)
        t, metrics = run.steps[first]
        out["first_step_logged"] = round(t, 1)
        out["to_first_step"] = round(t - metrics.get("timing_s/step", 0.0), 1)
    return out


def pasr_metric_trend(runs: list[WatchedRun], keys=("pasr/format_pass_rate", "pasr/acc_refine", "pasr/acc_plain",
                                                   "pasr/refine_rate", "pasr/refine_fix_rate", "critic/score/mean",
                                                   "actor/lr")) -> dict:
    merged = {s: m for r in runs for s, (_, m) in r.steps.items()}
    return {k: [float(f"{merged[s][k]:.4g}") for s in sorted(merged) if k in merged[s]] for k in keys}


def checks(result: dict) -> list[tuple[str, bool]]:
    """What PASS needs: the stop / resume path worked and the verl engine learned."""
    stop = result["stop"]
    out = [
        ("warm-up evaluated", result["warmup"] is not None),
        (f"run 1 got SIGTERM during a step (step {stop['during_step']})", bool(stop["signalled"]) and stop["during_step"] <= result["steps_asked"]),
        ("run 1 exited 0 after the SIGTERM", stop["rc"] == 0),
        (f"run 1 checkpointed the step it was in (global_step_{stop['during_step']}) and stopped there",
         stop["checkpoint"] == stop["during_step"] and max(stop["steps_run"], default=0) == stop["during_step"]),
        ("run 2 resumed from that checkpoint", bool(result["resumed"])),
        (f"run 2 finished all {result['steps_asked']} steps", result["steps"] == result["steps_asked"]),
        ("final checkpoint evaluated", result["pasr"] is not None),
    ]
    p = result.get("p_pasr_vs_warmup")
    learned = bool(result["pasr"] and result["warmup"] and result["pasr"]["acc"] > result["warmup"]["acc"]
                   and p is not None and p < 0.05)
    out.append(("verl PASR above its warm-up, sign test p < 0.05", learned))
    return out


def print_report(result: dict) -> None:
    print("\n==== gpu_check ====")
    print(f"device: {result['device']}   wall: {result['wall_s']:.0f} s   steps: {result['steps']}/{result['steps_asked']}")
    print(f"{'row':<22}" + "".join(f"{k:>16}" for k in ROW_KEYS))
    for name in ("warmup", "pasr", "local_pasr"):
        row = result.get(name)
        cells = "".join(f"{'-' if row is None or row.get(k) is None else (f'{row[k]:.3f}' if isinstance(row[k], float) else row[k]):>16}"
                        for k in ROW_KEYS)
        print(f"{name:<22}{cells}")
    for key in ("p_pasr_vs_warmup", "p_local_vs_warmup", "p_pasr_vs_local"):
        print(f"{key:<22} {result['tests'].get(key.removeprefix('p_'))}")
    print(f"timings: {json.dumps(result['timings'])}")
    for name, ok in result["checks"]:
        print(f"  {'ok  ' if ok else 'FAIL'}  {name}")
    print(("PASS" if result["passed"] else "FAIL") + f" ({result['wall_s']:.0f} s)")


# --------------------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gpu_check", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run-dir", default="runs/gpu-check", help="everything the check writes (cleared first)")
    p.add_argument("--warmup-model", help="a warmed-up HF folder: skip the warm-up, only evaluate it")
    p.add_argument("--steps", type=int, default=None, help="PASR steps (default: the local preset's trainer.steps)")
    p.add_argument("--stop-at", type=int, default=2, help="the step during which run 1 gets SIGTERM (>= 2)")
    p.add_argument("--stop-delay-s", type=float, default=1.0, help="how far into that step the SIGTERM comes")
    p.add_argument("--save-every", type=int, default=10,
                   help="trainer.save_freq of the verl runs (the stop and the last step checkpoint anyway)")
    p.add_argument("--queries-per-step", type=int, default=16,
                   help="queries a PASR step, both engines (16: on the CPU demo's warm-ups 16 queries a step "
                   "learned where 8 did not always, docs/results/demo.md; a verl step costs little more); "
                   "0 keeps the preset's")
    p.add_argument("--eval-size", type=int, default=300, help="held-out problems, the learning benchmark's")
    p.add_argument("--seed", type=int, default=0, help="warm-up sampling and data order, both engines' RL phase")
    p.add_argument("--preset", default="demo", help="the local preset whose warm-up and reward are used (demo: a 100-step warm-up that always refines; default: the 160-step one measured in docs/results/gpu_check.md)")
    p.add_argument("--device", default="cuda", help="model.device of the local-engine parts")
    p.add_argument("--budget-s", type=float, default=540.0, help="wall-clock budget; a phase that would overrun it is stopped")
    p.add_argument("--eval-reserve-s", type=float, default=50.0,
                   help="run 2 gets SIGTERM this long before the budget ends, to leave time for its last step, "
                   "the merge and the evaluation (H100: a step 4 s, merge 18 s, evaluation 17 s); the final "
                   "evaluation may run up to --eval-grace-s past the budget rather than be lost")
    p.add_argument("--eval-grace-s", type=float, default=60.0,
                   help="how far past the budget the final evaluation may run (keep budget + grace inside the "
                   "machine's per-command limit)")
    p.add_argument("--gpu-memory-utilization", type=float, default=0.3)
    p.add_argument("--enforce-eager", type=lambda s: s.lower() in ("1", "true", "yes"), default=True)
    p.add_argument("--no-local", action="store_true", help="skip the local engine's parity run")
    p.add_argument("--verl-driver", default=VERL_DRIVER, help="module (or .py file) run as the verl driver")
    p.add_argument("--verl-override", action="append", default=[], help="extra Hydra override for the verl runs")
    p.add_argument("--local-override", action="append", default=[], help="extra override for the local-engine runs")
    p.add_argument("--out", default="benchmarks/results/gpu_check.json")
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
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else device
    except (OSError, subprocess.TimeoutExpired):
        return device


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    t_start = time.monotonic()
    deadline = t_start + args.budget_s
    cfg = local_settings(args)
    args.steps = args.steps if args.steps is not None else cfg.trainer.steps
    if not 2 <= args.stop_at < args.steps:
        raise SystemExit(f"gpu_check: --stop-at must be >= 2 and below --steps ({args.steps}), got {args.stop_at}")
    root = (ROOT / args.run_dir).resolve() if not Path(args.run_dir).is_absolute() else Path(args.run_dir)
    ckpt_dir, data_dir = root / "verl", root / "data"
    warm_dir, local_dir, final_eval_dir = root / "warmup", root / "local_pasr", root / "final_eval"
    warm_ckpt = Path(args.warmup_model).resolve() if args.warmup_model else warm_dir / "checkpoints" / f"step_{cfg.warmup.steps:06d}"

    if args.dry_run:
        from recipe.verl_engine.config import compose_config, preflight

        train_file, val_file = data_dir / "train.parquet", data_dir / "val.parquet"
        overrides = verl_overrides(args, cfg, train_file, val_file, warm_ckpt, ckpt_dir)
        # the GPU and vLLM are the device's: here only the config and PASR's own checks
        preflight(compose_config(overrides), local_gpus=lambda: 1, find_module=lambda name: True)
        print("warm-up:  ", " ".join(warmup_cmd(args, warm_dir, cfg)))
        print("verl:     ", " ".join(driver_cmd(args.verl_driver, overrides)))
        print("local:    ", " ".join(local_pasr_cmd(args, local_dir, warm_ckpt)))
        print("eval:     ", " ".join(eval_cmd(args, final_eval_dir, "<merged final checkpoint>")))
        return 0

    if root.exists():
        import shutil

        shutil.rmtree(root)
    root.mkdir(parents=True)
    phases: dict[str, float] = {}

    def mark(name: str, t: float) -> None:
        phases[name] = round(time.monotonic() - t, 1)
        print(f"gpu_check: {name} {phases[name]} s (at {time.monotonic() - t_start:.0f} s)", flush=True)

    device = device_name(args.device)
    print(f"gpu_check: {device}; run directory {root}", flush=True)

    # 1. warm-up (or evaluate the given one)
    t = time.monotonic()
    if args.warmup_model:
        warm = run_to_end("warmup-eval", eval_cmd(args, warm_dir, warm_ckpt), root / "warmup.log", deadline)
        warm_eval = warm_dir / "eval" / "base.jsonl"
    else:
        warm = run_to_end("warmup", warmup_cmd(args, warm_dir, cfg), root / "warmup.log", deadline)
        warm_eval = warm_dir / "eval" / "warmup.jsonl"
    mark("warmup", t)
    if warm.rc != 0 or not warm_ckpt.is_dir():
        print(f"gpu_check: the warm-up failed (exit {warm.rc}); see {root / 'warmup.log'}", file=sys.stderr)

    # 2. data, the local parity run in the background, verl run 1 stopped during --stop-at
    t = time.monotonic()
    train_file, val_file = write_verl_data(cfg, data_dir)
    mark("data", t)
    overrides = verl_overrides(args, cfg, train_file, val_file, warm_ckpt, ckpt_dir)
    local = None
    if not args.no_local and warm_ckpt.is_dir():
        local = WatchedRun("local", local_pasr_cmd(args, local_dir, warm_ckpt), root / "local_pasr.log").start()
    final_deadline = deadline - args.eval_reserve_s
    t = time.monotonic()
    run1 = WatchedRun("verl-1", driver_cmd(args.verl_driver, overrides), root / "verl_1.log",
                      on_step=stop_during(args.stop_at, args.stop_delay_s))
    run1.start()
    run1.wait(final_deadline)
    mark("verl_run1", t)
    term = next((s for s in run1.signals if s[1] == "SIGTERM"), None)
    stop = {"asked_step": args.stop_at, "during_step": term[2] if term else None, "signal_at_s": term[0] if term else None,
            "signalled": term is not None, "rc": run1.rc, "checkpoint": latest_checkpoint(ckpt_dir),
            "steps_run": sorted(run1.steps), "stopped_line": run1.grep("pasr verl: stopped after step")}

    # 3. verl run 2: resume and finish (stopped with a checkpoint if the budget runs out)
    t = time.monotonic()
    run2 = WatchedRun("verl-2", driver_cmd(args.verl_driver, overrides), root / "verl_2.log").start()
    run2.wait(final_deadline)
    mark("verl_run2", t)
    resumed = stop["checkpoint"] is not None and run2.grep(f"global_step_{stop['checkpoint']}") and \
        bool(run2.steps) and min(run2.steps) == stop["checkpoint"] + 1
    if local is not None:
        local.wait(deadline - 20)
        phases["local_pasr_wall"] = round(local.wall_s, 1)

    # 4. merge and evaluate the final verl checkpoint
    t = time.monotonic()
    final_eval = final_eval_dir / "eval" / "base.jsonl"
    merged = None
    try:
        from runtime.hf_export import merged_model_dir

        merged = merged_model_dir(ckpt_dir, cache=root / "merged")
        mark("merge", t)
        t = time.monotonic()
        run_to_end("final-eval", eval_cmd(args, final_eval_dir, merged), root / "final_eval.log", deadline + args.eval_grace_s)
        mark("final_eval", t)
    except Exception as exc:  # the figures gathered so far still go out
        print(f"gpu_check: cannot merge / evaluate the final checkpoint: {type(exc).__name__}: {exc}", file=sys.stderr)

    local_eval = local_dir / "eval" / "final.jsonl"
    done = latest_checkpoint(ckpt_dir)
    result = {
        "device": device,
        "wall_s": round(time.monotonic() - t_start, 1),
        "budget_s": args.budget_s,
        "steps": done,
        "steps_asked": args.steps,
        "resumed": bool(resumed),
        "stop": stop,
        "warmup": eval_summary(warm_eval),
        "pasr": eval_summary(final_eval),
        "local_pasr": eval_summary(local_eval),
        "tests": {"pasr_vs_warmup": paired(warm_eval, final_eval), "local_vs_warmup": paired(warm_eval, local_eval),
                  "pasr_vs_local": paired(local_eval, final_eval)},
        "timings": {"phases": phases, "startup_run1": startup(run1), "startup_run2": startup(run2),
                    **step_timings([run1, run2])},
        "train_metrics": pasr_metric_trend([run1, run2]),
        "settings": {"seed": args.seed, "preset": args.preset, "eval_size": args.eval_size, "stop_at": args.stop_at,
                     "queries_per_step": cfg.rollout.queries_per_step, "save_every": args.save_every, "verl_overrides": overrides,
                     "local_overrides": local_common(args)},
    }
    p = result["tests"]["pasr_vs_warmup"]
    result["p_pasr_vs_warmup"] = p["p"] if p else None
    result["checks"] = checks(result)
    result["passed"] = all(ok for _, ok in result["checks"])
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print_report(result)
    print(f"gpu_check: wrote {out}; logs in {root}")
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
