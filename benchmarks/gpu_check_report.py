"""The result of ``benchmarks.gpu_check``, read from its run directory alone.

Why from files: a lent GPU machine's command has a hard time limit, and a check cut off there
still did things worth reporting (a warm-up, a stop, some steps). So the check writes nothing
but logs (timestamped, with a sidecar of signals and exit codes: :mod:`benchmarks.watched_run`),
evaluation dumps, verl's checkpoints and two small JSON files (``settings.json``: how it was
asked to run; ``state.json``: phase times and what each phase found), and this module turns a
run directory into the result at any moment: after every phase, at the end, or afterwards with
``gpu_check --report RUN_DIR`` on a directory fetched from the machine.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from statistics import fmean, variance

from benchmarks import sampled_rows
from benchmarks.report_files import read_json
from benchmarks.watched_run import WatchedRun
from eval.significance import paired_counts, sign_test

ROW_KEYS = ("acc", "format", "refine_rate", "refine_fix_rate", "tokens", "n")
STEP_PARTS = ("timing_s/gen", "timing_s/old_log_prob", "timing_s/ref", "timing_s/update_actor", "timing_s/step")
# the start-up timeline of a verl run: the first line matching each, in seconds from its command
MARKS = {
    "ray_up": re.compile(r"Started a local Ray instance|Connected to Ray cluster"),
    "task_runner": re.compile(r"pasr verl: task runner on"),
    "workers_spawned": re.compile(r"\(WorkerDict pid="),
    "fsdp_built": re.compile(r"After FSDP, memory allocated"),
    "vllm_server": re.compile(r"\(vLLMHttpServer pid=\d+\)"),
    "vllm_engine_core": re.compile(r"EngineCore pid=|Initializing a V1 LLM engine"),
    "vllm_ready": re.compile(r"LLMServerManager:|KV cache size|Available KV cache memory"),
    "fit_start": re.compile(r"Training from scratch|Resuming from"),
}
STOP_LINE = re.compile(r"pasr verl: stopped after step (\d+); (?:checkpoint|its checkpoint is already saved)")
STOP_SIGNAL_LINE = re.compile(r"pasr verl: SIGTERM received: stopping after step (\d+)")
LOGS = {"warmup": "warmup.log", "verl_1": "verl_1.log", "verl_2": "verl_2.log", "local": "local_pasr.log"}
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
TESTS_ALL = ("pasr_vs_warmup", "local_vs_warmup", "pasr_vs_local")  # the sampled ones (sampled_rows.section)
TESTS_LEARN = ("verl_vs_warmup", "local_vs_warmup", "verl_vs_local")


def eval_summary(path: Path, keys=ROW_KEYS) -> dict | None:
    """The row (acc, format, refine_rate, refine_fix_rate, ...) of an evaluation dump, or None."""
    from benchmarks.learning_signal import eval_row

    if not path.is_file():
        return None
    row = eval_row(path)
    return {k: row.get(k) for k in keys}


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

    def means(ms):
        return {
            k.removeprefix("timing_s/"): round(fmean(m[k] for m in ms if k in m), 2)
            for k in STEP_PARTS
            if any(k in m for m in ms)
        }

    return {"mean_step": means(rows), "first_step": means(firsts), "n_steps_averaged": len(rows)}


def startup(run: WatchedRun) -> dict:
    """The run's start-up timeline (seconds from its command) and the time to its first step's
    start: when the first step line was logged, less that step's own ``timing_s/step``."""
    out = {name: (None if (t := run.first(p)) is None else round(t, 1)) for name, p in MARKS.items()}
    if run.steps:
        t, metrics = run.steps[min(run.steps)]
        out["first_step_logged"] = round(t, 1)
        out["to_first_step"] = round(t - metrics.get("timing_s/step", 0.0), 1)
    if run.lines:
        out["last_line"] = round(run.lines[-1][0], 1)
    return out


