"""Does the verl engine learn PASR on one GPU as the local engine does? ``bash recipe/scripts/gpu_check.sh``
(this module: ``python3 -m benchmarks.gpu_check``), every start-up included.

``--part learn`` (the default, :func:`~benchmarks.gpu_check_parts.learn_part`): verl's driver starts
first and waits for its model while the local engine warms the embedded SmolLM2-135M up on the GPU
with its rate decayed to zero; verl then trains PASR on the synthetic arithmetic of
``benchmarks.learning_signal`` with the local engine's reward and optimizer settings
(:func:`~benchmarks.gpu_commands.verl_overrides`) until ``--steps`` or the deadline (a SIGTERM: the
step in flight is checkpointed), the local engine trains the same steps beside it, and the warm-up,
verl's merged last checkpoint and the local engine's checkpoint of the same step are evaluated
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

This module is the driver (options, plan, settings, the parts in order); the command lines are
built in :mod:`benchmarks.gpu_commands`, the parts' phases run in :mod:`benchmarks.gpu_check_parts`,
the phase times kept by :class:`benchmarks.gpu_phases.Progress` (all re-exported here).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from benchmarks import sampled_rows
from benchmarks.gpu_check_parts import (  # noqa: F401  re-exported: the parts' phases, moved there
    LOCAL_EVAL_S,
    _import_quietly,
    await_fit,
    first_part,
    learn_part,
    resume_after_learn,
    resume_part,
    start_final_eval,
    wait_for_step,
    warmup_checkpoint,
)
from benchmarks.gpu_check_report import (  # noqa: F401  (MARKS, latest_checkpoint: re-exported)
    MARKS,
    build_result,
    latest_checkpoint,
    plot_learn,
    print_report,
    read_json,
    write_result,
)
from benchmarks.gpu_commands import (  # noqa: F401  re-exported: the command builders, moved there
    PARITY,
    VERL_DRIVER,
    driver_cmd,
    eval_cmd,
    local_cmd,
    local_common,
    local_pasr_cmd,
    local_settings,
    verl_env,
    verl_overrides,
    warmup_cmd,
    write_verl_data,
)
from benchmarks.gpu_phases import Progress, device_name, fit_outer_timeout, git_commit
from benchmarks.report_files import ReportError, rebuild
from benchmarks.watched_run import ROOT, WatchedRun, run_to_end, stop_during  # noqa: F401  re-exported


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
        help="learn: 75, the time verl's last step needs after it ends (checkpoint, merge, evaluation; "
        "H100: merge 18 s, evaluation 17 s): verl is stopped when its next step and this, or the local "
        "engine reaching that step at its measured pace and evaluating, would pass the budget "
        "(benchmarks/learn_deadline.py). The others: 50, SIGTERM this long before the budget ends; "
        "their final evaluation may run up to --eval-grace-s past it rather than be lost",
    )
    p.add_argument(
        "--eval-grace-s",
        type=float,
        default=None,
        help="learn: 0; the others: 60. How far past the budget the final evaluation may run (budget + "
        "grace stays inside the command's CHECK_TIMEOUT_S when gpu_loan.sh sets it)",
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
        f"  first step {first:.0f} s, then {mean:.1f} s a step; SIGTERM by {stop_at:.0f} s at the latest "
        f"(budget {args.budget_s:.0f} - reserve {args.eval_reserve_s:.0f}; sooner if the local engine's "
        "measured pace needs it: benchmarks/learn_deadline.py)",
        f"  -> about {min(fit, args.steps)} verl steps (at most {args.steps}); "
        f"merge ~{phases.get('merge', 18.0):.0f} s and the evaluations "
        f"~{phases.get('final_evals', 30.0) + sampled_rows.extra_s(args):.0f} s after",
    ]


def parse_args(argv=None) -> argparse.Namespace:
    """The command line, with the defaults that depend on ``--part`` filled in."""
    args = build_parser().parse_args(argv)
    learn = args.part == "learn"
    for name, if_learn, otherwise in (
        ("budget_s", 430.0, 540.0),
        ("eval_reserve_s", 75.0, 50.0),
        ("eval_grace_s", 0.0, 60.0),
    ):
        if getattr(args, name) is None:
            setattr(args, name, if_learn if learn else otherwise)
    return fit_outer_timeout(args, "gpu_check")


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
