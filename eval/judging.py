"""The judge of a ``pasr eval`` run: which judge can score the data (:func:`resolve_judge`,
``--judge auto`` resolved per dataset, a judge that cannot score a dataset refused), building
it (:func:`_build_judge`), and asking it about samples under the step core's judge-error rule
(:func:`_judge`).

Moved out of :mod:`eval.run`, which still re-exports the public names.
"""

from __future__ import annotations

import asyncio
import dataclasses

from eval.config import EvalConfig, EvalError
from eval.items import _Item
from recipe.pasr_config import JudgeConfig


def is_countdown(examples: list) -> bool:
    """Rows whose golds are all Countdown golds (``"3, 7, 12 -> 25"``), whatever file they came from."""
    from rewards.countdown import parse_gold

    return all(parse_gold(ex.answer) is not None for ex in examples)


def resolve_judge(judge: JudgeConfig, data: dict[str, list]) -> JudgeConfig:
    """The judge that can score ``data``: ``auto`` becomes ``countdown`` for Countdown datasets
    and ``rule`` otherwise; a judge that cannot score a dataset is an :class:`EvalError` naming
    the option to set. Only the Countdown verifier scores Countdown rows (the rule judge would
    read ``"3, 7, 12 -> 25"`` as math) and it scores nothing else, so the two never share a run."""
    countdown = [ds for ds, exs in data.items() if is_countdown(exs)]
    other = [ds for ds in data if ds not in countdown]
    if countdown and other:
        raise EvalError(
            f"Countdown datasets ({', '.join(countdown)}) need --judge countdown and the others "
            f"({', '.join(other)}) another judge: evaluate them in separate runs (separate --out)"
        )
    if judge.kind == "auto":
        return dataclasses.replace(judge, kind="countdown" if countdown else "rule")
    if countdown and judge.kind != "countdown":
        raise EvalError(
            f"dataset {countdown[0]!r} is Countdown: it needs --judge countdown (or --judge auto, the default)"
        )
    if other and judge.kind == "countdown":
        raise EvalError(
            f"--judge countdown scores only Countdown equations; dataset {other[0]!r} needs --judge rule (or auto)"
        )
    return judge


def _build_judge(cfg: EvalConfig):
    from rewards.judges import build_judge

    try:
        return build_judge(cfg.judge, cfg.judge_prompt)
    except (ValueError, KeyError, FileNotFoundError) as exc:
        raise EvalError(f"judge: {exc}") from None


def _judge(judge, pairs: list[tuple[_Item, str | None]]) -> list[tuple[float | None, str | None]]:
    """(acc, judge error) per (item, extracted answer), under the step core's judge-error rule: a
    judge that breaks makes every pair a judge error, never a crash or a 0."""
    from recipe.scoring import acc_and_error, judge_answers
    from rewards.judges.base import JudgeItem

    items = [JudgeItem(it.example.question, it.example.answer, answer) for it, answer in pairs]
    return [acc_and_error(r) for r in asyncio.run(judge_answers(judge, items))]
