"""The one rollout record format: written by both engines and ``pasr eval``, read by ``pasr stats``.

One JSON object per line. Add fields freely (readers ignore unknown ones and default missing
ones); never rename a field without migrating the readers.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

RECORD_VERSION = 1

# variants
REFINE = "refine"
PLAIN = "plain"
# Self-Refine passes are "self_refine:answer", "self_refine:feedback:1", "self_refine:refine:1", ...


@dataclass
class RolloutRecord:
    run_id: str
    query_id: str
    data_source: str
    variant: str  # refine | plain | self_refine:<pass>
    prompt: str  # the user question (system prompt is recorded by version in `prompt_version`)
    response: str
    response_tokens: int
    format_ok: bool
    format_reason: str
    n_refine: int
    extracted_answer: str | None
    gold: str
    acc: float | None  # None = judge error
    judge_error: str | None = None
    refine_reward: float | None = None  # None for plain rollouts and eval records
    refine_outcome: str | None = None  # better | worse | tie | none | no_baseline | judge_error
    total_reward: float | None = None
    step: int | None = None  # training step; None for eval
    dataset: str | None = None  # eval dataset name; None for training
    sample_index: int = 0  # index within the query's group (or eval sample k)
    engine: str = "local"  # local | verl | eval
    prompt_version: str | None = None
    finish_reason: str | None = None  # stop | length
    extra: dict[str, Any] = field(default_factory=dict)
    version: int = RECORD_VERSION

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> "RolloutRecord":
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in obj.items() if k in known}
        extra = dict(kwargs.get("extra") or {})
        extra.update({k: v for k, v in obj.items() if k not in known})
        kwargs["extra"] = extra
        return cls(**kwargs)


class RecordFormatError(ValueError):
    """A corrupt line in a rollout dump, with its file and line number."""

    def __init__(self, path: str | Path, line_no: int, reason: str):
        super().__init__(f"{path}:{line_no}: {reason}")
        self.path, self.line_no, self.reason = str(path), line_no, reason


def write_records(path: str | Path, records: Iterable[RolloutRecord], append: bool = True) -> int:
    """Append records as JSONL; returns how many were written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with path.open("a" if append else "w", encoding="utf-8") as fh:
        for rec in records:
            fh.write(rec.to_json() + "\n")
            n += 1
    return n


def iter_records(path: str | Path, strict: bool = False, errors: list[RecordFormatError] | None = None) -> Iterator[RolloutRecord]:
    """Stream records from a JSONL dump. Corrupt lines raise (``strict``) or are collected in
    ``errors`` and skipped, each naming its file and line."""
    with Path(path).open("rb") as fh:
        for line_no, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw.decode("utf-8"))
                if not isinstance(obj, dict):
                    raise ValueError("not a JSON object")
                rec = RolloutRecord.from_dict(obj)
            except (ValueError, TypeError) as exc:  # UnicodeDecodeError and JSONDecodeError included
                err = RecordFormatError(path, line_no, f"corrupt rollout record ({exc})")
                if strict:
                    raise err from exc
                if errors is not None:
                    errors.append(err)
                continue
            yield rec
