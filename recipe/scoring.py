"""Score one step's rollouts: judge every answer, then the PASR reward per query group.

Both engines call this after generation and before the update; they differ only in how they
produced the texts. The output is one :class:`~data.records.RolloutRecord` per rollout, in input
order: the record that goes to the dump *is* the reward, so what ``pasr stats`` reads is
exactly what the update saw.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from data.records import PLAIN, REFINE, RolloutRecord
from recipe.pasr_config import PasrConfig
from rewards.extract import extract_answer
from rewards.format import check_format
from rewards.judges.base import Judge, JudgeItem
from rewards.pasr import score_group


@dataclass
class Rollout:
    """A generated response with what the judge needs; engine-neutral."""

    query_id: str
    data_source: str
    question: str
    gold: str
    variant: str  # refine | plain
    text: str
    n_tokens: int
    finish_reason: str | None = None
    sample_index: int = 0


async def score_rollouts_async(
    rollouts: Sequence[Rollout],
    judge: Judge,
    cfg: PasrConfig,
    *,
    run_id: str,
    step: int | None,
    engine: str,
    prompt_versions: dict[str, str] | None = None,
) -> list[RolloutRecord]:
    """Judge all rollouts in one concurrent batch, then compute PASR rewards per query."""
    answers = [extract_answer(r.text) for r in rollouts]
    formats = [check_format(r.text) for r in rollouts]
    results = await judge.score_many([JudgeItem(r.question, r.gold, a) for r, a in zip(rollouts, answers)])
    accs = [res.score if res.ok else None for res in results]

    by_query: dict[str, dict[str, list[int]]] = defaultdict(lambda: {REFINE: [], PLAIN: []})
    for i, r in enumerate(rollouts):
        if r.variant not in (REFINE, PLAIN):
            raise ValueError(f"rollout variant must be {REFINE!r} or {PLAIN!r}, got {r.variant!r}")
        by_query[r.query_id][r.variant].append(i)

    rewards = {}
    for groups in by_query.values():
        ref_idx, plain_idx = groups[REFINE], groups[PLAIN]
        scored = score_group(
            [rollouts[i].text for i in ref_idx],
            [accs[i] for i in ref_idx],
            [accs[i] for i in plain_idx],
            weights=cfg.weights.to_weights(),
            tie_value=cfg.tie_value,
            zeta=cfg.zeta,
            formats=[formats[i] for i in ref_idx],
        )
        rewards.update(zip(ref_idx, scored))

    versions = prompt_versions or {}
    records = []
    for i, r in enumerate(rollouts):
        fmt, pr = formats[i], rewards.get(i)
        records.append(
            RolloutRecord(
                run_id=run_id,
                query_id=r.query_id,
                data_source=r.data_source,
                variant=r.variant,
                prompt=r.question,
                response=r.text,
                response_tokens=r.n_tokens,
                format_ok=fmt.ok,
                format_reason=fmt.reason,
                n_refine=fmt.n_refine,
                extracted_answer=answers[i],
                gold=r.gold,
                acc=accs[i],
                judge_error=results[i].error if not results[i].ok else None,
                refine_reward=pr.refine if pr else None,
                refine_outcome=pr.refine_outcome if pr else None,
                total_reward=pr.total if pr else None,
                step=step,
                sample_index=r.sample_index,
                engine=engine,
                prompt_version=versions.get(r.variant),
                finish_reason=r.finish_reason,
                extra={"format_reward": fmt.reward, "baseline": pr.baseline} if pr else {"format_reward": fmt.reward},
            )
        )
    return records


def score_rollouts(rollouts: Sequence[Rollout], judge: Judge, cfg: PasrConfig, **kwargs) -> list[RolloutRecord]:
    """Synchronous wrapper of :func:`score_rollouts_async` (local engine, tests)."""
    return asyncio.run(score_rollouts_async(rollouts, judge, cfg, **kwargs))
