"""Does PASR's refine term help? An A/B that can answer it: a warm-up whose refine term is live,
four arms from it, five seeds, the run as the unit (issue #62). ``python3 -m benchmarks.pasr_ab``,
one body for the CPU and a GPU (the local engine: ``python -m recipe train`` runs).

Why this shape: with a 0/1 judge GRPO cancels the refine term in every group whose rollouts all
refine (docs/design.md, "When the refine term acts"), so a warm-up that refines on every answer
gives PASR and its control the same advantages; and two runs that differ in a few groups drift
apart by chance, which a same-seed control cannot measure (it repeats the run). Per seed S
(``warmup.seed`` = ``trainer.seed`` = S: the seeds vary the whole run, warm-up included):

1. a **warm-up** whose rate decays to zero (``warmup.lr_schedule=cosine``) and whose refine mix
   (``--refine-fraction``, 0.4) leaves the term live: each arm's first step logs the share of
   groups mixing refining and non-refining rollouts (``pasr/refine_term/mixed_groups``; target
   >= 30%);
2. four **arms** from its checkpoint, everything else equal (:data:`ARM_OVERRIDES`): ``control``
   (``pasr.weights.refine=0``), ``control_drift`` (the control with another rollout seed only:
   ``rollout.seed`` = S + 1000; ``trainer.seed`` also orders the queries and seeds the sampled
   evaluations, so it stays), ``pasr_paper`` (the paper's reward: sign, tie -0.5, empty refines
   paid) and ``pasr_cpu`` (the cpu preset's reward, the default);
3. every arm and the warm-up **evaluated** on the same held-out problems, greedy and mean@K at
   T=0.5 (``trainer.eval_sampled_k``), with refine, fix and break rates and tokens;
4. **statistics with the run as the unit** (:mod:`benchmarks.ab_stats`), set against the drift
   arm's differences; pooled-question tests as a secondary column; the refine term's live share
   and the refine rate by step per arm (:mod:`benchmarks.ab_report`).

``--parallel N`` runs side by side (threads split), a seed's warm-up and arms before the next
seed's warm-up. Under ``--budget-s`` a run starts only if its expected time (the plan's, scaled
by the step times measured so far) ends before the stop time (the budget less
``--eval-reserve-s``); from the stop time a seed's arms still going stop after one same step
(SIGINT: the trainer finishes it and checkpoints it) and their checkpoints are evaluated.
``--dry-run`` prints every command and the plan (:mod:`benchmarks.ab_plan`); ``--report RUN_DIR``
rebuilds the JSON and the table from the files alone.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path

from benchmarks import ab_plan
from benchmarks.ab_report import ARMS, build_result, curves, eval_dump, log_of, measured_timings, work_s
from benchmarks.ab_table import print_report
from benchmarks.gpu_commands import GPU_GEN_BATCH, eval_cmd, local_pasr_cmd, local_settings, warmup_cmd
from benchmarks.gpu_phases import Progress, device_name, fit_outer_timeout, git_commit, prepare_root
from benchmarks.gpu_run_facts import write_result
from benchmarks.gpu_scale import cmd_overrides, with_
from benchmarks.learning_signal import PAPER_EXACT
from benchmarks.report_files import ReportError, read_json, rebuild
from benchmarks.watched_run import ROOT, WatchedRun
from recipe.metrics_file import metric_lines

DRIFT_OFFSET = 1000  # the drift arm's rollout.seed: the seed + this
ARM_OVERRIDES = {
    "control": ["pasr.weights.refine=0"],
    "control_drift": ["pasr.weights.refine=0"],  # and rollout.seed (run_overrides)
    "pasr_paper": list(PAPER_EXACT),
    "pasr_cpu": [],
}


# --------------------------------------------------------------------------- commands
def cores() -> int:
    return len(os.sched_getaffinity(0))


def common_overrides(args) -> list[str]:
    """What every run shares beyond the common settings of :mod:`benchmarks.gpu_commands` (the
    decayed warm-up, the seeds, the held-out size, mean@K): the warm-up's length and refine mix,
    the group sizes, the cores
    split among the runs side by side, the generate batch, and the dtype resolved once for all
    (a probe per run could choose differently under load). The user's ``--local-override`` last."""
    out = [f"warmup.refine_fraction={args.refine_fraction}"]
    out += [f"warmup.steps={args.warmup_steps}"] if args.warmup_steps is not None else []
    out += [f"pasr.n_refine={args.n_refine}"] if args.n_refine is not None else []
    out += [f"pasr.n_plain={args.n_plain}"] if args.n_plain is not None else []
    out += [f"rollout.gen_batch_size={args.gen_batch_size}"] if args.gen_batch_size else []
    out += [f"model.threads={max(1, cores() // args.parallel)}"]
    out += args.dtype_overrides
    return out


