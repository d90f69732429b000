"""What the local trainer reads and writes in its run directory, checkpoints aside
(:mod:`recipe.local_engine.checkpoint`), and the held-out table it ends with.

The run directory holds:

* ``config.yaml`` — the resolved config;
* ``data_split.json`` — how the training pool and the held-out set were split (by content:
  :mod:`data.heldout_split`), their sizes and the training rows dropped;
* ``metrics.jsonl`` — one line per step (``phase`` warmup | pasr | rrr) and per evaluation (``eval``),
  written by :mod:`recipe.metrics_file` as the verl engine writes its own;
* ``rollouts/step_NNNNNN.jsonl`` — every rollout of an RL step (PASR: refine and plain; RRR:
  attempt, reflection and retry), as :class:`~data.records.RolloutRecord`;
  ``eval/<tag>.jsonl`` — evaluation rollouts;
* ``checkpoints/step_NNNNNN`` — HF model + RNG + step, and the optimizer state in the newest
  only (``latest`` points to it; the end of the warm-up is pinned);
* ``tensorboard/`` — with ``trainer.logger`` naming tensorboard (verl's ``Tracking``).

A resume cuts ``metrics.jsonl`` and the rollout dumps back to the checkpoint it starts from
(:func:`truncate_after`), so the steps after it are written once, not twice.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
from pathlib import Path

from data.atomic_write import replace_text
from data.records import write_records
from recipe import step_files
from recipe.judge_errors import judge_error_warning
from recipe.local_engine import sampled_eval
from recipe.local_engine.config import LocalTrainConfig, TrainerConfig, to_yaml
from recipe.metrics_file import append_metrics, metric_lines, truncate_metrics, use_run_tensorboard_dir
from recipe.run_lock import LOCK_FILE

DATA_SPLIT = "data_split.json"


def prepare_run_dir(run_dir: Path, resume: bool) -> None:
    """Check (and for a new run, create) the run directory before any model is loaded. A new
    run's may hold a lock file (:mod:`recipe.run_lock`), left by a start that failed."""
    if resume:
        if not (run_dir / "config.yaml").is_file():
            raise FileNotFoundError(f"cannot resume: {run_dir} is not a run directory (no config.yaml)")
        return
    if run_dir.is_dir() and any(p.name != LOCK_FILE for p in run_dir.iterdir()):
        raise FileExistsError(
            f"run directory {run_dir} exists and is not empty; use --resume {run_dir} or another --run-dir"
        )
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        from data.cli_errors import why_mkdir_failed

        raise NotADirectoryError(f"cannot create run directory {run_dir}: {why_mkdir_failed(run_dir, exc)}") from None


def write_config(run_dir: Path, cfg: LocalTrainConfig) -> None:
    """config.yaml, written beside and renamed (a torn config.yaml would make the run
    impossible to resume); untouched when unchanged, so a no-op resume writes nothing. The
    judge URL's credentials (``user:password@``) are not written (:func:`redact_url`): a resume
    is given the URL again (``pasr train --resume RUN pasr.judge.base_url=...``)."""
    import dataclasses

    from rewards.judges.redact import redact_url

    path = run_dir / "config.yaml"
    judge = cfg.pasr.judge
    if judge.base_url:
        judge = dataclasses.replace(judge, base_url=redact_url(judge.base_url))
        cfg = dataclasses.replace(cfg, pasr=dataclasses.replace(cfg.pasr, judge=judge))
    text = to_yaml(cfg)
    if path.is_file() and path.read_text(encoding="utf-8", errors="replace") == text:
        return
    replace_text(path, text)


def write_data_split(run_dir: Path, record: dict) -> None:
    """``data_split.json``: how the run's data was split into its training pool and held-out
    set (:class:`data.heldout_split.DataSplit`'s record: method, sizes, rows dropped), written
    as config.yaml is (whole, and untouched when unchanged)."""
    path = run_dir / DATA_SPLIT
    text = json.dumps(record, indent=2) + "\n"
    if not (path.is_file() and path.read_text(encoding="utf-8", errors="replace") == text):
        replace_text(path, text)


def truncate_after(run_dir: Path, step: int) -> None:
    """Drop what steps after the checkpoint wrote, so they are redone once, not twice.
    ``step`` 0 (no checkpoint) drops everything the run wrote except config.yaml: the
    start-of-run evaluation is redone too."""
    truncate_metrics(run_dir, step)
    if step == 0:
        for name in ("rollouts", "eval", "checkpoints", "tensorboard"):
            shutil.rmtree(run_dir / name, ignore_errors=True)
        return
    for dump in (run_dir / "rollouts").glob(f"{step_files.STEP_GLOB}.jsonl"):
        if (step_files.step_of(dump.stem) or 0) > step:
            dump.unlink()


def make_tracking(run_dir: Path, trainer: TrainerConfig):
    """verl's ``Tracking`` for ``trainer.logger`` (None when there are none)."""
    loggers = [b for b in trainer.logger if b]
    if not loggers:
        return None
    from verl.utils.tracking import Tracking

    use_run_tensorboard_dir(run_dir)
    return Tracking(trainer.project_name, trainer.experiment_name, default_backend=loggers, config=None)


