"""Does a ten-times-larger RL phase turn PASR's sampled gains into held-out gains? The embedded
model, three seeds, against the reward without its refine term. ``bash recipe/scripts/gpu_scale.sh``
(this module: ``python3 -m benchmarks.gpu_scale``), on one GPU, every start-up included.

Why: over a warm-up whose rate decayed to zero, ten PASR steps made the sampled answers better
(the reward rose) without moving the greedy held-out ones (docs/results/demo.md); a larger RL
phase is cheap on a GPU. The local engine only (``python -m recipe train``), per seed S
(``warmup.seed`` = ``trainer.seed`` = S):

1. **warm-up** of the embedded SmolLM2-135M, its rate decayed to zero (``warmup.lr_schedule=cosine``),
   checkpointed at its end and evaluated greedily on the held-out problems (``eval/warmup.jsonl``);
2. from that checkpoint, **PASR** (the reward with its refine term) and the **control** (the same
   run with ``pasr.weights.refine=0``, everything else equal) for ``--steps`` steps of
   ``--queries-per-step`` queries x (``--n-refine`` + ``--n-plain``) rollouts, each evaluated
   greedily at its end (``eval/final.jsonl``);
3. paired sign tests of PASR against the warm-up and the control, per seed and pooled; refine-fix
   and refine-break rates, tokens, every RL run's per-step curves (its ``metrics.jsonl``); beside
   each greedy row mean@K at temperature 0.5 (the paper's protocol, ``--eval-sampled-k``) with the
   same tests on per-question means (:mod:`benchmarks.sampled_rows`).

The three warm-ups run side by side on the one GPU, then the six RL runs (a 135M model fits
many times over). Everything runs under one wall-clock budget (``--budget-s``): from
``--eval-reserve-s`` before its end the RL runs still going stop after one same step (SIGINT
during it: the local trainer finishes the step, checkpoints it and exits), a run still going at
the budget's end gets SIGTERM and SIGKILL, and the checkpoints of the stopped runs are evaluated
in a last phase. The result is rebuilt from the run directory after every phase, so a command
cut off by the machine still leaves its figures, and ``--report RUN_DIR`` rebuilds them from the
files alone. ``--dry-run`` prints every command and the plan: each phase's expected time from a
measured step time, and how many steps fit.

This module is the driver (the commands, the phases side by side, the options); the plan is in
:mod:`benchmarks.gpu_scale_plan` and the result in :mod:`benchmarks.gpu_scale_report` (both
re-exported here); the command lines come from :mod:`benchmarks.gpu_commands`, as gpu_check's do.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

from benchmarks import sampled_rows
from benchmarks.gpu_check import build_parser as gpu_check_parser
from benchmarks.gpu_check_report import paired, read_json, write_result  # noqa: F401  (paired, read_json: re-exported)
from benchmarks.gpu_commands import eval_cmd, local_pasr_cmd, local_settings, warmup_cmd
from benchmarks.gpu_phases import Progress, device_name, fit_outer_timeout, git_commit, prepare_root
from benchmarks.gpu_scale_plan import (  # noqa: F401  re-exported: the plan, moved there
    BASIS,
    CKPT_S,
    CONVERT_S,
    EVAL_S,
    START_S,
    WARMUP_STEP_S,
    plan,
    print_plan,
)
from benchmarks.gpu_scale_report import (  # noqa: F401  re-exported: the result, moved there
    ARMS,
    CURVE_KEYS,
    PLOT_CURVES,
    POOLED_KEYS,
    QUESTION,
    ROWS,
    TESTS,
    _pair,
    arm_eval,
    build_result,
    curves,
    evaluated_step,
    mean_of,
    plot_scale,
    pooled,
    print_report,
    reward_of,
    row,
    run_config,
    seed_dumps,
    seed_result,
)
from benchmarks.learning_signal import PAPER_EXACT, eval_row  # noqa: F401  (eval_row: re-exported)
from benchmarks.report_files import ReportError, rebuild
from benchmarks.training_stages import fmt  # noqa: F401  re-exported
from benchmarks.watched_run import ROOT, WatchedRun
from eval.significance import sign_test  # noqa: F401  re-exported
from recipe.metrics_file import metric_lines

ARM_OVERRIDES = {"pasr": [], "control": ["pasr.weights.refine=0"]}  # the control: the reward less its refine term


# --------------------------------------------------------------------------- commands
def with_(args, **changes) -> argparse.Namespace:
    """What gpu_check's command builders read from their ``args``: gpu_check's own defaults (for
    whatever option they come to read), this benchmark's options over them, its part whose local
    PASR run evaluates itself at its end (``all``), the decayed warm-up, then ``changes`` (one
    run's seed and overrides)."""
    fixed = {"part": "all", "warmup_lr_schedule": "cosine"}
    return argparse.Namespace(**{**vars(gpu_check_parser().parse_args([])), **vars(args), **fixed, **changes})


def common_overrides(args, n_runs: int) -> list[str]:
    """What every run of the benchmark shares beyond gpu_check's common settings (which carry
    the decayed warm-up, :func:`with_`): the group sizes, one generate call for a step's rollouts
    on the GPU, and the cores shared among the runs side by side. The user's
    ``--local-override`` comes last."""
    return [
        f"pasr.n_refine={args.n_refine}",
        f"pasr.n_plain={args.n_plain}",
        f"rollout.gen_batch_size={args.gen_batch_size}",
        f"model.threads={max(1, len(os.sched_getaffinity(0)) // n_runs)}",
    ]


def reward_overrides(args) -> list[str]:
    """``preset``: the reward of ``--preset`` (the cpu preset's: margin, tie 0, restating refines
    paid 0), the one the earlier CPU and GPU runs trained with; ``paper``: the paper-exact reward
    of benchmarks.learning_signal."""
    return list(PAPER_EXACT) if args.reward == "paper" else []


def warmup_checkpoint(root: Path, seed: int, cfg) -> Path:
    """Where seed ``seed``'s warm-up leaves its end (pinned), the RL runs' ``model.path``."""
    from recipe.step_files import step_name

    return root / f"seed_{seed}" / "warmup" / "checkpoints" / step_name(cfg.warmup.steps)


def run_args(args, seed: int, n_runs: int, *overrides: str) -> argparse.Namespace:
    """One run's ``args`` for gpu_check's builders: its seed, the shared overrides, its own, the user's."""
    return with_(args, seed=seed, local_override=[*common_overrides(args, n_runs), *overrides, *args.local_override])


def commands(args, root: Path, cfg) -> dict[str, list[str]]:
    """Every run's command, by ``seed_S/warmup`` and ``seed_S/<arm>`` (gpu_check's builders)."""
    out = {}
    n_rl = len(ARMS) * len(args.seeds)
    for seed in args.seeds:
        d = root / f"seed_{seed}"
        out[f"seed_{seed}/warmup"] = warmup_cmd(run_args(args, seed, len(args.seeds)), d / "warmup", cfg)
        for arm in ARMS:
            own = [*reward_overrides(args), *ARM_OVERRIDES[arm], f"trainer.save_every={args.save_every}"]
            out[f"seed_{seed}/{arm}"] = local_pasr_cmd(
                run_args(args, seed, n_rl, *own), d / arm, warmup_checkpoint(root, seed, cfg)
            )
    return out


def stopped_eval_cmd(args, root: Path, name: str, ckpt: Path) -> list[str]:
    """The greedy evaluation of a stopped RL run's last checkpoint (``<arm>_eval/eval/base.jsonl``)."""
    seed = int(name.split("/")[0].removeprefix("seed_"))
    return eval_cmd(run_args(args, seed, len(ARMS) * len(args.seeds)), root / f"{name}_eval", ckpt)


def cmd_overrides(cmd: list[str]) -> list[str]:
    return cmd[cmd.index("--run-dir") + 2 :]


def check_configs(args, cmds: dict[str, list[str]]) -> None:
    """Every command's config loads and validates here, the GPU aside (``model.device``)."""
    from recipe.local_engine.config import load_config

    for name, cmd in cmds.items():
        try:
            load_config(
                preset=args.preset, overrides=[o for o in cmd_overrides(cmd) if not o.startswith("model.device")]
            )
        except Exception as exc:
            raise SystemExit(f"gpu_scale: {name}: {exc}") from None


# --------------------------------------------------------------------------- running
def rl_step(run: WatchedRun, root: Path) -> int:
    """The last RL step ``run`` logged (its run directory's ``metrics.jsonl``)."""
    return max((m["step"] for m in metric_lines(root / run.name) if m.get("phase") == "pasr"), default=0)


def side_by_side(runs: list[WatchedRun], deadline: float, stop_at: float | None = None, root: Path | None = None):
    """Start ``runs`` together and wait for them. From ``stop_at``, each RL run still going gets
    SIGINT during the same step T (the one the furthest run is in), so all stop after step T
    with its checkpoint (the local trainer's own stop) and PASR and its control are compared
    at the same step. At ``deadline``, SIGTERM; ten seconds later, SIGKILL."""
    for run in runs:
        run.start()

    def going() -> list[WatchedRun]:
        return [r for r in runs if r.proc.poll() is None]

    while going() and time.monotonic() < (stop_at or deadline):
        time.sleep(0.5)
    if stop_at is not None and going():
        target = max(rl_step(r, root) for r in runs) + 1
        print(f"gpu_scale: stopping the RL runs after step {target}", flush=True)
        pending = going()
        while pending and time.monotonic() < deadline:
            for run in [r for r in pending if r.proc.poll() is not None or rl_step(r, root) >= target - 1]:
                run.signal(signal.SIGINT)  # during step target: the trainer ends it, saves it, exits
                pending.remove(run)
            time.sleep(0.5)
    while going() and time.monotonic() < deadline:
        time.sleep(0.5)
    for run in going():
        run.signal(signal.SIGTERM)
    for run in runs:
        run.wait(deadline + 10.0, grace_s=0.0)


def run(args, cfg, root: Path, cmds: dict[str, list[str]], the_plan: dict) -> dict:
    prepare_root(root, "gpu_scale")
    settings = {
        "device": device_name(args.device),
        "commit": args.commit or git_commit(),
        "seeds": args.seeds,
        "steps": args.steps,
        "preset": args.preset,
        "reward": args.reward,
        "queries_per_step": cfg.rollout.queries_per_step,
        "n_refine": cfg.pasr.n_refine,
        "n_plain": cfg.pasr.n_plain,
        "warmup_steps": cfg.warmup.steps,
        "eval_size": args.eval_size,
        "budget_s": args.budget_s,
        "eval_reserve_s": args.eval_reserve_s,
        "plan": the_plan,
        "commands": {name: cmd_overrides(cmd) for name, cmd in cmds.items()},
    }
    (root / "settings.json").write_text(json.dumps(settings, indent=1) + "\n")
    # gpu_check's Progress: phase times and findings in state.json, this benchmark's result after every phase
    progress = Progress(root, "all", Path(args.out), args.budget_s, name="gpu_scale", build=build_result)
    print(f"gpu_scale: {settings['device']}; commit {settings['commit']}; run directory {root}", flush=True)
    print_plan(the_plan, args)
    deadline = progress.deadline

    def watched(name: str, cmd: list[str]) -> WatchedRun:
        return WatchedRun(name, cmd, root / f"{name.replace('/', '_')}.log")

    t = time.monotonic()
    warmups = [watched(f"seed_{s}/warmup", cmds[f"seed_{s}/warmup"]) for s in args.seeds]
    side_by_side(warmups, deadline - args.eval_reserve_s)
    progress.phase("warmups", t)

    t = time.monotonic()
    started = [
        watched(f"seed_{s}/{arm}", cmds[f"seed_{s}/{arm}"])
        for s in args.seeds
        if (warmup_checkpoint(root, s, cfg) / "trainer_state.json").is_file()
        for arm in ARMS
    ]
    side_by_side(started, deadline, stop_at=deadline - args.eval_reserve_s, root=root)
    progress.phase("rl", t)

    from runtime.model_loading import checkpoint_named_by

    t = time.monotonic()
    evals = []
    for r in started:
        pointer = root / r.name / "checkpoints" / "latest"
        ckpt = checkpoint_named_by(pointer) if pointer.is_file() else None
        if not (root / r.name / "eval" / "final.jsonl").is_file() and ckpt is not None:
            evals.append(watched(f"{r.name}_eval", stopped_eval_cmd(args, root, r.name, ckpt)))
    side_by_side(evals, deadline + args.eval_grace_s)
    progress.phase("evals", t, complete=True)
    return progress.save()


# --------------------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gpu_scale", description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--run-dir", default="runs/gpu-scale", help="everything the benchmark writes (cleared first)")
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3], help="warmup.seed = trainer.seed of each run")
    p.add_argument("--steps", type=int, default=100, help="RL steps asked (the budget may stop them sooner)")
    p.add_argument("--queries-per-step", type=int, default=16)
    p.add_argument("--n-refine", type=int, default=8, help="refine rollouts a query (the paper's group)")
    p.add_argument("--n-plain", type=int, default=8, help="plain rollouts a query (the refine reward's baseline)")
    p.add_argument(
        "--reward",
        choices=("preset", "paper"),
        default="preset",
        help="PASR's reward, the control's too less its refine term: preset (the --preset's, margin and tie 0 from "
        "the cpu preset) or paper (benchmarks.learning_signal.PAPER_EXACT)",
    )
    p.add_argument(
        "--gen-batch-size",
        type=int,
        default=256,
        help="rollout.gen_batch_size: one generate call for a step's 256 rollouts (a decode step of a 135M model "
        "on a GPU costs about the same for 256 rows as for 64)",
    )
    p.add_argument("--save-every", type=int, default=10, help="trainer.save_every of the RL runs (a stop saves anyway)")
    p.add_argument("--eval-size", type=int, default=300, help="held-out problems (data.eval_size)")
    sampled_rows.add_option(p)
    p.add_argument("--preset", default="demo", help="local preset: its warm-up (100 steps, nearly always refining)")
    p.add_argument("--device", default="cuda", help="model.device of every run")
    p.add_argument("--budget-s", type=float, default=420.0, help="wall-clock budget of the whole command")
    p.add_argument(
        "--eval-reserve-s",
        type=float,
        default=60.0,
        help="this long before the budget ends the RL runs still going stop after the step the furthest is in "
        "(SIGINT during it): time for that step, the laggards' catching up to it, its checkpoint and its evaluation",
    )
    p.add_argument(
        "--eval-grace-s",
        type=float,
        default=30.0,
        help="how far past the budget the evaluations of stopped runs may run (H100: a start 16 s, an evaluation "
        "5 s); with the budget and 10 s for a kill, the command's longest wall time",
    )
    p.add_argument(
        "--side-by-side",
        type=float,
        default=1.0,
        help="the plan's slowdown of an RL step against the measured basis (six runs sharing an H200); "
        "e.g. about 2 on an H100 or with twice the runs (assumed, not measured)",
    )
    p.add_argument(
        "--step-s",
        type=float,
        default=None,
        help="the plan's RL step time with the runs side by side, once measured (a result's timings.rl_step_s)",
    )
    p.add_argument("--local-override", action="append", default=[], help="extra override for every run")
    p.add_argument("--out", default="benchmarks/results/gpu_scale.json")
    p.add_argument("--report", metavar="RUN_DIR", help="only rebuild the result of RUN_DIR and write it to --out")
    p.add_argument("--dry-run", action="store_true", help="print every command and the plan; run nothing")
    p.add_argument(
        "--commit",
        default=None,
        help="the commit the benchmark runs (default: git rev-parse HEAD; a lent machine's copy of .git may be "
        "older than the tree it was sent)",
    )
    p.add_argument("--plot", metavar="PNG", help="with --report: each seed's PASR and control curves and held-out rows")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if not (args.report or args.dry_run):
        fit_outer_timeout(args, "gpu_scale")
    out = Path(args.out)
    if args.report:
        try:
            result = rebuild(args.report, "gpu_scale", build_result, print_report)
        except ReportError as exc:
            print(f"gpu_scale: {exc}", file=sys.stderr)
            return 2
        write_result(result, out)
        if args.plot:
            print(f"gpu_scale: wrote {plot_scale(result, Path(args.plot))}")
        return 0
    root = (ROOT / args.run_dir).resolve() if not Path(args.run_dir).is_absolute() else Path(args.run_dir)
    cfg = local_settings(run_args(args, args.seeds[0], 1))  # the sizes and the warm-up every run shares
    cmds = commands(args, root, cfg)
    check_configs(args, cmds)
    the_plan = plan(args, cfg)
    if args.dry_run:
        for name, cmd in cmds.items():
            print(f"{name + ':':<16} {' '.join(cmd)}")
        example = f"seed_{args.seeds[0]}/pasr"
        print(f"{'stopped run:':<16} {' '.join(stopped_eval_cmd(args, root, example, Path('<its last checkpoint>')))}")
        print_plan(the_plan, args)
        return 0
    result = run(args, cfg, root, cmds, the_plan)
    print_report(result)
    print(f"gpu_scale: wrote {out}; logs in {root}")
    return 0 if result["complete"] and result["pooled"]["n_seeds"] == len(args.seeds) else 1


if __name__ == "__main__":
    raise SystemExit(main())
