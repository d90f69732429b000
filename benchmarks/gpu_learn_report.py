"""The result of ``gpu_check --part learn`` (does verl learn PASR as the local engine does?), read
from its run directory alone, as :mod:`benchmarks.gpu_check_report` reads the stop/resume check's:
both engines' per-step curves and whether they move alike, the held-out rows of the warm-up, verl's
merged last checkpoint and the local engine's checkpoint of the same step with their paired tests,
the checks PASS needs, the stop/resume check a later ``--part resume`` adds, the printed report and
the plot of the curves.

Why a module of its own: ``--part learn`` is a different question from the stop/resume check, with
its own rows, tests and checks; :func:`benchmarks.gpu_check_report.build_result` hands a learn run
directory over to :func:`build_learn_result` here (and re-exports these names). The facts it
reads with the stop/resume report are in :mod:`benchmarks.gpu_run_facts`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from statistics import fmean, variance

from benchmarks import sampled_rows
from benchmarks.gpu_run_facts import cell, eval_summary, latest_checkpoint, mean_parts, paired, startup, step_timings
from benchmarks.report_files import read_json
from benchmarks.watched_run import WatchedRun

# --part learn: one verl run, and the rows and curves it is judged by
LEARN_ROW_KEYS = ("acc", "format", "refine_rate", "refine_fix_rate", "refine_break_rate", "tokens", "n")
CURVE_KEYS = (
    "pasr/acc_refine",
    "pasr/acc_plain",
    "pasr/refine_rate",
    "pasr/refine_fix_rate",
    "pasr/refine_break_rate",
    "pasr/reward_mean",
    "actor/kl_loss",
    "actor/grad_norm",
    "actor/lr",
    "timing_s/step",
)
TREND_KEY = "pasr/acc_refine"  # the sampled refine-rollout accuracy: what PASR's reward pushes up
MIN_LEARN_STEPS = 6  # thirds of at least two steps each, so each third has a spread
TESTS_LEARN = ("verl_vs_warmup", "local_vs_warmup", "verl_vs_local")


def verl_curves(run: WatchedRun, upto: int | None) -> dict[str, list]:
    """Per-step values of :data:`CURVE_KEYS` from verl's console step lines, steps 1..``upto``."""
    steps = [s for s in sorted(run.steps) if upto is None or s <= upto]
    return {"step": steps, **{k: [run.steps[s][1].get(k) for s in steps] for k in CURVE_KEYS}}


def local_curves(run_dir: Path, upto: int | None) -> dict[str, list]:
    """The same curves from the local run's ``metrics.jsonl`` (the RL steps' lines)."""
    from recipe.metrics_file import metric_lines

    lines = {m["step"]: m for m in metric_lines(run_dir) if TREND_KEY in m}
    steps = [s for s in sorted(lines) if upto is None or s <= upto]
    return {"step": steps, **{k: [lines[s].get(k) for s in steps] for k in CURVE_KEYS}}


LOCAL_STEP_PARTS = ("timing_s/gen", "timing_s/reward", "timing_s/update", "timing_s/step")
LOCAL_STEP_TARGET = 1.5  # issue #65: the local engine's step within 1.5x of verl's on the same batch


def step_parts(verl: WatchedRun, local_dir: Path, upto: int | None) -> dict:
    """Both engines' step parts side by side (mean seconds over steps 2..``upto``: the first pays
    one-off costs) and the local engine's step over verl's, against :data:`LOCAL_STEP_TARGET`."""
    from recipe.metrics_file import metric_lines

    v = [m for s, (_, m) in sorted(verl.steps.items()) if s > 1 and (upto is None or s <= upto)]
    lines = {m["step"]: m for m in metric_lines(local_dir) if m.get("phase") == "pasr"}
    loc = [m for s, m in sorted(lines.items()) if s > 1 and (upto is None or s <= upto)]
    out = {"verl": mean_parts(v), "local": mean_parts(loc, LOCAL_STEP_PARTS), "steps": [len(v), len(loc)]}
    vs, ls = out["verl"].get("step"), out["local"].get("step")
    out["local_over_verl"] = round(ls / vs, 2) if vs and ls else None
    out["target"] = LOCAL_STEP_TARGET
    return out


