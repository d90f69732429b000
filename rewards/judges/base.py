"""One judge interface for every way of scoring an answer against its gold.

``await judge.score(question, gold, answer)`` returns a :class:`JudgeResult`; ``score_many``
scores a batch concurrently. A judge never turns a failure into a 0: it returns
``ok=False`` with the error, and callers count it (``pasr/judge_errors``) and leave that
rollout out of the update.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from rewards.judges.redact import redact_secrets


@dataclass(frozen=True)
class JudgeResult:
    score: float | None  # in [0, 1]; None when not ok
    ok: bool = True
    error: str | None = None

    @classmethod
    def failed(cls, error: str, secrets: Iterable[str | None] = ()) -> JudgeResult:
        """A failure; ``error`` is kept in records and logs, so credentials (``secrets``, and
        anything shaped like one) are redacted from it here (:mod:`rewards.judges.redact`)."""
        return cls(score=None, ok=False, error=redact_secrets(error, secrets))


@dataclass(frozen=True)
class JudgeItem:
    question: str
    gold: str
    answer: str | None  # the extracted answer; None when the response gave none


@runtime_checkable
class Judge(Protocol):
    name: str

    async def score(self, question: str, gold: str, answer: str | None) -> JudgeResult: ...

    async def score_many(self, items: Sequence[JudgeItem]) -> list[JudgeResult]: ...


class ConcurrentJudge:
    """Mixin: ``score_many`` as ``asyncio.gather`` over ``score`` (judges bound their own
    concurrency, e.g. with a semaphore)."""

    async def score_many(self, items: Sequence[JudgeItem]) -> list[JudgeResult]:
        return list(await asyncio.gather(*(self.score(i.question, i.gold, i.answer) for i in items)))


def score_sync(judge: Judge, items: Sequence[JudgeItem]) -> list[JudgeResult]:
    """Score a batch from synchronous code (the local engine, tests, scripts)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(judge.score_many(items))
    raise RuntimeError("score_sync called inside a running event loop; await judge.score_many instead")
