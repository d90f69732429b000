"""Does the verl engine learn PASR on one GPU as the local engine does? ``bash recipe/scripts/gpu_check.sh``
(this module: ``python3 -m benchmarks.gpu_check``), every start-up included.

``--part learn`` (the default, :func:`learn_part`): verl's driver starts first and waits for its model
while the local engine warms the embedded SmolLM2-135M up on the GPU with its rate decayed to zero;
verl then trains PASR on the synthetic arithmetic of ``benchmarks.learning_signal`` with the local
engine's reward and optimizer settings (:func:`verl_overrides`) until ``--steps`` or the deadline (a
SIGTERM: the step in flight is checkpointed), the local engine trains the same steps beside it, and the
warm-up, verl's merged last checkpoint and the local engine's checkpoint of the same step are evaluated
greedily on the 300 held-out problems (paired sign tests), and with K answers a question sampled at
temperature 0.5 beside (``--eval-sampled-k``: mean@K, paired tests on per-question means; the paper's
protocol). PASS: verl's training curve moves as the local engine's and its greedy held-out row is within
noise of the local one.

``--part all`` is the stop/resume check, which ``--part first`` and ``--part resume`` split in two:
1. **Warm-up** as above (or ``--warmup-model``), evaluated.
2. **verl, run 1**: while step ``--stop-at`` runs, the driver gets SIGTERM: verl's real loop must
   finish that step, checkpoint it and exit 0 (:mod:`recipe.verl_engine.stopping`); the local engine
   trains the same steps meanwhile.
3. **verl, run 2**: the same command resumes from that checkpoint and finishes ``--steps``.
4. **Evaluate** the merged final checkpoint the same way as the warm-up; paired sign tests.
Each verl start-up took 150-170 s on an H100 and about 250 s on an H200 (docs/results/gpu_check.md), so
the two halves are two commands where one is too short; the machine keeps the run directory between.

Each command runs under its own wall-clock budget (``--budget-s``): a phase that would overrun it is
stopped the way a user would stop it (SIGTERM, a checkpoint). The result is rebuilt from the run
directory after every phase (:mod:`benchmarks.gpu_check_report`) and written to
``benchmarks/results/gpu_check.json``, so a command killed by a machine's limit still leaves its
figures, and ``--report RUN_DIR`` rebuilds them afterwards. Without a GPU, ``--dry-run`` composes and
checks the verl config and prints it, the commands and (learn) a plan from the last measured run.
"""

from __future__ import annotations

import argparse
import importlib
import json
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from benchmarks import sampled_rows
from benchmarks.gpu_check_report import (
    MARKS,
    build_result,
    latest_checkpoint,
    plot_learn,
    print_report,
    read_json,
    write_result,
)
from benchmarks.report_files import ReportError, rebuild
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
        f"warmup.lr_schedule={args.warmup_lr_schedule}",
        "trainer.eval_plain=false",
        *sampled_rows.overrides(args),  # mean@K at T=0.5 beside every greedy evaluation
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


