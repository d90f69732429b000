"""Numeric series from a run's ``metrics.jsonl`` (one JSON object per training step).

Not rollout records: only numbers are kept (the engines log strings and nested values too), and
a line without an integer step is a corrupt line, reported like a corrupt record.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from data.records import ErrorSink, RecordFormatError, iter_lines, line_too_long


def read_metrics(path: Path, strict: bool, errors: ErrorSink) -> dict[str, Any]:
    """Numeric series per key from a ``metrics.jsonl`` (one JSON object per step)."""
    rows: dict[int, dict[str, float]] = {}
    with path.open("rb") as fh:
        for line_no, raw, _ in iter_lines(fh):
            if raw is not None and not raw.strip():
                continue
            try:
                if raw is None:
                    raise ValueError(line_too_long())
                obj = json.loads(raw)
                if not isinstance(obj, dict):
                    raise ValueError("not a JSON object")
                step = obj.get("step", obj.get("training/global_step"))
                if isinstance(step, float) and step.is_integer():
                    step = int(step)
                if isinstance(step, bool) or not isinstance(step, int):
                    raise ValueError("no integer 'step'")
            except (ValueError, TypeError) as exc:
                err = RecordFormatError(path, line_no, f"corrupt metrics line ({exc})")
                if strict:
                    raise err from exc
                errors.append(err)
                continue
            row = rows.setdefault(step, {})
            for k, v in obj.items():
                if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                    row[k] = float(v)
    steps = sorted(rows)
    keys = sorted({k for r in rows.values() for k in r})
    return {"file": str(path), "steps": steps, "series": {k: [rows[s].get(k) for s in steps] for k in keys}}