def third_change(values: list[float]) -> dict | None:
    """Mean of the last third of ``values`` less the mean of the first third, with its standard
    error from the step-to-step spread inside each third (steps are independent batches)."""
    vals = [v for v in values if v is not None]
    k = len(vals) // 3
    if k < 2:
        return None
    first, last = vals[:k], vals[-k:]
    return {
        "first_third": round(fmean(first), 4),
        "last_third": round(fmean(last), 4),
        "change": round(fmean(last) - fmean(first), 4),
        "se": round(math.sqrt(variance(first) / k + variance(last) / k), 4),
        "steps_per_third": k,
    }


def curves_agree(verl: dict | None, local: dict | None, z_max: float = 1.96) -> dict:
    """Does verl's curve move as the local engine's does? The change from the first third of
    the steps to the last (:func:`third_change`) must agree in sign, and the two changes must
    differ by less than ``z_max`` standard errors of their difference (a two-sided z test at 5%)."""
    out = {"key": TREND_KEY, "verl": verl, "local": local, "test": f"same sign and |z| < {z_max}"}
    if not verl or not local:
        return {**out, "agree": False}
    se = math.hypot(verl["se"], local["se"])
    z = (verl["change"] - local["change"]) / se if se > 0 else (0.0 if verl["change"] == local["change"] else math.inf)
    same_sign = (verl["change"] > 0) == (local["change"] > 0) and (verl["change"] < 0) == (local["change"] < 0)
    return {
        **out,
        "z": round(z, 3),
        "same_sign": same_sign,
        "within_noise": abs(z) < z_max,
        "agree": same_sign and abs(z) < z_max,
    }


def learn_checks(result: dict) -> list[tuple[str, bool]]:
    """What PASS needs for ``--part learn``: verl trained, checkpointed, merged and evaluated; its
    training curve moves as the local engine's; its held-out row is within noise of the local one."""
    k = result["steps"]
    vs_local = result["tests"]["verl_vs_local"]
    return [
        ("warm-up evaluated", result["warmup"] is not None),
        (
            f"verl trained at least {MIN_LEARN_STEPS} steps and checkpointed its last (step {k})",
            k is not None and k >= MIN_LEARN_STEPS and max(result["curves"]["verl"]["step"], default=0) == k,
        ),
        ("verl's final checkpoint merged and evaluated", result["verl"] is not None and result["verl_step"] == k),
        (
            f"the local engine evaluated at the same step ({result['local_step']})",
            result["local"] is not None and result["local_step"] == k,
        ),
        (
            f"training curves move alike ({TREND_KEY}, first third to last: same sign, within noise)",
            result["trend"]["agree"],
        ),
        (
            "verl's held-out row within noise of the local engine's (paired sign test p > 0.05)",
            vs_local is not None and vs_local["p"] > 0.05,
        ),
    ]


def build_learn_result(root: Path) -> dict:
    """``--part learn``'s result from what ``root`` holds now."""
    settings, state = read_json(root / "settings.json"), read_json(root / "state.json")
    verl = WatchedRun.load(root / "verl.log", "verl")
    resume_from = state.get("resume_from")
    k = latest_checkpoint(root / "verl") if resume_from is None else resume_from  # learn's own last step
    warm = root / "warmup_eval" / "eval" / "base.jsonl"
    verl_eval, local_eval = root / "final_eval" / "eval" / "base.jsonl", root / "local_eval" / "eval" / "base.jsonl"
    curves = {"verl": verl_curves(verl, k), "local": local_curves(root / "local_pasr", k)}
    term = next((s for s in verl.signals if s[1] == "SIGTERM"), None)
    result = {
        "part": "learn",
        "device": settings.get("device"),
        "commit": settings.get("commit"),
        "wall_s": state.get("parts", {}).get("learn", {}).get("wall_s", 0.0),
        "budget_s": settings.get("budget_s"),
        "complete": bool(state.get("complete")),
        "steps": k,
        "steps_asked": settings.get("steps"),
        "stopped_by_deadline": {"signal_at_s": term[0], "during_step": term[2]} if term else None,
        "warmup": eval_summary(warm, LEARN_ROW_KEYS),
        "verl": eval_summary(verl_eval, LEARN_ROW_KEYS),
        "verl_step": state.get("final_checkpoint"),
        "local": eval_summary(local_eval, LEARN_ROW_KEYS),
        "local_step": state.get("local_eval_step"),
        "tests": {  # wins: right in the second, wrong in the first; losses the other way
            "verl_vs_warmup": paired(warm, verl_eval),
            "local_vs_warmup": paired(warm, local_eval),
            "verl_vs_local": paired(local_eval, verl_eval),
        },
        "sampled": sampled_rows.section(dict(warmup=warm, verl=verl_eval, local=local_eval), *TESTS_LEARN),
        "curves": curves,
        "trend": curves_agree(third_change(curves["verl"][TREND_KEY]), third_change(curves["local"][TREND_KEY])),
        "timings": {
            "parts": state.get("parts", {}),
            "phases": state.get("phases", {}),
            "startup": startup(verl),
            **step_timings([verl]),
            "step_parts": step_parts(verl, root / "local_pasr", k),
        },
        "settings": settings,
    }
    result["verl_stop"] = state.get("verl_stop")  # why the check stopped verl (None: it ended on its own)
    result["missing"] = missing_rows(result, root)
    result["checks"] = learn_checks(result)
    result["passed"] = all(ok for _, ok in result["checks"])
    if resume_from is not None:
        result["resume_check"] = resume_check(root, state, resume_from)
    return result