def run_args(args, seed: int, *overrides: str) -> argparse.Namespace:
    """One run's ``args`` for :mod:`benchmarks.gpu_commands`' builders (gpu_scale's :func:`with_`:
    the part that evaluates at the end, the cosine warm-up): its seed, the shared overrides, its
    own, the user's."""
    return with_(args, seed=seed, local_override=[*common_overrides(args), *overrides, *args.local_override])


def warmup_checkpoint(root: Path, seed: int, cfg) -> Path:
    from recipe.step_files import step_name

    return root / f"seed_{seed}" / "warmup" / "checkpoints" / step_name(cfg.warmup.steps)


def arm_overrides(args, seed: int, arm: str) -> list[str]:
    drift = [f"rollout.seed={seed + DRIFT_OFFSET}"] if arm == "control_drift" else []
    return [*ARM_OVERRIDES[arm], *drift, f"trainer.save_every={args.save_every}"]


def commands(args, root: Path, cfg) -> dict[str, list[str]]:
    """Every run's command, by ``seed_S/warmup`` and ``seed_S/<arm>``."""
    out = {}
    for seed in args.seeds:
        d = root / f"seed_{seed}"
        out[f"seed_{seed}/warmup"] = warmup_cmd(run_args(args, seed), d / "warmup", cfg)
        for arm in ARMS:
            own = run_args(args, seed, *arm_overrides(args, seed, arm))
            out[f"seed_{seed}/{arm}"] = local_pasr_cmd(own, d / arm, warmup_checkpoint(root, seed, cfg))
    return out


def stopped_eval_cmd(args, root: Path, name: str, ckpt: Path) -> list[str]:
    """The evaluation of a stopped arm's last checkpoint (``<arm>_eval/eval/base.jsonl``), drawn
    from the seed's ``trainer.seed`` as every arm's own final evaluation is."""
    seed = int(name.split("/")[0].removeprefix("seed_"))
    return eval_cmd(run_args(args, seed), root / f"{name}_eval", ckpt)


def check_configs(args, cmds: dict[str, list[str]]) -> None:
    """Every command's config loads and validates here, the device aside."""
    from recipe.local_engine.config import load_config

    for name, cmd in cmds.items():
        try:
            load_config(preset=args.preset, overrides=[o for o in cmd_overrides(cmd) if not o.startswith("model.dev")])
        except Exception as exc:
            raise SystemExit(f"pasr_ab: {name}: {exc}") from None


def pinned_dtype(args) -> list[str]:
    """``--dtype`` as the two keys every run gets: ``auto`` measured here once (the engine's own
    probe, :func:`runtime.cpu_dtype.resolve_dtype`), so all runs compute in the same dtype."""
    dtype, bf16 = args.dtype, args.dtype == "bfloat16"
    if dtype == "auto":
        from runtime.cpu_dtype import AUTO, resolve_dtype

        choice = resolve_dtype(AUTO, device=args.device)
        dtype, bf16 = choice.dtype, choice.use_bf16
    return [f"model.rollout_dtype={dtype}", f"algo.bf16_autocast={str(bf16).lower()}"]