def warmup_cmd(args, run_dir: Path, cfg, evaluate: bool = True) -> list[str]:
    """The warm-up and its evaluation (``eval/warmup.jsonl``), checkpointed once at its end: the
    default's checkpoint every 10 steps cost 20 of its 82 s on the H100. ``evaluate`` False: the
    checkpoint only (``--part learn`` evaluates it beside verl's start-up instead of before it)."""
    return local_cmd(
        args,
        run_dir,
        "trainer.steps=0",
        f"trainer.save_every={cfg.warmup.steps}",
        "trainer.eval_at_start=false",
        f"trainer.eval_after_warmup={str(evaluate).lower()}",
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


# What the local engine changes to train as verl does, in this check's parity runs: verl keeps the
# rows of groups without reward spread in its token-mean loss (their KL gradient included), which
# the local engine skips by default (algo.skip_zero_adv) to save CPU time. Skipping them gave the
# local engine's steps a gradient norm 2-3x verl's (0.5-1.4 against 0.16-0.65) on the H200 on
# 2026-11-28, and its held-out accuracy fell where verl's held (docs/results/gpu_check.md).
PARITY = ("algo.skip_zero_adv=false",)
# --part learn: the local engine must reach verl's last step this long before the evaluations' grace
# ends (--eval-grace-s past the budget): its evaluation of the 300 held-out problems, start-up
# included, took 30.4 s beside verl's on the H200.
LOCAL_EVAL_S = 35.0


def local_pasr_cmd(args, run_dir: Path, warm: Path, parity: bool = False) -> list[str]:
    """The local engine's PASR steps from the same warm-up (``eval/final.jsonl``). ``--part learn``
    keeps every step's weights instead (``checkpoints/step_N``, the optimizer state in the newest
    only) and evaluates none: verl's step count is known only when the deadline stops it, and the
    local row is evaluated at that step. ``parity``: trained as verl trains (:data:`PARITY`)."""
    if args.part == "learn":
        every = ["trainer.save_every=1", f"trainer.keep_last={args.steps}", "trainer.eval_at_end=false"]
    else:
        every = ["trainer.eval_at_end=true"]
    return local_cmd(
        args,
        run_dir,
        f"model.path={warm}",
        "warmup.steps=0",
        f"trainer.steps={args.steps}",
        "trainer.eval_at_start=false",
        "trainer.eval_after_warmup=false",
        *every,
        *(PARITY if parity else ()),
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
    keeps zero-advantage rows in the loss's token mean (the check's local runs do too: :data:`PARITY`). The ramp
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
        # learn: a checkpoint at the end (or at the deadline's stop) only; each costs seconds
        f"trainer.save_freq={args.steps if args.part == 'learn' else args.save_every}",
        "trainer.test_freq=-1",
        "trainer.val_before_train=false",
        "trainer.max_actor_ckpt_to_keep=2",
        "trainer.resume_mode=auto",
        f"trainer.default_local_dir={ckpt_dir}",
        "trainer.experiment_name=gpu-check",
        "trainer.logger=[console]",
        # one machine, one job: Ray's dashboard (a process of its own at start-up) serves nobody here
        "+ray_kwargs.ray_init.include_dashboard=false",
    ]
    if args.part == "learn":  # verl starts before its model is written: the warm-up runs beside its start-up
        out.append(f"pasr_verl.wait_for_model_s={args.budget_s}")
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
    p.add_argument(
        "--steps",
        type=int,
        default=None,
        help="PASR steps (default: the local preset's trainer.steps; learn: 40, the most it runs: verl "
        "stops at the deadline, the local engine keeps every step)",
    )
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
    sampled_rows.add_option(p)
    p.add_argument("--seed", type=int, default=0, help="warm-up sampling and data order, both engines' RL phase")
    p.add_argument(
        "--preset",
        default="demo",
        help="the local preset whose warm-up and reward are used (demo: a 100-step warm-up that always refines; "
        "default: the 160-step one measured in docs/results/gpu_check.md)",
    )
    p.add_argument("--device", default="cuda", help="model.device of the local-engine parts")
    p.add_argument(
        "--budget-s",
        type=float,
        default=None,
        help="wall-clock budget; a phase that would overrun it is stopped (learn: 430, so that the "
        "environment's set-up and this fit an 8-minute device command; the others: 540)",
    )
    p.add_argument(
        "--eval-reserve-s",
        type=float,
        default=None,
        help="learn: 75; the others: 50. The verl run gets SIGTERM this long before the budget ends, "
        "to leave time for its last step, the merge and the evaluation (H100: a step 4 s, merge 18 s, "
        "evaluation 17 s); the final evaluation may run up to --eval-grace-s past the budget rather than be lost",
    )
    p.add_argument(
        "--eval-grace-s",
        type=float,
        default=None,
        help="learn: 20; the others: 60. How far past the budget the final evaluation may run (keep "
        "budget + grace inside the machine's per-command limit)",
    )
    p.add_argument("--gpu-memory-utilization", type=float, default=0.3)
    p.add_argument("--enforce-eager", type=lambda s: s.lower() in ("1", "true", "yes"), default=True)
    p.add_argument("--no-local", action="store_true", help="skip the local engine's parity run")
    p.add_argument("--verl-driver", default=VERL_DRIVER, help="module (or .py file) run as the verl driver")
    p.add_argument("--verl-override", action="append", default=[], help="extra Hydra override for the verl runs")
    p.add_argument(
        "--verl-env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an environment variable of the verl runs (Ray's workers and vLLM inherit it), e.g. "
        "VLLM_USE_V2_MODEL_RUNNER=0: on the H200 on 2026-11-28 vLLM 0.24's V2 model runner spent "
        "~100 s of its start-up compiling Triton kernels on a fresh machine (docs/results/gpu_check.md)",
    )
    p.add_argument("--local-override", action="append", default=[], help="extra override for the local-engine runs")
    p.add_argument("--out", default="benchmarks/results/gpu_check.json")
    p.add_argument(
        "--part",
        choices=("learn", "all", "first", "resume"),
        default="learn",
        help="learn: does verl learn as the local engine does (one verl run from a decayed warm-up, "
        "no resume; the default); all: the stop/resume check with its learning question; first: "
        "warm-up and verl run 1 (stopped); resume: run 2 and the evaluation, in the run directory "
        "--part first left (two commands where one is too short), or, after --part learn, the "
        "stop/resume check alone with one verl start-up (learn's run resumed and stopped)",
    )
    p.add_argument(
        "--plot",
        metavar="PNG",
        help="with --report on a --part learn run: both engines' training curves drawn to PNG",
    )
    p.add_argument(
        "--report",
        metavar="RUN_DIR",
        help="only rebuild the result of RUN_DIR (e.g. one fetched from a "
        "machine whose command was cut off) and write it to --out",
    )
    p.add_argument(
        "--warmup-lr-schedule",
        default="cosine",
        choices=("cosine", "constant"),
        help="the warm-up's rate: decayed to zero (cosine), or held (constant, as the runs before "
        "2026-11-28: a gain over such a warm-up is partly the RL phase's lower rate settling it)",
    )
    p.add_argument(
        "--plan-from",
        default="benchmarks/results/gpu_check.json",
        help="the measured run whose phase times --dry-run's plan uses",
    )
    p.add_argument("--commit", default=None, help="the commit the check runs (default: git rev-parse HEAD)")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="compose and check the verl config; print it, every command and the expected time of each "
        "phase from the last measured run",
    )
    return p


