"""The result of ``benchmarks.pasr_ab``, read from its run directory alone.

Why from files: a command cut off by a machine's limit, or a CPU run of an hour, still leaves its
runs' evaluation dumps, metrics, configs and logs; this module turns them into the result after
every phase and with ``--report RUN_DIR`` afterwards. Each run has a status, never a row of
None: ``evaluated`` (at the step it names: its own final evaluation, or its last checkpoint
evaluated after a stop), ``not started`` (and why), ``stopped before its first checkpoint``,
``failed`` or ``not evaluated``. A seed enters the run-level statistics (:mod:`benchmarks.ab_stats`)
only with its warm-up and all four arms evaluated at one same step; any other seed is left out
by name, with the reason, and the result says it is incomplete.
"""

from __future__ import annotations

from pathlib import Path
from statistics import fmean, median

from benchmarks import sampled_rows
from benchmarks.ab_stats import CONTROL, MissingArm, run_level
from benchmarks.gpu_run_facts import log_of, not_evaluated, paired  # noqa: F401  (log_of: re-exported)
from benchmarks.gpu_scale_report import evaluated_step, reward_of, run_config
from benchmarks.learning_signal import eval_row
from benchmarks.report_files import read_json
from benchmarks.watched_run import WatchedRun
from recipe.metrics_file import metric_lines
from recipe.paired_tests import sign_test

QUESTION = (
    "Does PASR's refine term help? Four arms from one warm-up whose refine term is live, per seed: the control "
    "(refine weight 0), the control with another rollout seed (chance drift), PASR with the paper's reward and "
    "with the cpu preset's; the run as the unit, greedy and mean@K at T=0.5."
)
ARMS = ("control", "control_drift", "pasr_paper", "pasr_cpu")
PASR_ARMS = ("pasr_paper", "pasr_cpu")
RUNS = ("warmup", *ARMS)
MIXED_TARGET = 0.3  # the share of first-step groups mixing refining and non-refining rollouts asked for
LIVE, MIXED = "pasr/refine_term/live_groups", "pasr/refine_term/mixed_groups"
CURVE_KEYS = (
    LIVE,
    MIXED,
    "pasr/refine_term/adv_change",
    "pasr/refine_rate",
    "pasr/acc_refine",
    "pasr/reward_mean",
    "timing_s/step",
)
EVALS = {"greedy": "acc", "mean_at_k": "mean_at_k"}  # the two evaluations and the value each row holds


def eval_dump(seed_dir: Path, run: str) -> Path:
    """The greedy dump of a run's evaluation: the warm-up's, an arm's own at its end, else that of
    its last checkpoint evaluated after a stop (``<arm>_eval``)."""
    if run == "warmup":
        return seed_dir / "warmup" / "eval" / "warmup.jsonl"
    final = seed_dir / run / "eval" / "final.jsonl"
    return final if final.is_file() else seed_dir / f"{run}_eval" / "eval" / "base.jsonl"


def curves(run_dir: Path) -> dict:
    """An RL run's per-step metrics (its ``metrics.jsonl``), each key a list by step."""
    lines = [m for m in metric_lines(run_dir) if m.get("phase") == "pasr"]

    def num(v):
        return None if v is None else float(f"{v:.4g}")

    return {"step": [m["step"] for m in lines], **{k: [num(m.get(k)) for m in lines] for k in CURVE_KEYS}}


def run_result(root: Path, seed: int, run: str, state: dict) -> dict:
    seed_dir, name = root / f"seed_{seed}", f"seed_{seed}/{run}"
    out: dict = {}
    dump = eval_dump(seed_dir, run)
    if dump.is_file():
        step = 0 if run == "warmup" else evaluated_step(seed_dir, run)
        how = "own" if run == "warmup" or dump.name == "final.jsonl" else "checkpoint after a stop"
        out = {"status": "evaluated", "step": step, "evaluation": how, "greedy": eval_row(dump)}
        out["sampled"] = sampled_rows.row(dump)
    else:
        out = not_evaluated(root, name, state)
    if run != "warmup":
        c = curves(seed_dir / run)
        upto = [i for i, s in enumerate(c["step"]) if out.get("step") is None or s <= out["step"]]
        live = [c[LIVE][i] for i in upto if c[LIVE][i] is not None]
        out["refine_term"] = {
            "mixed_first_step": c[MIXED][0] if c[MIXED] else None,
            "live_mean": fmean(live) if live else None,
        }
        cfg = run_config(seed_dir / run)
        if cfg:  # a run that never wrote its config has none to report
            out["config"] = {**reward_of(cfg), "rollout.seed": cfg.get("rollout", {}).get("seed")}
    return out


