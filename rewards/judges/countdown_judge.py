"""The Countdown judge: the exact verifier behind the judge interface.

Reflect, Retry, Reward needs only a binary verifier; wrapping it as a :class:`Judge` lets both
engines, ``pasr eval`` and the records score Countdown rows the way they score math (one
``score_many`` call, a :class:`JudgeResult` per answer), so nothing downstream special-cases it.

The gold is :func:`rewards.countdown.format_gold`'s ``"3, 7, 12 -> 25"``. A gold that is not in
that form is a judge error naming the gold (the row came from somewhere else, e.g. GSM8K with
``judge.kind=countdown``), never a 0. No answer, or an equation that is wrong or uses a number
too often, scores 0.0.
"""

from __future__ import annotations

from collections.abc import Sequence

from rewards.countdown import countdown_reward, parse_gold
from rewards.judges.base import JudgeItem, JudgeResult


class CountdownJudge:
    name = "countdown"

    async def score(self, question: str, gold: str, answer: str | None) -> JudgeResult:
        return self.score_one(gold, answer)

    async def score_many(self, items: Sequence[JudgeItem]) -> list[JudgeResult]:
        return [self.score_one(i.gold, i.answer) for i in items]  # microseconds each: no concurrency needed

    @staticmethod
    def score_one(gold: str, answer: str | None) -> JudgeResult:
        parsed = parse_gold(gold)
        if parsed is None:
            return JudgeResult.failed(f"not a Countdown gold (want '3, 7, 12 -> 25'): {gold[:60]!r}")
        if answer is None or not answer.strip():
            return JudgeResult(0.0)
        numbers, target = parsed
        return JudgeResult(countdown_reward(answer, numbers, target))
