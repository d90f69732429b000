"""The LLM judge's counters and score cache (:class:`rewards.judges.openai_judge.OpenAIJudge` owns
one of each): counters that callers diff for per-step metrics, and successful scores by key in
memory, optionally appended to a JSONL file shared across runs and processes."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass
class JudgeStats:
    """Cumulative counters of one judge (callers diff two snapshots for per-step metrics)."""

    requests: int = 0  # HTTP attempts sent, retries included
    retries: int = 0  # attempts after the first for an item
    errors: int = 0  # items that ended as JudgeResult.failed
    cache_hits: int = 0  # items answered from the memory/disk cache
    coalesced: int = 0  # items that joined an identical request already in flight
    no_answer: int = 0  # items with no answer, scored 0.0 without a request

    def snapshot(self) -> dict[str, int]:
        return asdict(self)


class ScoreCache:
    """Scores by key in memory; optionally appended to a JSONL file and reloaded at start.

    One line per score: ``{"key": ..., "score": ..., "prompt_version": ..., "model": ...}``.
    Lines are appended whole with one write each (several processes may share a file on a
    local disk); a torn or foreign line is skipped on load, and a later line wins over an
    earlier one for the same key.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path).expanduser() if path else None
        self._scores: dict[str, float] = {}
        self._lock = threading.Lock()
        self.loaded = 0
        if self.path is not None and self.path.is_file():
            with self.path.open(encoding="utf-8") as fh:
                for line in fh:
                    try:
                        row = json.loads(line)
                        score = float(row["score"])
                        key = str(row["key"])
                    except (ValueError, KeyError, TypeError):
                        continue
                    if 0.0 <= score <= 1.0:
                        self._scores[key] = score
            self.loaded = len(self._scores)

    def __len__(self) -> int:
        return len(self._scores)

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def get(self, key: str) -> float | None:
        return self._scores.get(key)

    def put(self, key: str, score: float, **meta: str) -> None:
        with self._lock:
            self._scores[key] = score
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                line = json.dumps({"key": key, "score": score, **meta}, ensure_ascii=False) + "\n"
                with self.path.open("a", encoding="utf-8") as fh:
                    fh.write(line)


def cache_key(model: str, version: str, question: str, gold: str, answer: str) -> str:
    payload = json.dumps([model, version, question, gold, answer], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()