def seed_result(root: Path, seed: int, state: dict) -> dict:
    """A seed's runs, its per-question tests against the control (secondary), and whether it
    enters the run-level statistics (``usable``) or why not (``left_out``)."""
    runs = {run: run_result(root, seed, run, state) for run in RUNS}
    missing = [f"{r} ({runs[r]['status']}: {runs[r]['why']})" for r in RUNS if runs[r]["status"] != "evaluated"]
    steps = {a: runs[a]["step"] for a in ARMS if runs[a]["status"] == "evaluated"}
    why = None
    if missing:
        why = "missing " + "; ".join(missing)
    elif len(set(steps.values())) > 1:
        why = f"arms evaluated at different steps {steps}"
    dumps = {run: eval_dump(root / f"seed_{seed}", run) for run in RUNS}
    tests = {f"{a}_vs_control": (CONTROL, a) for a in ARMS if a != CONTROL}
    return {
        "runs": runs,
        "usable": why is None,
        "left_out": why,
        "tests": {name: paired(dumps[a], dumps[b]) for name, (a, b) in tests.items()},
        "sampled_tests": sampled_rows.section(dumps, *tests)["tests"],
    }


def value(run: dict, kind: str) -> float | None:
    row = run.get("greedy" if kind == "greedy" else "sampled")
    return row.get(EVALS[kind]) if row else None


def statistics(seeds: dict[str, dict], root: Path) -> dict:
    """Per evaluation: each usable seed's values, the run-level statistics over the seeds that
    have all four, and the pooled-question tests (secondary: they count questions, not runs)."""
    used = [name for name, s in seeds.items() if s["usable"]]
    out = {}
    for kind in EVALS:
        values = {n: {a: value(seeds[n]["runs"][a], kind) for a in RUNS} for n in used}
        complete = {n: v for n, v in values.items() if all(v[a] is not None for a in ARMS)}
        if not complete:
            out[kind] = None
            continue
        try:
            arms = run_level(complete, ARMS)
        except MissingArm as exc:  # not expected: complete holds every arm
            out[kind] = {"refused": str(exc)}
            continue
        out[kind] = {
            "seeds": list(complete),
            "values": complete,
            "arms": arms,
            "pooled": pooled(seeds, root, kind, complete),
        }
    return out


def pooled(seeds: dict[str, dict], root: Path, kind: str, names) -> dict:
    """The pooled-question tests of each arm against the control over the seeds ``names``."""
    out = {}
    for arm in ARMS[1:]:
        test = f"{arm}_vs_control"
        if kind == "greedy":
            own = [seeds[n]["tests"][test] for n in names if seeds[n]["tests"][test]]
            wins, losses = sum(t["wins"] for t in own), sum(t["losses"] for t in own)
            out[arm] = {"wins": wins, "losses": losses, "p": sign_test(wins, losses)}
        else:
            dumps = [{r: eval_dump(root / n, r) for r in (CONTROL, arm)} for n in names]
            out[arm] = sampled_rows.pooled(dumps, test)["tests"][test]
    return out


def refine_term(seeds: dict[str, dict], curves_by_run: dict[str, dict]) -> dict:
    """Per arm: the first step's share of mixed groups per seed (the target: >= MIXED_TARGET), the
    live share's mean, and the mean over seeds of the live share and refine rate by step."""
    out = {}
    for arm in ARMS:
        first = {n: s["runs"][arm]["refine_term"]["mixed_first_step"] for n, s in seeds.items()}
        live = [s["runs"][arm]["refine_term"]["live_mean"] for s in seeds.values()]
        by_step: dict[str, dict[int, list[float]]] = {LIVE: {}, "pasr/refine_rate": {}}
        for n in seeds:
            c = curves_by_run.get(f"{n}/{arm}", {})
            for key, steps in by_step.items():
                for step, v in zip(c.get("step", []), c.get(key, [])):
                    if v is not None:
                        steps.setdefault(step, []).append(v)
        got = [v for v in first.values() if v is not None]
        out[arm] = {
            "mixed_first_step": first,
            "mixed_first_step_mean": fmean(got) if got else None,
            "seeds_mixed_at_target": sum(v >= MIXED_TARGET for v in got),
            "live_mean": fmean(v for v in live if v is not None) if any(v is not None for v in live) else None,
            "live_curve": {s: round(fmean(v), 4) for s, v in sorted(by_step[LIVE].items())},
            "refine_rate_curve": {s: round(fmean(v), 4) for s, v in sorted(by_step["pasr/refine_rate"].items())},
        }
    return out


