"""What a GPU benchmark's run directory says, read the same way by every report built from one:
an evaluation dump's row and two dumps' paired sign test, verl's start-up timeline and step times
from its watched log, its last checkpoint, and the result file written whole.

Why a module of their own: ``gpu_check``'s two results (the stop/resume check,
:mod:`benchmarks.gpu_check_report`, and ``--part learn``'s, :mod:`benchmarks.gpu_learn_report`),
``gpu_scale`` and ``pasr_ab`` all read these facts, and each used to import them from the
stop/resume report. They were moved here from :mod:`benchmarks.gpu_check_report`, which still
re-exports them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from statistics import fmean

from benchmarks.report_files import read_json
from benchmarks.watched_run import WatchedRun
from eval.significance import paired_counts, sign_test
from recipe.metrics_file import metric_lines

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
    return {"mean_step": mean_parts(rows), "first_step": mean_parts(firsts), "n_steps_averaged": len(rows)}


def mean_parts(rows: list[dict], keys=STEP_PARTS) -> dict:
    """The mean of each timing key over the step rows that have it (``timing_s/`` dropped)."""
    return {
        k.removeprefix("timing_s/"): round(fmean(m[k] for m in rows if k in m), 2)
        for k in keys
        if any(k in m for m in rows)
    }


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


def write_result(result: dict, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(result, indent=2) + "\n")
    tmp.replace(out)


def cell(row: dict | None, key: str):
    """A report cell's value: '-' when missing, a float to 3 decimals, anything else as it is."""
    if row is None or row.get(key) is None:
        return "-"
    return f"{row[key]:.3f}" if isinstance(row[key], float) else row[key]


def log_of(root: Path, name: str) -> Path:
    return root / f"{name.replace('/', '_')}.log"


def not_evaluated(root: Path, name: str, state: dict) -> dict:
    """Why run ``name`` (``seed_S/<run>`` under ``root``) has no evaluation, from the runner's state
    (its ``skipped`` runs), its log's sidecar and its files: a status a table prints instead of an
    empty row (pasr_ab and gpu_scale, whose runs are laid out alike)."""
    if name in state.get("skipped", {}):
        return {"status": "not started", "why": state["skipped"][name]}
    log = log_of(root, name)
    if not log.is_file():
        return {"status": "not started", "why": "the command ended before it started"}
    events = read_json(log.with_name(log.name + ".events.json"))
    rc, signals = events.get("rc"), [s[1] for s in events.get("signals", [])]
    stopped = f"signal {signals[0]}" if signals else ("cut off (no exit code)" if rc is None else None)
    run_dir = root / name
    logged = max((m["step"] for m in metric_lines(run_dir) if m.get("phase") in ("pasr", "warmup")), default=0)
    if not (run_dir / "checkpoints" / "latest").is_file():
        if stopped:
            return {"status": "stopped before its first checkpoint", "why": stopped, "logged_step": logged}
        return {"status": "failed", "why": f"exit {rc}; see {log.name}", "logged_step": logged}
    return {"status": "not evaluated", "why": f"{stopped or f'exit {rc}'} after step {logged}", "logged_step": logged}