# --------------------------------------------------------------------------- running
def basis(own: dict) -> str:
    """Which of a run's expected parts were measured in this run."""
    got = [k.removesuffix("_s") for k in ("start_s", "warmup_step_s", "rl_step_s") if own.get(k)]
    return "this run's " + ", ".join(got) + " and the plan" if got else "the plan"


def rl_step(root: Path, name: str) -> int:
    """The last RL step run ``name`` logged."""
    steps = curves(root / name)["step"]
    return max(steps, default=0)


class Runner:
    """Runs the jobs ``--parallel`` at a time in order (a job waits for the file it needs), starts
    one only if its expected end is before ``stop_at``, and at ``stop_at`` stops what is going:
    warm-ups at once (SIGTERM), each seed's arms after one same step (SIGINT)."""

    def __init__(self, args, root: Path, cmds: dict, cfg, plan: dict, progress: Progress, stop_at: float):
        self.args, self.root, self.cfg, self.plan = args, root, cfg, plan
        self.progress, self.stop_at = progress, stop_at
        self.pending = list(cmds)  # names, in order: a seed's warm-up, its arms, then the next seed
        self.cmds, self.running, self.ended = cmds, {}, {}
        self.skipped = progress.state.setdefault("skipped", {})
        self.starts: dict[str, float] = {}  # a run's seconds from its launch to its first step (own_times)

    def note_starts(self) -> None:
        """Each running run's start, once its first step is logged: from its launch to that step
        less the step's own time (every poll, so the first step is seen as it comes)."""
        now = time.monotonic()
        for name, run in self.running.items():
            if name in self.starts:
                continue
            first = next((m for m in metric_lines(self.root / name) if m.get("phase") in ("warmup", "pasr")), None)
            if first is not None:
                step = first.get("timing_s/step") or first.get("timing_s/update") or 0.0
                self.starts[name] = max(0.0, now - run.t0 - step)

    def own_times(self) -> dict:
        """This run's own start, warm-up step and RL step seconds so far (``None`` where nothing
        was measured yet): the step times of every run's metrics
        (:func:`~benchmarks.ab_report.measured_timings`) and the starts :meth:`note_starts` saw;
        a run still starting counts as a start at least as long as its age."""
        own = measured_timings(self.root, read_json(self.root / "settings.json"), self.args.seeds, starts=False)
        now = time.monotonic()
        starting = [now - r.t0 for name, r in self.running.items() if name not in self.starts]
        seen = sorted(self.starts.values())
        own["start_s"] = max(seen[len(seen) // 2] if seen else 0.0, *starting, 0.0) or None
        return own

    def expected_s(self, name: str, own: dict | None = None) -> float:
        """A run's expected seconds: the plan's parts, each replaced by this run's own measurement
        once there is one (:meth:`own_times`), so a fresh machine's slow start or a slower device
        is seen from the first run instead of assumed from the last loan's."""
        p, own = self.plan, own if own is not None else self.own_times()
        start = own.get("start_s") or p["start_s"]
        if name.endswith("/warmup"):
            return start + p["warmup_steps"] * (own.get("warmup_step_s") or p["warmup_step_s"]) + p["eval_s"]
        return start + p["eval_s"] + p["steps_asked"] * (own.get("rl_step_s") or p["rl_step_s"])

    def start_ready(self) -> None:
        self.note_starts()
        now, own = time.monotonic(), None  # this run's own times: read only when a run could start
        for name in list(self.pending):
            if len(self.running) >= self.args.parallel:
                return
            seed = int(name.split("/")[0].removeprefix("seed_"))
            if not name.endswith("/warmup"):
                warm = f"seed_{seed}/warmup"
                if warm in self.skipped:
                    self.skip(name, "its warm-up was not started")
                    continue
                if warm not in self.ended:
                    continue
                if not (warmup_checkpoint(self.root, seed, self.cfg) / "trainer_state.json").is_file():
                    self.skip(name, f"its warm-up left no checkpoint (see {log_of(self.root, warm).name})")
                    continue
            own = own if own is not None else self.own_times()
            expected = self.expected_s(name, own)
            if now + expected > self.stop_at:
                self.skip(name, f"expected to end after the budget's stop time (~{expected:.0f} s, from {basis(own)})")
                continue
            run = WatchedRun(name, self.cmds[name], log_of(self.root, name)).start()
            self.running[name] = run
            self.pending.remove(name)

    def skip(self, name: str, why: str) -> None:
        self.skipped[name] = why
        self.pending.remove(name)
        print(f"pasr_ab: {name} not started: {why}", flush=True)
        self.prune(name)

    def reap(self) -> None:
        for name, run in list(self.running.items()):
            if run.proc.poll() is not None:
                lines = metric_lines(self.root / name) if name not in self.starts else []
                if lines:  # ended before its first step was seen: its wall less its work
                    self.starts[name] = max(0.0, time.monotonic() - run.t0 - work_s(lines))
                run.wait(time.monotonic())
                self.ended[name] = self.running.pop(name)
                self.prune(name)

    def prune(self, name: str) -> None:
        """Checkpoints no run needs any more (disk: 0.5-1.6 GB each): an evaluated arm's, and a
        warm-up's once every arm of its seed has ended."""
        if self.args.keep_checkpoints:
            return
        seed = name.split("/")[0]
        if not name.endswith("/warmup") and (self.root / name / "eval" / "final.jsonl").is_file():
            shutil.rmtree(self.root / name / "checkpoints", ignore_errors=True)
        if all(f"{seed}/{arm}" in self.ended or f"{seed}/{arm}" in self.skipped for arm in ARMS):
            shutil.rmtree(self.root / seed / "warmup" / "checkpoints", ignore_errors=True)

    def loop(self) -> None:
        while self.pending or self.running:
            self.reap()
            if time.monotonic() >= self.stop_at:
                self.stop()
                return
            self.start_ready()
            time.sleep(0.5)

    def stop(self) -> None:
        for name in list(self.pending):
            self.skip(name, "the budget's stop time came first")
        targets = {}
        for name, run in self.running.items():
            if name.endswith("/warmup"):
                run.signal(signal.SIGTERM)
                continue
            seed = name.split("/")[0]
            arms = [n for n in [*self.running, *self.ended] if n.startswith(seed + "/") and not n.endswith("/warmup")]
            targets[name] = min(self.args.steps, max(rl_step(self.root, n) for n in arms) + 1)
        print(f"pasr_ab: stop time: the arms going stop after steps {targets}", flush=True)
        deadline = self.progress.deadline
        while targets and time.monotonic() < deadline:
            for name, t in list(targets.items()):
                done = rl_step(self.root, name)
                if done >= t - 1:
                    if done < self.args.steps:  # during step t: the trainer ends it, saves it, exits
                        self.running[name].signal(signal.SIGINT)
                    del targets[name]  # else its last step is done: its own evaluation runs to the deadline
            self.reap()
            time.sleep(0.1)  # a step's SIGINT must land before it ends
        for run in list(self.running.values()):
            run.wait(deadline + 10.0, grace_s=0.0)
        self.reap()


def evaluate_stopped(args, root: Path, names, until: float) -> None:
    """The last checkpoints of arms stopped before their own evaluation, ``--parallel`` at a time."""
    from runtime.model_loading import checkpoint_named_by

    todo = []
    for name in names:
        pointer = root / name / "checkpoints" / "latest"
        ckpt = checkpoint_named_by(pointer) if pointer.is_file() else None
        if ckpt is not None and not eval_dump(root / name.split("/")[0], name.split("/")[1]).is_file():
            todo.append(
                WatchedRun(f"{name}_eval", stopped_eval_cmd(args, root, name, ckpt), log_of(root, name + "_eval"))
            )
    going: list[WatchedRun] = []
    while (todo or going) and time.monotonic() < until:
        for r in [r for r in going if r.proc.poll() is not None]:
            r.wait(time.monotonic())  # its exit code into its sidecar
            going.remove(r)
        while todo and len(going) < args.parallel:
            going.append(todo.pop(0).start())
        time.sleep(0.5)
    for run in going:
        run.wait(until, grace_s=5.0)
    if not args.keep_checkpoints:
        for name in names:
            if (root / f"{name}_eval" / "eval" / "base.jsonl").is_file():
                shutil.rmtree(root / name / "checkpoints", ignore_errors=True)


def run(args, cfg, root: Path, cmds: dict[str, list[str]], the_plan: dict) -> dict:
    prepare_root(root, "pasr_ab")
    settings = {
        "device": device_name(args.device),
        "commit": args.commit or git_commit(),
        "seeds": args.seeds,
        "arms": list(ARMS),
        "steps": args.steps,
        "preset": args.preset,
        "warmup_steps": cfg.warmup.steps,
        "refine_fraction": cfg.warmup.refine_fraction,
        "queries_per_step": cfg.rollout.queries_per_step,
        "n_refine": cfg.pasr.n_refine,
        "n_plain": cfg.pasr.n_plain,
        "rollouts_per_step": cfg.rollout.queries_per_step * (cfg.pasr.n_refine + cfg.pasr.n_plain),
        "eval_size": args.eval_size,
        "eval_sampled_k": args.eval_sampled_k,
        "parallel": args.parallel,
        "drift_rollout_seed": f"seed + {DRIFT_OFFSET}",
        "dtype": args.dtype_overrides,
        "budget_s": args.budget_s,
        "eval_reserve_s": args.eval_reserve_s,
        "plan": the_plan,
        "commands": {name: cmd_overrides(cmd) for name, cmd in cmds.items()},
    }
    (root / "settings.json").write_text(json.dumps(settings, indent=1) + "\n")
    progress = Progress(root, "ab", Path(args.out), args.budget_s, name="pasr_ab", build=build_result)
    print(f"pasr_ab: {settings['device']}; commit {settings['commit']}; run directory {root}", flush=True)
    for line in ab_plan.plan_lines(the_plan, ARMS):
        print(line, flush=True)
    t = time.monotonic()
    runner = Runner(args, root, cmds, cfg, the_plan, progress, progress.deadline - args.eval_reserve_s)
    runner.loop()
    progress.phase("runs", t)
    t = time.monotonic()
    arms = [name for name in runner.ended if not name.endswith("/warmup")]
    evaluate_stopped(args, root, arms, progress.deadline + args.eval_grace_s)
    progress.phase("evals", t, complete=True)
    return progress.save()


# --------------------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="pasr_ab", description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--run-dir", default="runs/pasr-ab", help="everything the benchmark writes (cleared first)")
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5], help="warmup.seed = trainer.seed")
    p.add_argument("--steps", type=int, default=None, help="RL steps of each arm (default: the preset's)")
    p.add_argument("--warmup-steps", type=int, default=None, help="warm-up steps (default: the preset's)")
    p.add_argument("--refine-fraction", type=float, default=0.4, help="warmup.refine_fraction: the live term's mix")
    p.add_argument("--queries-per-step", type=int, default=None, help="default: the preset's")
    p.add_argument("--n-refine", type=int, default=None, help="refine rollouts a query (default: the preset's)")
    p.add_argument("--n-plain", type=int, default=None, help="plain rollouts a query (default: the preset's)")
    p.add_argument("--eval-size", type=int, default=300, help="held-out problems (data.eval_size)")
    p.add_argument(
        "--sampled-k",
        dest="eval_sampled_k",
        type=int,
        default=4,
        help="answers sampled a question at T=0.5 in every evaluation, for mean@K (trainer.eval_sampled_k; 0: off)",
    )
    p.add_argument("--preset", default="demo", help="the local preset every run starts from")
    p.add_argument("--device", default="auto", help="model.device of every run (auto: the GPU if torch sees one)")
    p.add_argument(
        "--dtype",
        default="auto",
        choices=("auto", "float32", "bfloat16"),
        help="rollouts and update of every run; auto: the engine's probe, run here once",
    )
    p.add_argument(
        "--parallel", type=int, default=None, help="runs side by side (default: the CPU's cores; a GPU: every arm)"
    )
    p.add_argument("--gen-batch-size", type=int, default=None, help="rollout.gen_batch_size (default: GPU 256)")
    p.add_argument("--save-every", type=int, default=10, help="trainer.save_every of the arms (a stop saves anyway)")
    p.add_argument("--keep-checkpoints", action="store_true", help="keep every checkpoint (default: pruned once used)")
    p.add_argument("--budget-s", type=float, default=3600.0, help="wall-clock budget of the whole command")
    p.add_argument("--eval-reserve-s", type=float, default=None, help="stop this long before the budget's end")
    p.add_argument("--eval-grace-s", type=float, default=30.0, help="how far past the budget evaluations may run")
    p.add_argument("--plan-from", default=None, help="a pasr_ab result whose measured times the plan uses")
    p.add_argument("--local-override", action="append", default=[], help="extra override for every run")
    p.add_argument("--out", default="benchmarks/results/pasr_ab.json")
    p.add_argument("--report", metavar="RUN_DIR", help="only rebuild the result of RUN_DIR and write it to --out")
    p.add_argument("--dry-run", action="store_true", help="print every command and the plan; run nothing")
    p.add_argument("--commit", default=None, help="the commit the benchmark runs (default: git rev-parse HEAD)")
    return p


