"""The hybrid judge: Math-Verify where the gold is math, the LLM judge elsewhere.

A batch is split by gold, both groups are scored concurrently, and the results come back in
input order. Routing looks only at the gold (never at the answer), so every rollout of one
query is scored by the same judge and the refine-vs-plain comparison stays like for like.

Routing note: ``rule.parses_as_math`` alone accepts nearly any text (Math-Verify reads
``Paris`` as the product of five symbols), so :func:`gold_is_math` first sends golds made of
plain words and no digit (``\\text{Evelyn}``, ``east``, ``blue whale``) to the LLM judge, and
asks ``parses_as_math`` only about the rest.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence
from functools import lru_cache

from rewards.judges.base import Judge, JudgeItem, JudgeResult
from rewards.judges.rule import RuleJudge, parses_as_math

_LATEX_ENV = re.compile(r"\\(?:begin|end)\s*\{[^}]*\}")
_LATEX_CMD = re.compile(r"\\[A-Za-z]+")
_WORD = re.compile(r"[A-Za-z]{2,}")
_MATH_WORDS = frozenset(
    "sin cos tan cot sec csc arcsin arccos arctan sinh cosh tanh log ln lg exp sqrt pi infty inf oo "
    "mod gcd lcm max min det dx dy dz dt".split()
)


def is_plain_words(gold: str) -> bool:
    """True for a gold written in words: no digit, and a word of two or more letters that is
    not a LaTeX command or a math function name (``\\text{east}`` yes; ``\\sqrt{x}``, ``x^2``,
    ``\\text{(C)}``, ``10\\text{ inches}`` no)."""
    if any(ch.isdigit() for ch in gold):
        return False
    stripped = _LATEX_CMD.sub(" ", _LATEX_ENV.sub(" ", gold))
    return any(w.lower() not in _MATH_WORDS for w in _WORD.findall(stripped))


@lru_cache(maxsize=8192)
def gold_is_math(gold: str) -> bool:
    """Route to the rule judge? (Cached: a batch repeats each gold once per rollout.)"""
    return not is_plain_words(gold) and parses_as_math(gold)


class HybridJudge:
    """``rule`` for math golds, ``llm`` for the rest; ``route(gold) -> True`` means rule."""

    name = "hybrid"

    def __init__(self, rule: Judge, llm: Judge, route: Callable[[str], bool] = gold_is_math) -> None:
        self.rule = rule
        self.llm = llm
        self.route = route
        self.routed = {"rule": 0, "llm": 0}  # items sent to each judge (metrics)

    async def score(self, question: str, gold: str, answer: str | None) -> JudgeResult:
        return (await self.score_many([JudgeItem(question, gold, answer)]))[0]

    async def score_many(self, items: Sequence[JudgeItem]) -> list[JudgeResult]:
        to_rule: list[int] = []
        to_llm: list[int] = []
        for idx, item in enumerate(items):
            (to_rule if self.route(item.gold) else to_llm).append(idx)
        self.routed["rule"] += len(to_rule)
        self.routed["llm"] += len(to_llm)

        async def run(judge: Judge, idxs: list[int]) -> list[JudgeResult]:
            return await judge.score_many([items[i] for i in idxs]) if idxs else []

        # The LLM group starts first, so its requests are under way before the rule judge
        # (inline and blocking on a main thread, ~ms per item) takes the loop.
        llm_results, rule_results = await asyncio.gather(run(self.llm, to_llm), run(self.rule, to_rule))
        out: list[JudgeResult | None] = [None] * len(items)
        for idxs, results in ((to_llm, llm_results), (to_rule, rule_results)):
            for i, r in zip(idxs, results, strict=True):
                out[i] = r
        return out  # type: ignore[return-value]

    def close(self) -> None:
        if isinstance(self.rule, RuleJudge):
            self.rule.close()
