"""How a ``pasr eval`` run drives reflect-retry (:mod:`eval.reflect_retry`), the one method
that needs the judge *between* passes: the verifier it is handed (:func:`_verifier`, the run's
judge with the final record's answer extraction), the verdicts it already has kept rather than
asked again (:class:`_Reusing`), and, on a rerun, the samples whose first attempt the judge
failed on, finished from their kept attempt instead of re-judged (:func:`_split_undecided`).

Moved out of :mod:`eval.run`.
"""

from __future__ import annotations

import dataclasses

from data.records import RolloutRecord
from eval.config import EvalConfig
from eval.items import _Item
from eval.judging import _judge
from eval.reflect_retry import Verifier, kept_attempt, undecided
from eval.resume import Key


def _verifier(cfg: EvalConfig, judge, items: list[_Item]) -> Verifier:
    """Reflect-retry's verifier for a chunk's ``items`` (indices into them), with the run's judge."""

    def verify(indices, texts):
        """Reflect-retry's verdicts between passes: extracted and judged as the final record is."""
        from rewards.extract import extract_answer

        answers = [extract_answer(t, fallback_last_number=cfg.fallback_last_number) for t in texts]
        return _judge(judge, [(items[i], a) for i, a in zip(indices, answers)])

    return verify


def _split_undecided(rejudge: list[_Item], done: dict[Key, RolloutRecord]) -> tuple[list[_Item], list[_Item]]:
    """Of the samples whose judge failed, the reflect-retry ones whose first attempt was never
    scored are finished, not re-judged: (those, each with its kept attempt; the rest, to re-judge)."""
    unfinished = [
        dataclasses.replace(it, attempt=kept_attempt(done[it.key])) for it in rejudge if undecided(done[it.key])
    ]
    return unfinished, [it for it in rejudge if not undecided(done[it.key])]


class _Reusing:
    """The run's judge, except for responses whose verdict the method already has
    (:attr:`Produced.verdict`, one per rollout in order, None: ask the judge): those keep it."""

    name = "reusing"

    def __init__(self, judge, verdicts: list):
        self.judge, self.verdicts = judge, verdicts

    async def score_many(self, items):
        from recipe.scoring import judge_answers
        from rewards.judges.base import JudgeResult

        fresh = iter(await judge_answers(self.judge, [it for it, v in zip(items, self.verdicts) if v is None]))
        return [
            next(fresh) if v is None else JudgeResult(v[0]) if v[0] is not None else JudgeResult.failed(v[1])
            for v in self.verdicts
        ]