# ---------------------------------------------------------------- logging
def log_metrics(run_dir: Path, tracking, step: int, phase: str, metrics: dict) -> None:
    """One line of metrics.jsonl, and the numbers to ``tracking`` when there is one."""
    append_metrics(run_dir, step, phase, metrics)
    if tracking is not None:
        tracking.log({k: v for k, v in metrics.items() if isinstance(v, (int, float))}, step=step)


def previous_evals(run_dir: Path) -> dict[str, dict]:
    """Evaluations a resumed run already did (for the final summary table)."""
    return {line["tag"]: line for line in metric_lines(run_dir) if line.get("phase") == "eval" and "tag" in line}


def rollout_dump(run_dir: Path, step: int) -> Path:
    """Step ``step``'s rollout dump in the run (:func:`recipe.step_files.rollout_dump`)."""
    return step_files.rollout_dump(run_dir / "rollouts", step)


def dump_rollouts(run_dir: Path, trainer: TrainerConfig, step: int, records) -> None:
    """Step ``step``'s rollouts, with ``trainer.dump_rollouts``."""
    if trainer.dump_rollouts:
        write_records(rollout_dump(run_dir, step), records, append=False)


def dump_eval(run_dir: Path, tag: str, records) -> None:
    """The rollouts of evaluation ``tag``. A ``final`` evaluation of an earlier end (a finished
    run extended with more ``trainer.steps``) is kept beside it, as ``final_step_NNNNNN.jsonl``
    (:func:`keep_earlier_final`), not replaced."""
    records = list(records)
    path = run_dir / "eval" / f"{tag}.jsonl"
    if tag == "final" and records:
        keep_earlier_final(path, records[0].step)
    write_records(path, records, append=False)


def keep_earlier_final(path: Path, step: int | None) -> Path | None:
    """Rename the final evaluation ``path`` to ``final_step_NNNNNN.jsonl`` (its records' step)
    when it is of another step than ``step``, and return the new name; a file of the same step
    (the same end evaluated again) is left to be replaced."""
    if not path.is_file():
        return None
    try:
        with path.open("rb") as fh:
            earlier = json.loads(fh.readline()).get("step")
    except (ValueError, AttributeError, OSError):
        earlier = None
    if earlier == step:
        return None
    name = step_files.step_name(earlier) if isinstance(earlier, int) else "step_unknown"
    kept = path.with_name(f"{path.stem}_{name}{path.suffix}")
    os.replace(path, kept)
    print(f"pasr train: the final evaluation of step {earlier} is kept as {kept}", file=sys.stderr)
    return kept


def warn_judge_errors(records, what: str) -> None:
    """Said loudly on stderr, not only counted in metrics.jsonl (recipe.judge_errors)."""
    if warning := judge_error_warning(records, what):
        print(f"pasr train: {warning}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- summary
# the accuracies are over judged answers only (None: nothing judged), so the judge-error count
# stands beside them (recipe.judge_errors)
PASR_COLUMNS = [
    ("eval/format_pass_rate", "format"),
    ("eval/acc", "acc"),
    ("eval/refine_rate", "refine"),
    ("eval/empty_refine_rate", "empty refine"),
    ("eval/refine_fix_rate", "refine fix"),
    ("eval/refine_break_rate", "refine break"),
    ("eval/response_length/mean", "tokens"),
    ("eval/judge_errors", "judge errors"),
]
RRR_COLUMNS = [
    ("eval/first_attempt_acc", "first attempt"),
    ("eval/retry_acc", "retry"),
    ("eval/acc", "acc"),
    ("eval/reflection_length/mean", "reflection tokens"),
    ("eval/tokens", "tokens"),
    ("eval/judge_errors", "judge errors"),
]
COUNT_COLUMNS = ("eval/judge_errors",)


def _cell(key: str, value) -> str:
    if value is None or math.isnan(value):  # None: not measured (no judged answer, or an older run's line)
        return "-"
    return f"{value:.0f}" if key in COUNT_COLUMNS else f"{value:.2f}"


def summarize(evals: dict[str, dict]) -> str:
    """The held-out table of a run (PASR's columns, or RRR's when its evaluations have them)."""
    rrr = any("eval/first_attempt_acc" in m for m in evals.values())
    cols = RRR_COLUMNS if rrr else PASR_COLUMNS
    sampled = sampled_eval.column(evals)  # mean@K at trainer.eval_temperature, beside greedy acc
    if sampled is not None:
        cols = [*cols[:2], sampled, *cols[2:]]
    lines = ["| checkpoint | " + " | ".join(c for _, c in cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for tag, m in evals.items():
        lines.append(f"| {tag} | " + " | ".join(_cell(k, m.get(k)) for k, _ in cols) + " |")
    return "\n".join([*lines, *sampled_eval.summary_lines(evals)])