def report(args) -> int:
    """``--report``: the table, and the JSON written unless no seed has every run evaluated (a
    result of nulls never replaces one)."""
    try:
        result = rebuild(args.report, "pasr_ab", build_result, print_report)
    except ReportError as exc:
        print(f"pasr_ab: {exc}", file=sys.stderr)
        return 2
    if not any(s["usable"] for s in result["seeds"].values()):
        print(
            f"pasr_ab: --report {args.report}: no seed has its warm-up and all four arms evaluated at one step; "
            f"nothing written to {args.out}",
            file=sys.stderr,
        )
        return 2
    write_result(result, Path(args.out))
    return 0 if not result["seeds_left_out"] else 1


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.report:
        return report(args)
    if not args.dry_run:
        fit_outer_timeout(args, "pasr_ab")
    if args.device == "auto":
        from runtime.model_loading import resolve_device

        args.device = resolve_device("auto")
    on_cpu = args.device == "cpu"
    args.parallel = args.parallel or (cores() if on_cpu else len(args.seeds) * len(ARMS))
    args.gen_batch_size = args.gen_batch_size or (None if on_cpu else GPU_GEN_BATCH)
    args.dtype_overrides = [] if args.dry_run else pinned_dtype(args)
    cfg = local_settings(run_args(args, args.seeds[0]))  # the sizes and the warm-up every run shares
    args.steps = cfg.trainer.steps if args.steps is None else args.steps
    basis = ab_plan.basis_for(args.device, ab_plan.read_measured(args.plan_from))
    if args.eval_reserve_s is None:
        args.eval_reserve_s = ab_plan.default_reserve(args, cfg, basis)
    the_plan = ab_plan.plan(args, ARMS, cfg, basis)
    root = (ROOT / args.run_dir).resolve() if not Path(args.run_dir).is_absolute() else Path(args.run_dir)
    cmds = commands(args, root, cfg)
    check_configs(args, cmds)
    if args.dry_run:
        for name, cmd in cmds.items():
            print(f"{name + ':':<24} {' '.join(cmd)}")
        example = f"seed_{args.seeds[0]}/control"
        stopped = stopped_eval_cmd(args, root, example, Path("<its last checkpoint>"))
        print(f"{'stopped arm:':<24} {' '.join(stopped)}")
        print("dtype: --dtype auto is measured once at the start and pinned in every command")
        for line in ab_plan.plan_lines(the_plan, ARMS):
            print(line)
        return 0
    result = run(args, cfg, root, cmds, the_plan)
    print_report(result)
    print(f"pasr_ab: wrote {args.out}; logs in {root}")
    return 0 if result["complete"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