def verl_env(args) -> dict[str, str]:
    pairs = [e.partition("=") for e in args.verl_env]
    bad = [e for e, (_, sep, _) in zip(args.verl_env, pairs) if not sep]
    if bad:
        raise SystemExit(f"gpu_check: --verl-env takes KEY=VALUE, got {', '.join(bad)}")
    return {k: v for k, _, v in pairs}


def driver_cmd(driver: str, overrides: list[str]) -> list[str]:
    head = [driver] if driver.endswith(".py") else ["-m", driver]
    return [sys.executable, *head, *overrides]


def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, cwd=ROOT)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (out.stdout.strip() or None) if out.returncode == 0 else None


def learn_plan(args, measured: dict) -> list[str]:
    """``--part learn``'s expected timeline from a measured run's phase times (a ``--part learn``
    result, or the older two-run layout), and how many verl steps that leaves before the deadline."""
    t = measured.get("timings", {})
    phases = t.get("phases", {})
    start = t.get("startup") or t.get("startup_run1") or {}
    first, mean = t.get("first_step", {}).get("step"), t.get("mean_step", {}).get("step")
    if not (phases.get("warmup") and start.get("to_first_step") and first and mean):
        return [f"plan: no measured phase times in {args.plan_from}"]
    warm = phases["warmup"]
    # learn starts verl first and its start-up waits for the warm-up only past its task runner's
    # start (a learn run's measured start-up has that wait in it already)
    lag = 0.0 if "startup" in t else max(0.0, warm - (start.get("task_runner") or 0.0))
    steps_from = phases.get("data", 0.0) + start["to_first_step"] + lag
    stop_at = args.budget_s - args.eval_reserve_s
    fit = 0 if stop_at < steps_from + first else 1 + int((stop_at - steps_from - first) // mean)
    return [
        f"plan (from {args.plan_from}, {measured.get('device')}, commit {measured.get('commit') or '?'}):",
        f"  warm-up {warm:.0f} s beside verl's start-up "
        + (
            "(the measured start-up includes verl's wait for it)"
            if "startup" in t
            else f"(verl waits {lag:.0f} s more for it)"
        ),
        f"  verl start-up {start['to_first_step']:.0f} s -> first step at ~{steps_from:.0f} s",
        f"  first step {first:.0f} s, then {mean:.1f} s a step; SIGTERM at {stop_at:.0f} s "
        f"(budget {args.budget_s:.0f} - reserve {args.eval_reserve_s:.0f})",
        f"  -> about {min(fit, args.steps)} verl steps (at most {args.steps}); "
        f"merge ~{phases.get('merge', 18.0):.0f} s and the evaluations "
        f"~{phases.get('final_evals', 30.0) + sampled_rows.extra_s(args):.0f} s after",
    ]


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
    result rebuilt from the run directory (``build``, this check's :func:`build_result` unless
    another benchmark gives its own) and written after every phase."""

    def __init__(self, root: Path, part: str, out: Path, budget_s: float, name: str = "gpu_check", build=None):
        self.root, self.part, self.out, self.name = root, part, out, name
        self.build = build or build_result
        self.t_start = time.monotonic()
        self.deadline = self.t_start + budget_s
        self.state = read_json(root / "state.json")
        self.state.setdefault("parts", {})[part] = {"wall_s": 0.0, "budget_s": budget_s}
        self.state.setdefault("phases", {})

    def phase(self, name: str, t: float, **found) -> None:
        self.state["phases"][name] = round(time.monotonic() - t, 1)
        self.state.update(found)
        print(
            f"{self.name}: {name} {self.state['phases'][name]} s (at {time.monotonic() - self.t_start:.0f} s)",
            flush=True,
        )
        self.save()

    def took(self, name: str, seconds: float) -> None:
        """A phase that ran beside others: its own wall time, not the time since ``t``."""
        self.state["phases"][name] = round(seconds, 1)
        print(f"{self.name}: {name} {self.state['phases'][name]} s", flush=True)
        self.save()

    def save(self) -> dict:
        self.state["parts"][self.part]["wall_s"] = round(time.monotonic() - self.t_start, 1)
        (self.root / "state.json").write_text(json.dumps(self.state, indent=1) + "\n")
        result = self.build(self.root)
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
            "local", local_pasr_cmd(args, root / "local_pasr", warm_ckpt, parity=True), root / "local_pasr.log"
        ).start()
    t = time.monotonic()
    overrides = read_json(root / "settings.json")["verl_overrides"]
    run1 = WatchedRun(
        "verl-1",
        driver_cmd(args.verl_driver, overrides),
        root / "verl_1.log",
        on_step=stop_during(args.stop_at, args.stop_delay_s),
        env=verl_env(args),
    )
    run1.start().wait(run.deadline - (args.eval_reserve_s if args.part == "all" else 0))
    run.phase("verl_run1", t, stop_checkpoint=latest_checkpoint(root / "verl"))
    if local is not None and args.part == "first":
        local.wait(run.deadline)
        run.phase("local_pasr", local.t0)
        return None
    return local


def _import_quietly(module: str) -> None:
    try:
        importlib.import_module(module)
    except Exception:  # the merge itself will say what is wrong
        pass


def await_fit(verl: WatchedRun, until: float) -> None:
    """Until verl's training loop starts (or it exits, or ``until``): by then vLLM has profiled
    its memory. vLLM 0.24 asserts that no other process freed GPU memory while it did (a local run
    that ended then would stop verl's start-up)."""
    while verl.proc.poll() is None and time.monotonic() < until and verl.first(MARKS["fit_start"]) is None:
        time.sleep(0.5)


def learn_part(args, cfg, root: Path, run: Progress) -> None:
    """``--part learn``: one verl run, no resume. verl's start-up is minutes of process spawns and
    imports on the CPU while the GPU idles, so it starts first, told to wait for its model
    (``pasr_verl.wait_for_model_s``: its task runner reads the model about a minute in); the warm-up
    (rate decayed to zero) trains and checkpoints meanwhile. The warm-up's evaluation and the local
    engine's steps (each step's weights kept) start once verl's training loop has (:func:`await_fit`):
    vLLM refuses to start when another process frees GPU memory while it profiles its own.
    verl trains until ``--steps`` or until the deadline less ``--eval-reserve-s``, where the recipe's
    stop path ends it (SIGTERM: the step in flight finishes and is checkpointed), since how many
    steps fit is known only once the start-up has been measured. Then verl's last checkpoint is
    merged and evaluated beside the local engine's checkpoint of the same step."""
    from recipe.step_files import step_name, step_of

    # the merge (verl.model_merger, in this process) imports torch and verl: now, not after the deadline
    threading.Thread(target=_import_quietly, args=("verl.model_merger.fsdp_model_merger",), daemon=True).start()
    warm_ckpt = warmup_checkpoint(args, cfg, root)
    t = time.monotonic()
    write_verl_data(cfg, root / "data")
    run.phase("data", t)
    overrides = read_json(root / "settings.json")["verl_overrides"]
    verl = WatchedRun("verl", driver_cmd(args.verl_driver, overrides), root / "verl.log", env=verl_env(args)).start()
    if not args.warmup_model:
        t = time.monotonic()
        warm = run_to_end(
            "warmup", warmup_cmd(args, root / "warmup", cfg, evaluate=False), root / "warmup.log", run.deadline
        )
        run.phase("warmup", t)
        if warm.rc != 0 or not warm_ckpt.is_dir():
            print(f"gpu_check: the warm-up failed (exit {warm.rc}); see {root / 'warmup.log'}", file=sys.stderr)
            verl.wait(time.monotonic())  # stopped: it has nothing to start from
            return
    beside = [WatchedRun("warmup-eval", eval_cmd(args, root / "warmup_eval", warm_ckpt), root / "warmup_eval.log")]
    if not args.no_local:
        beside.append(
            WatchedRun(
                "local", local_pasr_cmd(args, root / "local_pasr", warm_ckpt, parity=True), root / "local_pasr.log"
            )
        )
    stop_at = run.deadline - args.eval_reserve_s
    await_fit(verl, stop_at)
    run.took("verl_to_fit", time.monotonic() - verl.t0)
    for r in beside:
        r.start()
    verl.wait(stop_at, grace_s=args.eval_reserve_s / 2)
    run.took("verl", verl.wall_s)
    k = latest_checkpoint(root / "verl")
    # verl's merge and evaluation start at once: the local engine, started with verl's loop but
    # slowed at first by its own start and the warm-up's evaluation beside it, may be steps behind
    final = start_final_eval(args, root, run) if k is not None else None
    local_ckpts = root / "local_pasr" / "checkpoints"
    for r in beside:
        if r.name == "local" and k is not None:
            # the same step as verl's, not whichever the deadline caught (H200 2026-11-28: 17 of 20)
            until = run.deadline + args.eval_grace_s - LOCAL_EVAL_S - sampled_rows.extra_s(args)  # ends by the grace
            reached = wait_for_step(r, local_ckpts, k, until=until)
            run.state["local_caught_up_s"] = round(time.monotonic() - run.t_start, 1) if reached else None
            if reached:  # nothing after verl's step is wanted: no stop checkpoint to wait for
                r.kill_group()
            r.wait(until, grace_s=15)
        else:  # the warm-up's evaluation: long done, normally
            r.wait(run.deadline - args.eval_reserve_s / 2)
        run.took(r.name.replace("-", "_"), r.wall_s)

    if k is None:
        print("gpu_check: verl left no checkpoint: nothing to evaluate", file=sys.stderr)
        return
    evals = [final] if final is not None else []
    local_steps = sorted(s for p in local_ckpts.glob("step_*") if p.is_dir() and (s := step_of(p.name)) is not None)
    local_k = max((s for s in local_steps if s <= k), default=None)
    if local_k is not None:
        run.state["local_eval_step"] = local_k
        evals.append(
            WatchedRun(
                "local-eval",
                eval_cmd(args, root / "local_eval", local_ckpts / step_name(local_k)),
                root / "local_eval.log",
            ).start()
        )
    t = time.monotonic()
    for r in evals:
        r.wait(run.deadline + args.eval_grace_s)
    run.phase("final_evals", t, complete=True)


def wait_for_step(local: WatchedRun, ckpt_dir: Path, step: int, until: float) -> bool:
    """Wait until the local engine has checkpointed ``step`` (its checkpoints are renamed into
    place whole) or has exited, or until ``until`` (monotonic). True when the step is there."""
    from recipe.step_files import step_name

    target = ckpt_dir / step_name(step)
    while not target.is_dir() and local.proc.poll() is None and time.monotonic() < until:
        time.sleep(0.2)
    return target.is_dir()


def resume_after_learn(args, root: Path, run: Progress) -> None:
    """``--part resume`` after ``--part learn`` on the same machine: the stop/resume check with one
    verl start-up. The same verl command, asked for three steps past learn's last checkpoint K,
    must resume from ``global_step_K``; during step K + 2 it gets SIGTERM and must finish that
    step, checkpoint it and exit 0 without starting K + 3."""
    k = latest_checkpoint(root / "verl")
    if k is None:
        raise SystemExit(f"gpu_check: --part resume: --part learn left no verl checkpoint in {root / 'verl'}")
    overrides = [
        o
        for o in read_json(root / "settings.json")["verl_overrides"]
        if not o.startswith("trainer.total_training_steps=")
    ]
    run.state["resume_from"] = k
    t = time.monotonic()
    WatchedRun(
        "verl-resume",
        driver_cmd(args.verl_driver, [*overrides, f"trainer.total_training_steps={k + 3}"]),
        root / "verl_resume.log",
        on_step=stop_during(k + 2, args.stop_delay_s),
        env=verl_env(args),
    ).start().wait(run.deadline)
    run.phase("verl_resume", t)


def start_final_eval(args, root: Path, run: Progress) -> WatchedRun | None:
    """verl's last checkpoint merged (phase ``merge``) and its greedy evaluation started
    (``final_eval/``); None, with the reason on stderr, when it cannot be merged: the figures
    gathered so far still go out."""
    t = time.monotonic()
    try:
        from runtime.hf_export import merged_model_dir

        merged = merged_model_dir(root / "verl", cache=root / "merged")
    except Exception as exc:
        print(f"gpu_check: cannot merge the final checkpoint: {type(exc).__name__}: {exc}", file=sys.stderr)
        return None
    run.phase("merge", t, final_checkpoint=latest_checkpoint(root / "verl"))
    return WatchedRun("final-eval", eval_cmd(args, root / "final_eval", merged), root / "final_eval.log").start()


def resume_part(args, root: Path, run: Progress, local: WatchedRun | None) -> None:
    """verl run 2 (the same command, which resumes) until ``--steps``, then the merged final
    checkpoint evaluated as the warm-up was."""
    t = time.monotonic()
    overrides = read_json(root / "settings.json")["verl_overrides"]
    WatchedRun("verl-2", driver_cmd(args.verl_driver, overrides), root / "verl_2.log", env=verl_env(args)).start().wait(
        run.deadline - args.eval_reserve_s
    )
    run.phase("verl_run2", t)
    if local is not None:
        local.wait(run.deadline - 20)
        run.phase("local_pasr", local.t0)
    final = start_final_eval(args, root, run)
    if final is not None:
        t = time.monotonic()
        final.wait(run.deadline + args.eval_grace_s)
        run.phase("final_eval", t, complete=True)


def parse_args(argv=None) -> argparse.Namespace:
    """The command line, with the defaults that depend on ``--part`` filled in."""
    args = build_parser().parse_args(argv)
    learn = args.part == "learn"
    for name, if_learn, otherwise in (
        ("budget_s", 430.0, 540.0),
        ("eval_reserve_s", 75.0, 50.0),
        ("eval_grace_s", 20.0, 60.0),
    ):
        if getattr(args, name) is None:
            setattr(args, name, if_learn if learn else otherwise)
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    out = Path(args.out)
    if args.report:
        try:
            result = rebuild(args.report, "gpu_check", build_result, print_report)
        except ReportError as exc:
            print(f"gpu_check: {exc}", file=sys.stderr)
            return 2
        write_result(result, out)
        if result.get("part") == "learn" and args.plot:
            print(f"gpu_check: wrote {plot_learn(result, Path(args.plot))}")
        return 0 if result["passed"] else 1
    learn = args.part == "learn"
    cfg = local_settings(args)
    args.steps = args.steps if args.steps is not None else (40 if learn else cfg.trainer.steps)
    args.commit = args.commit or git_commit()
    if not learn and not 2 <= args.stop_at < args.steps:
        raise SystemExit(f"gpu_check: --stop-at must be >= 2 and below --steps ({args.steps}), got {args.stop_at}")
    root = (ROOT / args.run_dir).resolve() if not Path(args.run_dir).is_absolute() else Path(args.run_dir)
    warm_ckpt = warmup_checkpoint(args, cfg, root)
    overrides = verl_overrides(
        args, cfg, root / "data" / "train.parquet", root / "data" / "val.parquet", warm_ckpt, root / "verl"
    )

    if args.dry_run:
        from omegaconf import OmegaConf

        from recipe.verl_engine.config import compose_config, preflight

        # the GPU and vLLM are the device's: here only the config and PASR's own checks
        config = compose_config(overrides)
        preflight(config, local_gpus=lambda: 1, find_module=lambda name: True)
        print("# the composed verl config\n" + OmegaConf.to_yaml(config))
        print("warm-up:  ", " ".join(warmup_cmd(args, root / "warmup", cfg, evaluate=not learn)))
        print("verl:     ", " ".join(driver_cmd(args.verl_driver, overrides)))
        print("local:    ", " ".join(local_pasr_cmd(args, root / "local_pasr", warm_ckpt, parity=True)))
        print("eval:     ", " ".join(eval_cmd(args, root / "final_eval", "<merged final checkpoint>")))
        if learn:
            for line in learn_plan(args, read_json(Path(args.plan_from))):
                print(line)
        return 0

    after_learn = args.part == "resume" and read_json(root / "settings.json").get("part") == "learn"
    if args.part == "resume":
        if not after_learn and not (root / "verl_1.log").is_file():
            raise SystemExit(
                f"gpu_check: --part resume needs the run directory of --part learn or --part first ({root})"
            )
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
            "part": args.part,
            "commit": args.commit,
            "warmup_lr_schedule": args.warmup_lr_schedule,
            "verl_overrides": overrides,
            "verl_env": verl_env(args),
            "local_overrides": local_common(args),
        }
        (root / "settings.json").write_text(json.dumps(settings, indent=1) + "\n")
    run = Progress(root, args.part, out, args.budget_s)
    print(
        f"gpu_check: {read_json(root / 'settings.json')['device']}; part {args.part}; run directory {root}", flush=True
    )
    if learn:
        learn_part(args, cfg, root, run)
    local = first_part(args, cfg, root, run) if args.part in ("all", "first") else None
    if after_learn:
        resume_after_learn(args, root, run)
    elif args.part in ("all", "resume"):
        resume_part(args, root, run, local)
    result = run.save()
    print_report(result)
    if args.part == "first":
        print("gpu_check: next, within the machine's loan: the same command with --part resume")
    print(f"gpu_check: wrote {out}; logs in {root}")
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