def missing_rows(result: dict, root: Path) -> dict[str, dict]:
    """Why each absent row is absent, as a status and its reason (a table prints these, never an
    empty row): verl stopped before its first checkpoint, a checkpoint not evaluated by the
    command's end, the local engine with no checkpoint at or before verl's step."""

    def ended(log: str) -> str:
        run = WatchedRun.load(root / log)
        if not run.log.is_file():
            return "not started"
        return "cut off (no exit code)" if run.rc is None else f"exit {run.rc}; see {log}"

    out = {}
    if result["warmup"] is None:
        out["warmup"] = {"status": "not evaluated", "why": ended("warmup_eval.log")}
    k = result["steps"]
    if k is None:
        why = result.get("verl_stop") or ended("verl.log")
        out["verl"] = {"status": "stopped before its first checkpoint", "why": why}
    elif result["verl"] is None:
        out["verl"] = {"status": "not evaluated", "why": f"step {k}: " + ended("final_eval.log")}
    if result["local"] is None:
        if k is None or result.get("local_step") is None:
            out["local"] = {
                "status": "no checkpoint to compare",
                "why": "verl left none" if k is None else f"none at or before verl's step {k}",
            }
        else:
            step = result["local_step"]
            out["local"] = {"status": "not evaluated", "why": f"step {step}: " + ended("local_eval.log")}
    return out


def resume_check(root: Path, state: dict, k: int) -> dict:
    """``--part resume`` after learn: verl resumed learn's run from ``global_step_K``, got SIGTERM
    during step K + 2, checkpointed it and exited 0 without starting K + 3."""
    run = WatchedRun.load(root / "verl_resume.log", "verl_resume")
    term = next((s for s in run.signals if s[1] == "SIGTERM"), None)
    last = latest_checkpoint(root / "verl")
    steps = sorted(run.steps)
    checks = [
        (f"resumed from global_step_{k}", run.grep(f"global_step_{k}") and bool(steps) and steps[0] == k + 1),
        (f"got SIGTERM during step {k + 2}", term is not None and term[2] == k + 2),
        ("exited 0 after it", run.rc == 0),
        (f"checkpointed step {k + 2} and stopped there", last == k + 2 and steps[-1:] == [k + 2]),
    ]
    return {
        "from_step": k,
        "steps_run": steps,
        "signal_at_s": term[0] if term else None,
        "rc": run.rc,
        "checkpoint": last,
        "wall_s": state.get("parts", {}).get("resume", {}).get("wall_s"),
        "startup": startup(run),
        "checks": checks,
        "passed": all(ok for _, ok in checks),
    }


