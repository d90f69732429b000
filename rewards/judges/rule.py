"""The rule judge: Math-Verify equivalence of the extracted answer and the gold.

Math-Verify bounds its parse and verify time with ``signal.alarm``, which only works in the
main thread of a process. In a Ray worker or any other thread the alarm cannot be set (verl's
math scores once became silently 0 in workers for that reason). So this judge verifies inline
when it runs on a main thread, and otherwise in a small process pool whose workers run each
task on their own main thread, where the alarm fires. Either way a timeout comes back as a
judge error (``ok=False, error='timeout'``), never as a 0.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from rewards.judges.base import JudgeItem, JudgeResult

_CHUNK = 64


def _wrap(expr: str) -> str:
    expr = expr.strip()
    if expr.startswith("$") or "\\boxed" in expr:
        return expr
    return "\\boxed{" + expr + "}"


def parses_as_math(text: str, timeout_s: int = 5) -> bool:
    """True when Math-Verify reads ``text`` as a math expression (used by the hybrid judge)."""
    from math_verify import parse

    try:
        return bool(parse(_wrap(text), parsing_timeout=timeout_s if _on_main_thread() else None))
    except Exception:
        return False


def _on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def verify_one(gold: str, answer: str | None, timeout_s: int) -> tuple[float | None, str | None]:
    """(score, error) for one pair. Must run on a main thread when ``timeout_s`` > 0."""
    from math_verify import parse, verify
    from math_verify.errors import TimeoutException

    if answer is None or not answer.strip():
        return 0.0, None  # no answer given: wrong, not a judge failure
    try:
        gold_parsed = parse(_wrap(gold), parsing_timeout=timeout_s, raise_on_error=True)
        if not gold_parsed:
            return None, "gold_unparsable"
        answer_parsed = parse(_wrap(answer), parsing_timeout=timeout_s, raise_on_error=True)
        if not answer_parsed:
            return 0.0, None
        ok = verify(gold_parsed, answer_parsed, timeout_seconds=timeout_s, raise_on_error=True)
        return (1.0 if ok else 0.0), None
    except TimeoutException:
        return None, "timeout"
    except Exception as exc:  # a sympy crash on odd input: an error, counted, not a silent 0
        return None, f"verify_error: {type(exc).__name__}: {exc}"[:200]


def _verify_chunk(pairs: list[tuple[str, str | None]], timeout_s: int) -> list[tuple[float | None, str | None]]:
    return [verify_one(g, a, timeout_s) for g, a in pairs]


@dataclass
class RuleJudge:
    """Math-Verify judge. ``mode``: ``auto`` (inline on a main thread, else process pool),
    ``inline`` or ``process``."""

    timeout_s: int = 5
    mode: str = "auto"
    workers: int = 2
    name: str = "rule"

    def __post_init__(self) -> None:
        if self.mode not in ("auto", "inline", "process"):
            raise ValueError(f"RuleJudge mode must be auto|inline|process, got {self.mode!r}")
        self._pool: ProcessPoolExecutor | None = None

    def _use_pool(self) -> bool:
        return self.mode == "process" or (self.mode == "auto" and not _on_main_thread())

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            import multiprocessing as mp

            self._pool = ProcessPoolExecutor(self.workers, mp_context=mp.get_context("spawn"))
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None

    def score_pairs(self, pairs: Sequence[tuple[str, str | None]]) -> list[JudgeResult]:
        """Synchronous batch scoring of (gold, answer) pairs."""
        if not pairs:
            return []
        if self._use_pool():
            pool = self._executor()
            chunks = [list(pairs[i : i + _CHUNK]) for i in range(0, len(pairs), _CHUNK)]
            raw = [r for fut in [pool.submit(_verify_chunk, c, self.timeout_s) for c in chunks] for r in fut.result()]
        else:
            raw = _verify_chunk(list(pairs), self.timeout_s)
        return [JudgeResult(s) if err is None else JudgeResult.failed(err) for s, err in raw]

    async def score(self, question: str, gold: str, answer: str | None) -> JudgeResult:
        return (await self.score_many([JudgeItem(question, gold, answer)]))[0]

    async def score_many(self, items: Sequence[JudgeItem]) -> list[JudgeResult]:
        pairs = [(i.gold, i.answer) for i in items]
        if self._use_pool():
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(None, self.score_pairs, pairs)
        # Inline on the main thread: CPU-bound and fast (~ms per pair); the alarm works here.
        return self.score_pairs(pairs)