def pasr_metric_trend(
    runs: list[WatchedRun],
    keys=(
        "pasr/format_pass_rate",
        "pasr/acc_refine",
        "pasr/acc_plain",
        "pasr/refine_rate",
        "pasr/refine_fix_rate",
        "critic/score/mean",
        "actor/lr",
    ),
) -> dict:
    merged = {s: m for r in runs for s, (_, m) in r.steps.items()}
    return {k: [float(f"{merged[s][k]:.4g}") for s in sorted(merged) if k in merged[s]] for k in keys}


def stop_info(run1: WatchedRun, state: dict, asked_step: int) -> dict:
    """What the SIGTERM to run 1 did. The sidecar says when it was sent and the exit code; without
    one (a run whose command was killed before it was written) the driver's own lines say during
    which step it arrived and which checkpoint it left, and the exit code is unknown (None)."""
    term = next((s for s in run1.signals if s[1] == "SIGTERM"), None)
    stopped = next((int(m.group(1)) for _, line in run1.lines if (m := STOP_LINE.search(line))), None)
    source = "events"
    if term is None:
        heard = next((int(m.group(1)) for _, line in run1.lines if (m := STOP_SIGNAL_LINE.search(line))), None)
        if heard is not None:
            at = next((t for t, line in run1.lines if "pasr verl: SIGTERM" in line), None)
            term, source = (at, "SIGTERM", heard), "driver log"
    return {
        "asked_step": asked_step,
        "during_step": term[2] if term else None,
        "signal_at_s": term[0] if term else None,
        "signalled": term is not None,
        "rc": run1.rc,
        "source": source,
        "checkpoint": state.get("stop_checkpoint", stopped),
        "steps_run": sorted(run1.steps),
        "stopped_line": stopped is not None,
    }


def checks(result: dict) -> list[tuple[str, bool]]:
    """What PASS needs: the stop / resume path worked and the verl engine learned."""
    stop = result["stop"]
    during = stop["during_step"]
    out = [
        ("warm-up evaluated", result["warmup"] is not None),
        (
            f"run 1 got SIGTERM during a step (step {during})",
            bool(stop["signalled"]) and during is not None and during <= result["steps_asked"],
        ),
        (
            "run 1 exited 0 after the SIGTERM" + (" (exit code not recorded)" if stop["rc"] is None else ""),
            stop["rc"] == 0,
        ),
        (
            f"run 1 checkpointed the step it was in (global_step_{during}) and stopped there",
            during is not None and stop["checkpoint"] == during and max(stop["steps_run"], default=0) == during,
        ),
        ("run 2 resumed from that checkpoint", bool(result["resumed"])),
        (f"run 2 finished all {result['steps_asked']} steps", result["steps"] == result["steps_asked"]),
        ("final checkpoint evaluated", result["pasr"] is not None and result.get("pasr_step") == result["steps_asked"]),
    ]
    p = result.get("p_pasr_vs_warmup")
    learned = bool(
        result["pasr"]
        and result["warmup"]
        and result["pasr"]["acc"] > result["warmup"]["acc"]
        and p is not None
        and p < 0.05
    )
    out.append(("verl PASR above its warm-up, sign test p < 0.05", learned))
    return out


