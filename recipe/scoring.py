"""The PASR step core: what both engines and ``pasr eval`` do between generating and updating.

* token ids to text, one setting for every engine: :func:`runtime.decoding.decode_response`;
* :func:`judge_and_record`: extract the answer, judge it, check the format and build the one
  :class:`~data.records.RolloutRecord` per rollout (``pasr eval`` stops here);
* :func:`group_scores`: the PASR reward per query group, written into the refine records, and
  the training score and mask of every record, under the one judge-error policy below.

The record that goes to the dump *is* the reward, so what ``pasr stats`` reads is exactly what
the update saw. The engines differ only in how they produced the texts and how they apply the
scores (:mod:`recipe.local_engine.policy_update`, :mod:`recipe.verl_engine.batch_convert`).

**Judge errors.** A rollout whose judge failed (a timeout, an unparseable reply, a judge that
raised) has no accuracy (``acc=None``, the error in ``judge_error``) and no total reward; it is
never scored 0, because a timeout is not a wrong answer. A rollout with no answer to judge is
a wrong answer (0.0), never a judge error, even when the judge breaks (:func:`judge_answers`). It is masked out of the
update (mask False: no loss) and left out of its group's GRPO statistics: the group's mean and std are over
its judged rows only (:mod:`recipe.advantages`). Such rows are counted in ``pasr/judge_errors``.
A plain rollout whose judge failed is left out of its query's baseline
(:func:`rewards.refine.plain_baseline`). When a step's failures stop the run, and how an
evaluation reports them: :mod:`recipe.judge_errors`.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from data.records import PLAIN, REFINE, RolloutRecord
from recipe.pasr_config import PasrConfig
from rewards.extract import extract_answer
from rewards.format import check_format
from rewards.judges.base import Judge, JudgeItem, JudgeResult
from rewards.pasr import score_group

JUDGE_ERROR = "judge error"  # the error text when a judge failed without saying why


@dataclass
class Rollout:
    """A generated response with what the judge and the record need; engine-neutral."""

    query_id: str
    data_source: str
    question: str
    gold: str
    variant: str  # refine | plain (training); eval also self_refine:<pass>
    text: str
    n_tokens: int
    finish_reason: str | None = None
    sample_index: int = 0
    dataset: str | None = None  # evaluation data set; None for training rollouts
    extra: dict[str, Any] = field(default_factory=dict)  # copied into the record's extra


# --------------------------------------------------------------------------- judge and record
def _one_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")[:500]


def has_answer(item: JudgeItem) -> bool:
    """Whether there is anything to judge: a response with no (or a blank) extracted answer is
    wrong, 0.0, whatever the judge; every judge scores it so without work (rewards/judges)."""
    return item.answer is not None and bool(item.answer.strip())


async def judge_answers(judge: Judge, items: Sequence[JudgeItem]) -> list[JudgeResult]:
    """Score a batch with ``judge``. A judge that raises, or answers for the wrong number of
    items, makes every item with an answer a judge error (never a crash in the middle of a
    step, never a 0); the items without one are still wrong answers, 0.0, not judge errors.
    The error text is redacted (:meth:`JudgeResult.failed`): it goes into records on disk."""
    if not items:
        return []
    try:
        results = list(await judge.score_many(items))
        if len(results) != len(items):
            raise RuntimeError(f"judge returned {len(results)} results for {len(items)} items")
    except Exception as exc:
        failed = JudgeResult.failed(f"judge failed: {_one_line(exc)}")
        return [failed if has_answer(item) else JudgeResult(0.0) for item in items]
    return results


def acc_and_error(result: JudgeResult) -> tuple[float | None, str | None]:
    """A judge result as a record holds it: ``(acc, judge_error)``, ``acc`` None on a failure."""
    if result.ok:
        return result.score, None
    return None, result.error or JUDGE_ERROR


def _prompt_version(versions: Mapping[str, str] | str | None, variant: str) -> str | None:
    if versions is None or isinstance(versions, str):
        return versions
    return versions.get(variant)


async def judge_and_record_async(
    rollouts: Sequence[Rollout],
    judge: Judge,
    *,
    run_id: str,
    step: int | None,
    engine: str,
    prompt_versions: Mapping[str, str] | str | None = None,
    fallback_last_number: bool = False,
) -> list[RolloutRecord]:
    """Extract, judge (all rollouts in one concurrent batch), check the format: one record per
    rollout, in input order, without rewards (see :func:`group_scores`).

    ``prompt_versions``: the system prompt's version per variant, or one version for all.
    ``fallback_last_number``: judge a response's last number when it has no ``<answer>`` or
    ``\\boxed{}`` (an evaluation option)."""
    answers = [extract_answer(r.text, fallback_last_number=fallback_last_number) for r in rollouts]
    results = await judge_answers(judge, [JudgeItem(r.question, r.gold, a) for r, a in zip(rollouts, answers)])
    records = []
    for r, answer, res in zip(rollouts, answers, results):
        fmt = check_format(r.text)
        acc, judge_error = acc_and_error(res)
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
                extracted_answer=answer,
                gold=r.gold,
                acc=acc,
                judge_error=judge_error,
                step=step,
                dataset=r.dataset,
                sample_index=r.sample_index,
                engine=engine,
                prompt_version=_prompt_version(prompt_versions, r.variant),
                finish_reason=r.finish_reason,
                extra={"format_reward": fmt.reward, **r.extra},
            )
        )
    return records


def judge_and_record(rollouts: Sequence[Rollout], judge: Judge, **kwargs) -> list[RolloutRecord]:
    """Synchronous :func:`judge_and_record_async` (local engine, ``pasr eval``, tests)."""
    return asyncio.run(judge_and_record_async(rollouts, judge, **kwargs))


# --------------------------------------------------------------------------- rewards and mask
def group_scores(records: Sequence[RolloutRecord], cfg: PasrConfig) -> tuple[list[float], list[bool]]:
    """The PASR reward of every refine record, per query group, and what the update uses.

    Writes ``refine_reward``, ``refine_outcome``, ``total_reward`` and ``extra["baseline"]`` into
    the refine records (in place). Returns ``(scores, mask)``, one entry per record in order:
    ``mask`` is True for the rows trained on (refine rows whose judge answered) and ``scores``
    holds their total reward. Plain rows (the baseline only) and judge errors have mask False; a
    judge error's score is the mean score of its group's judged rows (0 when none was judged), a
    placeholder no update uses (masked rows are outside the group statistics and get advantage
    0) that keeps summaries over every row, such as verl's ``critic/score/*``, from reading it
    as a 0. A plain row's score is 0."""
    by_query: dict[str, dict[str, list[int]]] = defaultdict(lambda: {REFINE: [], PLAIN: []})
    for i, r in enumerate(records):
        if r.variant not in (REFINE, PLAIN):
            raise ValueError(f"rollout variant must be {REFINE!r} or {PLAIN!r}, got {r.variant!r}")
        by_query[r.query_id][r.variant].append(i)

    scores, mask = [0.0] * len(records), [False] * len(records)
    for groups in by_query.values():
        ref_idx, plain_idx = groups[REFINE], groups[PLAIN]
        rewards = score_group(
            [records[i].response for i in ref_idx],
            [records[i].acc for i in ref_idx],
            [records[i].acc for i in plain_idx],
            weights=cfg.weights,
            tie_value=cfg.tie_value,
            zeta=cfg.zeta,
            empty_refine_value=cfg.empty_refine_value,
            refine_compare=cfg.refine_compare,
        )
        for i, pr in zip(ref_idx, rewards):
            rec = records[i]
            rec.refine_reward, rec.refine_outcome = pr.refine, pr.refine_outcome
            rec.extra["baseline"] = pr.baseline
        _train_group(records, ref_idx, [pr.total for pr in rewards], scores, mask)
    return scores, mask


def _train_group(
    records: Sequence[RolloutRecord], idx: Sequence[int], totals: Sequence[float | None], scores: list, mask: list
) -> None:
    """Write one GRPO group's total rewards into its records, ``scores`` and ``mask``, under
    the judge-error policy above: a row without a total is masked, with its group's judged
    mean as placeholder score."""
    judged = [t for t in totals if t is not None]
    placeholder = sum(judged) / len(judged) if judged else 0.0
    for i, total in zip(idx, totals):
        records[i].total_reward = total
        mask[i] = total is not None
        scores[i] = total if total is not None else placeholder


def score_rollouts(rollouts: Sequence[Rollout], judge: Judge, cfg: PasrConfig, **kwargs) -> list[RolloutRecord]:
    """:func:`judge_and_record` then :func:`group_scores`, for callers that keep only the
    records (the local engine's in-training evaluation)."""
    records = judge_and_record(rollouts, judge, **kwargs)
    group_scores(records, cfg)
    return records