def work_s(lines: list[dict]) -> float:
    """The seconds a run's metrics account for: its warm-up and RL steps and its evaluations (its
    wall time less this is its start and checkpoint writes)."""
    steps = sum(m.get("timing_s/update", 0.0) for m in lines if m.get("phase") == "warmup")
    steps += sum(m.get("timing_s/step", 0.0) for m in lines if m.get("phase") == "pasr")
    return steps + sum(m.get("timing_s/eval", 0.0) for m in lines if m.get("phase") == "eval")


def measured_timings(root: Path, settings: dict, seeds: list[int], starts: bool = True) -> dict:
    """This run's own step, evaluation and start times (per run, at ``parallel`` side by side):
    the basis of a later ``--dry-run --plan-from`` plan. ``starts=False`` leaves the starts out
    (``start_s`` None) and reads no logs: the runner's poll measures starts itself."""
    warm, rl, ev, samp, begun = [], [], [], [], []
    n, k = settings.get("eval_size") or 1, settings.get("eval_sampled_k") or 0
    for s in seeds:
        for run in RUNS:
            lines = metric_lines(root / f"seed_{s}" / run)
            w = [m["timing_s/update"] for m in lines if m.get("phase") == "warmup" and "timing_s/update" in m]
            r = [m["timing_s/step"] for m in lines if m.get("phase") == "pasr" and "timing_s/step" in m]
            e = [m for m in lines if m.get("phase") == "eval"]
            warm += w[1:]  # the first step pays one-off warm-ups
            rl += r[1:]
            # an evaluation's timing_s/eval holds its sampled half (timing_s/eval_sampled) too
            ev += [(m["timing_s/eval"] - m.get("timing_s/eval_sampled", 0.0)) / n for m in e if m.get("timing_s/eval")]
            samp += [m["timing_s/eval_sampled"] / (n * k) for m in e if m.get("timing_s/eval_sampled") and k]
            log = log_of(root, f"seed_{s}/{run}")
            if starts and log.is_file() and lines:
                begun.append(max(0.0, WatchedRun.load(log).wall_s - work_s(lines)))

    def avg(xs, f=fmean):
        return round(f(xs), 4) if xs else None

    device = settings.get("device") or ""
    return {
        "device_kind": "cpu" if device.startswith("cpu") else "gpu",
        "source": f"pasr_ab on {device} at commit {(settings.get('commit') or '?')[:7]}, {settings.get('parallel')} "
        "runs side by side",
        "parallel": settings.get("parallel"),
        "rollouts": settings.get("rollouts_per_step"),
        "warmup_step_s": avg(warm),
        "rl_step_s": avg(rl),
        "eval_s": avg(ev),
        "sampled_s": avg(samp),
        "start_s": avg(begun, median),
    }


def verdict(stats: dict) -> dict:
    """Per PASR arm and evaluation: on how many seeds it beat the control by more than that seed's
    drift, and whether that was most seeds (the issue's bar for a headline)."""
    out = {}
    for kind, s in stats.items():
        for arm in PASR_ARMS:
            d = ((s or {}).get("arms") or {}).get(arm, {}).get("vs_drift")
            if d and d["n"]:
                out[f"{arm}/{kind}"] = {
                    "seeds": d["n"],
                    "up_beyond_drift": d["seeds_up_beyond_drift"],
                    "down_beyond_drift": d["seeds_down_beyond_drift"],
                    "mean_beyond_drift_rms": d["beyond_drift"],
                    "most_seeds": d["most_seeds_up_beyond_drift"],
                }
    return {"by_arm": out, "headline": any(v["most_seeds"] for v in out.values()) if out else None}


def build_result(root: Path) -> dict:
    settings, state = read_json(root / "settings.json"), read_json(root / "state.json")
    seed_ids = settings.get("seeds", [])
    seeds = {f"seed_{s}": seed_result(root, s, state) for s in seed_ids}
    runs = {f"seed_{s}/{arm}": curves(root / f"seed_{s}" / arm) for s in seed_ids for arm in ARMS}
    stats = statistics(seeds, root)
    left_out = {n: s["left_out"] for n, s in seeds.items() if not s["usable"]}
    return {
        "question": QUESTION,
        "device": settings.get("device"),
        "commit": settings.get("commit"),
        "wall_s": round(sum(p["wall_s"] for p in state.get("parts", {}).values()), 1),
        "budget_s": settings.get("budget_s"),
        "complete": bool(state.get("complete")) and not left_out,
        "arms": list(ARMS),
        "seeds": seeds,
        "seeds_left_out": left_out,
        "stats": stats,
        "refine_term": refine_term(seeds, runs),
        "mixed_target": MIXED_TARGET,
        "verdict": verdict(stats),
        "curves": runs,
        "timings": {
            "phases": state.get("phases", {}),
            "measured": measured_timings(root, settings, seed_ids),
            "plan": settings.get("plan"),
        },
        "settings": settings,
    }