def build_result(root: Path) -> dict:
    """The check's result from what ``root`` holds now (see the module docstring)."""
    settings, state = read_json(root / "settings.json"), read_json(root / "state.json")
    if settings.get("part") == "learn":
        return build_learn_result(root)
    run1, run2 = (WatchedRun.load(root / LOGS[k], k) for k in ("verl_1", "verl_2"))
    warm_dir = root / "warmup" / "eval"
    warm_eval = warm_dir / "warmup.jsonl" if (warm_dir / "warmup.jsonl").is_file() else warm_dir / "base.jsonl"
    final_eval, local_eval = root / "final_eval" / "eval" / "base.jsonl", root / "local_pasr" / "eval" / "final.jsonl"
    stop = stop_info(run1, state, settings.get("stop_at"))
    resumed = (
        stop["checkpoint"] is not None
        and run2.grep(f"global_step_{stop['checkpoint']}")
        and bool(run2.steps)
        and min(run2.steps) == stop["checkpoint"] + 1
    )
    phases = state.get("phases", {})
    result = {
        "device": settings.get("device"),
        "wall_s": round(sum(p["wall_s"] for p in state.get("parts", {}).values()), 1),
        "budget_s": settings.get("budget_s"),
        "complete": bool(state.get("complete")),
        "steps": latest_checkpoint(root / "verl"),
        "steps_asked": settings.get("steps"),
        "resumed": bool(resumed),
        "stop": stop,
        "warmup": eval_summary(warm_eval),
        "pasr": eval_summary(final_eval),
        "pasr_step": state.get("final_checkpoint"),
        "local_pasr": eval_summary(local_eval),
        "tests": {
            "pasr_vs_warmup": paired(warm_eval, final_eval),
            "local_vs_warmup": paired(warm_eval, local_eval),
            "pasr_vs_local": paired(local_eval, final_eval),
        },
        # mean@K at T=0.5 and paired tests on per-question means
        "sampled": sampled_rows.section(dict(warmup=warm_eval, pasr=final_eval, local=local_eval), *TESTS_ALL),
        "timings": {
            "parts": state.get("parts", {}),
            "phases": phases,
            "startup_run1": startup(run1),
            "startup_run2": startup(run2),
            **step_timings([run1, run2]),
        },
        "train_metrics": pasr_metric_trend([run1, run2]),
        "settings": settings,
    }
    p = result["tests"]["pasr_vs_warmup"]
    result["p_pasr_vs_warmup"] = p["p"] if p else None
    result["checks"] = checks(result)
    result["passed"] = all(ok for _, ok in result["checks"])
    return result


def write_result(result: dict, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(result, indent=2) + "\n")
    tmp.replace(out)


def _cell(row: dict | None, key: str):
    """A report cell's value: '-' when missing, a float to 3 decimals, anything else as it is."""
    if row is None or row.get(key) is None:
        return "-"
    return f"{row[key]:.3f}" if isinstance(row[key], float) else row[key]


def print_report(result: dict) -> None:
    if result.get("part") == "learn":
        print_learn_report(result)
        return
    print("\n==== gpu_check ====")
    print(
        f"device: {result['device']}   wall: {result['wall_s']:.0f} s   "
        f"steps: {result['steps']}/{result['steps_asked']}"
        + ("" if result["complete"] else "   (not complete: the result so far)")
    )
    print(f"{'row':<22}" + "".join(f"{k:>16}" for k in ROW_KEYS))
    for name in ("warmup", "pasr", "local_pasr"):
        row = result.get(name)
        cells = "".join(f"{_cell(row, k):>16}" for k in ROW_KEYS)
        print(f"{name:<22}{cells}")
    for key in ("p_pasr_vs_warmup", "p_local_vs_warmup", "p_pasr_vs_local"):
        print(f"{key:<22} {result['tests'].get(key.removeprefix('p_'))}")
    sampled_rows.print_report(result.get("sampled"))
    print(f"timings: {json.dumps(result['timings'])}")
    for name, ok in result["checks"]:
        print(f"  {'ok  ' if ok else 'FAIL'}  {name}")
    print(("PASS" if result["passed"] else "FAIL") + f" ({result['wall_s']:.0f} s)")


# --------------------------------------------------------------------------- --part learn
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
        },
        "settings": settings,
    }
    result["checks"] = learn_checks(result)
    result["passed"] = all(ok for _, ok in result["checks"])
    if resume_from is not None:
        result["resume_check"] = resume_check(root, state, resume_from)
    return result


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
        print(f"{name:<10}" + "".join(f"{_cell(result.get(name), k):>19}" for k in LEARN_ROW_KEYS))
    for name, test in result["tests"].items():
        print(f"{name:<16} {test}")
    sampled_rows.print_report(result.get("sampled"))
    print(f"trend: {json.dumps(result['trend'])}")
    print(f"start-up: {json.dumps(result['timings']['startup'])}")
    print(f"phases: {json.dumps(result['timings']['phases'])}")
    print(f"steps: first {result['timings']['first_step']}, mean {result['timings']['mean_step']}")
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
