"""Which files ``pasr stats`` reads: record dumps, ``metrics.jsonl`` logs and eval summaries.

Dumps are told apart by content, not by name, because the engines and ``pasr eval`` name them
differently (``rollouts/step_*.jsonl``, ``eval/<tag>.jsonl``, ``val_step_*.jsonl``,
``samples.jsonl``) and other JSONL files (a judge cache) sit beside them. A run's layout also
says which run a ``metrics.jsonl`` belongs to, so its series can be labelled with the run id.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from data.records import iter_lines
from eval.stats import StatsInputError

METRICS_NAME = "metrics.jsonl"
SUMMARY_NAME = "summary.json"
ROLLOUTS_DIR = "rollouts"  # training dumps of both engines: <run>/rollouts/step_*.jsonl
EVAL_DIR = "eval"  # the local engine's in-training evaluations: <run>/eval/<tag>.jsonl
RUN_CONFIG = "config.yaml"  # the local engine's resolved config, in <run>


@dataclass
class Inputs:
    records: list[Path] = field(default_factory=list)
    metrics: list[Path] = field(default_factory=list)
    summaries: list[Path] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, why)
    run_ids: dict[Path, set[str]] = field(default_factory=dict)  # run directory -> run ids of its records (once read)

    @property
    def record_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.records)


def _first_object(path: Path) -> tuple[str, Any]:
    """('ok', obj) for the first non-blank line, ('bad', None) when it does not parse or is too
    long to be a record (not read whole), ('empty', None) for a file without content."""
    with path.open("rb") as fh:
        for _, raw, _ in iter_lines(fh):
            if raw is None:
                return "bad", None
            if raw.strip():
                try:
                    return "ok", json.loads(raw)
                except ValueError:
                    return "bad", None
    return "empty", None


def _classify(path: Path, explicit: bool) -> str:
    """records | metrics | skip:<why>"""
    if path.name == METRICS_NAME:
        return "metrics"
    state, obj = _first_object(path)
    if state == "ok" and isinstance(obj, dict):
        if "response" in obj and "variant" in obj:
            return "records"
        if "step" in obj and "response" not in obj:
            return "metrics"
    if explicit or state == "bad":
        return "records"  # named on the command line, or corrupt from line 1: read and report
    if state == "empty":
        return "records"  # an empty dump is still a dump (0 records)
    return "skip:not a rollout dump (first object has no 'response'/'variant')"


def discover(paths: Iterable[str | Path]) -> Inputs:
    """Record files, metrics files and eval summaries under ``paths`` (files or directories)."""
    found = Inputs()
    seen: set[Path] = set()

    def add(p: Path, explicit: bool) -> None:
        rp = p.resolve()
        if rp in seen:
            return
        seen.add(rp)
        kind = _classify(p, explicit)
        if kind == "records":
            found.records.append(p)
        elif kind == "metrics":
            found.metrics.append(p)
        else:
            found.skipped.append((str(p), kind.split(":", 1)[1]))

    for raw in paths:
        p = Path(raw)
        if p.is_file():
            add(p, explicit=True)
        elif p.is_dir():
            for f in sorted(p.rglob("*.jsonl")):
                if f.is_file():
                    add(f, explicit=False)
            found.summaries.extend(sorted(s for s in p.rglob(SUMMARY_NAME) if s.is_file()))
        else:
            raise StatsInputError(f"no such file or directory: {p}")
    return found


def _training_run(folder: Path) -> bool:
    return (folder / RUN_CONFIG).is_file() or (folder / METRICS_NAME).is_file() or (folder / ROLLOUTS_DIR).is_dir()


def run_dir(record_file: Path) -> Path:
    """The directory of the run a record file belongs to (resolved): the parent of a
    ``rollouts/`` folder for training dumps, of an ``eval/`` folder in a training run (the local
    engine's in-training evaluations; not a ``pasr eval`` run's own folder, with its summary),
    else the file's own folder."""
    parent = record_file.parent
    if parent.name == ROLLOUTS_DIR or (
        parent.name == EVAL_DIR and not (parent / SUMMARY_NAME).is_file() and _training_run(parent.parent)
    ):
        return parent.parent.resolve()
    return parent.resolve()


def metrics_labels(metrics_files: list[Path], run_ids_by_dir: dict[Path, set[str]]) -> list[str]:
    """One distinct label per ``metrics.jsonl``: the run id of the records in its directory when
    there is exactly one, else the directory; a repeated label gets a ``'``."""
    labels: list[str] = []
    for path in metrics_files:
        owners = run_ids_by_dir.get(path.parent.resolve(), set())
        label = next(iter(owners)) if len(owners) == 1 else str(path.parent)
        while label in labels:
            label += "'"
        labels.append(label)
    return labels