def print_learn_report(result: dict) -> None:
    print("\n==== gpu_check --part learn ====")
    print(
        f"device: {result['device']}   wall: {result['wall_s']:.0f} s   verl steps: {result['steps']}"
        f" (at most {result['steps_asked']})" + ("" if result["complete"] else "   (not complete: the result so far)")
    )
    print(f"{'row':<10}" + "".join(f"{k:>19}" for k in LEARN_ROW_KEYS))
    for name in ("warmup", "verl", "local"):
        gone = result.get("missing", {}).get(name)
        if gone and result.get(name) is None:
            print(f"{name:<10} {gone['status']} ({gone['why']})")
            continue
        print(f"{name:<10}" + "".join(f"{cell(result.get(name), k):>19}" for k in LEARN_ROW_KEYS))
    if result.get("verl_stop"):
        print(f"verl stopped by the check: {result['verl_stop']}")
    for name, test in result["tests"].items():
        print(f"{name:<16} {test}")
    sampled_rows.print_report(result.get("sampled"))
    print(f"trend: {json.dumps(result['trend'])}")
    print(f"start-up: {json.dumps(result['timings']['startup'])}")
    print(f"phases: {json.dumps(result['timings']['phases'])}")
    print(f"steps: first {result['timings']['first_step']}, mean {result['timings']['mean_step']}")
    parts = result["timings"].get("step_parts")
    if parts:
        ratio = parts["local_over_verl"]
        print(
            f"step parts (mean s, steps 2..{result['steps']}): verl {json.dumps(parts['verl'])}  local "
            f"{json.dumps(parts['local'])}  local/verl "
            + (
                "-"
                if ratio is None
                else f"{ratio:.2f}x (target <= {parts['target']}x: {'met' if ratio <= parts['target'] else 'missed'})"
            )
        )
    for name, ok in result["checks"]:
        print(f"  {'ok  ' if ok else 'FAIL'}  {name}")
    print(("PASS" if result["passed"] else "FAIL") + f" ({result['wall_s']:.0f} s)")
    rc = result.get("resume_check")
    if rc:
        print(f"resume check (--part resume, {rc['wall_s']} s, start-up {json.dumps(rc['startup'])}):")
        for name, ok in rc["checks"]:
            print(f"  {'ok  ' if ok else 'FAIL'}  {name}")
        print("resume check " + ("PASS" if rc["passed"] else "FAIL"))


PLOT_PANELS = (
    ("pasr/acc_refine", "sampled refine-rollout accuracy"),
    ("pasr/acc_plain", "sampled plain-rollout accuracy"),
    ("pasr/refine_fix_rate", "refine-fix rate"),
    ("pasr/refine_break_rate", "refine-break rate"),
    ("pasr/reward_mean", "mean reward"),
    ("actor/kl_loss", "KL to the warm-up"),
    ("actor/grad_norm", "gradient norm"),
    ("actor/lr", "learning rate"),
)


def plot_learn(result: dict, path: Path) -> Path:
    """Both engines' per-step training curves of a ``--part learn`` result, one panel a metric,
    with the held-out rows in the title: what a person would rather look at than read."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 4, figsize=(16, 7), constrained_layout=True)
    for ax, (key, title) in zip(axes.flat, PLOT_PANELS):
        for engine, style in (("verl", "-o"), ("local", "--s")):
            c = result["curves"][engine]
            pts = [(s, v) for s, v in zip(c["step"], c.get(key, [])) if v is not None]
            if pts:
                ax.plot(*zip(*pts), style, ms=3, label=engine)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("step")
        lo, hi = ax.get_ylim()
        if hi - lo < 0.05 and key.startswith("pasr/"):  # a flat rate drawn flat, not as noise
            mid = (hi + lo) / 2
            ax.set_ylim(mid - 0.025, mid + 0.025)
        ax.legend(fontsize=8)

    def row(name):
        r = result.get(name)
        return f"{name} {r['acc']:.3f}" if r else f"{name} -"

    t = result["tests"]
    vs = t.get("verl_vs_local") or {}
    fig.suptitle(
        f"gpu_check --part learn on {result['device']} ({result['steps']} verl steps, commit "
        f"{(result.get('commit') or '?')[:7]}); held-out greedy accuracy: {row('warmup')}, {row('verl')}, "
        f"{row('local')} (verl vs local {vs.get('wins')}/{vs.get('losses')}, p {vs.get('p', float('nan')):.2g})",
        fontsize=11,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
