"""The result of ``benchmarks.gpu_check``, read from its run directory alone.

Why from files: a lent GPU machine's command has a hard time limit, and a check cut off there
still did things worth reporting (a warm-up, a stop, some steps). So the check writes nothing
but logs (timestamped, with a sidecar of signals and exit codes: :mod:`benchmarks.watched_run`),
evaluation dumps, verl's checkpoints and two small JSON files (``settings.json``: how it was
asked to run; ``state.json``: phase times and what each phase found), and this module turns a
run directory into the result at any moment: after every phase, at the end, or afterwards with
``gpu_check --report RUN_DIR`` on a directory fetched from the machine.

This module holds the stop/resume check's result (``--part all``, ``first`` and ``resume``); a
``--part learn`` run directory is handed to :mod:`benchmarks.gpu_learn_report`, and the facts both
read (evaluation rows, paired tests, verl's start-up and step times) are in
:mod:`benchmarks.gpu_run_facts`. Every name either holds is re-exported here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from benchmarks import sampled_rows
from benchmarks.gpu_learn_report import (  # noqa: F401  re-exported: --part learn's result, moved there
    CURVE_KEYS,
    LEARN_ROW_KEYS,
    MIN_LEARN_STEPS,
    PLOT_PANELS,
    TESTS_LEARN,
    TREND_KEY,
    build_learn_result,
    curves_agree,
    learn_checks,
    local_curves,
    plot_learn,
    print_learn_report,
    resume_check,
    third_change,
    verl_curves,
)
from benchmarks.gpu_run_facts import (  # noqa: F401  re-exported: the run facts every GPU report reads, moved there
    MARKS,
    ROW_KEYS,
    STEP_PARTS,
    eval_summary,
    latest_checkpoint,
    paired,
    startup,
    step_timings,
    write_result,
)
from benchmarks.gpu_run_facts import cell as _cell
from benchmarks.report_files import read_json
from benchmarks.watched_run import WatchedRun
from eval.significance import paired_counts, sign_test  # noqa: F401  re-exported

STOP_LINE = re.compile(r"pasr verl: stopped after step (\d+); (?:checkpoint|its checkpoint is already saved)")
STOP_SIGNAL_LINE = re.compile(r"pasr verl: SIGTERM received: stopping after step (\d+)")
LOGS = {"warmup": "warmup.log", "verl_1": "verl_1.log", "verl_2": "verl_2.log", "local": "local_pasr.log"}
TESTS_ALL = ("pasr_vs_warmup", "local_vs_warmup", "pasr_vs_local")  # the sampled ones (sampled_rows.section)


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
