"""Per-step ``pasr/*`` metrics from rollout records, shared by both engines.

verl logs its own ``actor/*``, ``critic/*`` and ``timing_s/*`` keys but not reward extra
info, so PASR's view of a step (is the model refining, does it help) is computed here from the
same records that are dumped, and merged into the engine's metrics dict. Both engines log the
same ``pasr/*`` set: :func:`training_step_metrics` (records, scores and mask of the step core,
:func:`recipe.scoring.group_scores`) and :func:`reward_time_share` (the table in
docs/design.md, "Metrics"; ``tests/test_verl_metric_parity.py`` compares the two engines' keys).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean
from typing import NamedTuple

from data.records import PLAIN, REFINE, RolloutRecord
from rewards.refine import OUTCOMES
from rewards.refine_quality import RefineQuality, assess_refines, is_correct


def _mean(values) -> float:
    values = list(values)
    return float(fmean(values)) if values else 0.0


class RefineRates(NamedTuple):
    """Refine quality over a set of responses, each None where nothing was there to count:
    "no refine was empty" and "there was no refine" are different findings."""

    empty: float | None  # empty-refine rate, per refine span
    fix: float | None  # refine-fix rate, per refining response with a known fix
    draft: float | None  # draft accuracy: refining responses whose draft (last value before the refine) is right
    # refine-break rate (right draft, wrong final answer), per refining response with a known break
    breaks: float | None = None


@dataclass
class RefineTally:
    """The counts behind :class:`RefineRates`, summed over refining responses one
    :class:`~rewards.refine_quality.RefineQuality` at a time: the per-step metrics and
    ``pasr stats``' groups both count with it, so "known" means the same in both."""

    spans: int = 0
    empty: int = 0
    fixes: int = 0
    fix_known: int = 0
    breaks: int = 0
    break_known: int = 0
    drafts_ok: int = 0
    draft_known: int = 0

    def add(self, q: RefineQuality) -> None:
        self.spans += q.n_refine
        self.empty += q.n_empty
        if q.fix is not None:
            self.fix_known += 1
            self.fixes += int(q.fix)
        if q.breaks is not None:
            self.break_known += 1
            self.breaks += int(q.breaks)
        if q.draft_ok is not None:
            self.draft_known += 1
            self.drafts_ok += int(q.draft_ok)

    def rates(self) -> RefineRates:
        def ratio(num: int, den: int) -> float | None:
            return num / den if den else None

        return RefineRates(
            ratio(self.empty, self.spans),
            ratio(self.fixes, self.fix_known),
            ratio(self.drafts_ok, self.draft_known),
            ratio(self.breaks, self.break_known),
        )


def refine_quality_rates(records: Sequence[RolloutRecord]) -> RefineRates:
    """The :class:`RefineRates` of ``records`` (definitions: :mod:`rewards.refine_quality`)."""
    tally = RefineTally()
    for r in records:
        if r.n_refine:
            tally.add(assess_refines(r.response, r.gold, is_correct(r.acc)))
    return tally.rates()


def refine_quality_metrics(records: Sequence[RolloutRecord], prefix: str = "pasr") -> dict[str, float]:
    """Empty-refine rate (per span), refine-fix rate, refine-break rate and draft accuracy (per
    refining response); 0 where undefined, because logging backends want a number every step.
    Accuracy of refining answers moves by fixes minus breaks, so the break rate stands beside
    the fix rate. The draft accuracy shows whether the first attempt holds up while the refines
    improve."""
    empty, fix, draft, breaks = refine_quality_rates(records)
    return {
        f"{prefix}/empty_refine_rate": empty or 0.0,
        f"{prefix}/refine_fix_rate": fix or 0.0,
        f"{prefix}/refine_break_rate": breaks or 0.0,
        f"{prefix}/draft_acc": draft or 0.0,
    }


def step_metrics(records: Sequence[RolloutRecord], prefix: str = "pasr") -> dict[str, float]:
    """Metrics of one step's rollouts (refine rollouts are the trained ones)."""
    refine = [r for r in records if r.variant == REFINE]
    plain = [r for r in records if r.variant == PLAIN]
    judged = [r for r in refine if r.acc is not None]
    lengths = [r.response_tokens for r in refine]
    outcomes = Counter(r.refine_outcome for r in refine)
    m = {
        f"{prefix}/format_pass_rate": _mean(r.format_ok for r in refine),
        f"{prefix}/refine_rate": _mean(r.n_refine > 0 for r in refine),
        f"{prefix}/refine_tags_per_response": _mean(r.n_refine for r in refine),
        f"{prefix}/acc_refine": _mean(r.acc for r in judged),
        f"{prefix}/acc_plain": _mean(r.acc for r in plain if r.acc is not None),
        f"{prefix}/format_pass_rate_plain": _mean(r.format_ok for r in plain),
        f"{prefix}/reward_mean": _mean(r.total_reward for r in judged),
        f"{prefix}/refine_reward_mean": _mean(r.refine_reward for r in judged),
        f"{prefix}/judge_errors": float(sum(r.acc is None for r in records)),
        f"{prefix}/response_length/mean": _mean(lengths),
        f"{prefix}/response_length/max": float(max(lengths, default=0)),
        f"{prefix}/response_length/clip_ratio": _mean(r.finish_reason == "length" for r in refine),
        f"{prefix}/plain_response_length/mean": _mean(r.response_tokens for r in plain),
    }
    for name in OUTCOMES:
        m[f"{prefix}/refine_outcome/{name}"] = outcomes.get(name, 0) / len(refine) if refine else 0.0
    m.update(refine_quality_metrics(refine, prefix))
    return m


def zero_spread_fraction(scores: Sequence[float], groups: Sequence[object], tol: float = 1e-9) -> float:
    """The fraction of GRPO groups (rows sharing a group key) whose scores are all equal: GRPO's
    advantage is the score minus the group mean, so such a group contributes no gradient."""
    by_group: dict[object, list[float]] = defaultdict(list)
    for score, group in zip(scores, groups):
        by_group[group].append(float(score))
    if not by_group:
        return 0.0
    flat = sum(1 for g in by_group.values() if max(g) - min(g) <= tol)
    return flat / len(by_group)


def training_step_metrics(
    records: Sequence[RolloutRecord], scores: Sequence[float], mask: Sequence[bool], prefix: str = "pasr"
) -> dict[str, float]:
    """:func:`step_metrics` and what the update gets from the step, from the step core's
    ``scores`` and ``mask`` (one entry per record, :func:`recipe.scoring.group_scores`):
    ``masked_rows`` (refine rows left out for a judge error), ``plain_rows`` (the baseline's
    rollouts, generated and never trained) and ``zero_spread_groups`` (the share of GRPO groups,
    a query's trained refine rows, whose scores are all equal: 1 means the step learns nothing)."""
    refine = [i for i, r in enumerate(records) if r.variant == REFINE]
    trained = [i for i in refine if mask[i]]
    m = step_metrics(records, prefix)
    m[f"{prefix}/masked_rows"] = float(len(refine) - len(trained))
    m[f"{prefix}/plain_rows"] = float(sum(r.variant == PLAIN for r in records))
    m[f"{prefix}/zero_spread_groups"] = zero_spread_fraction(
        [scores[i] for i in trained], [records[i].query_id for i in trained]
    )
    return m


def reward_time_share(reward_s: float, step_s: float, prefix: str = "pasr") -> dict[str, float]:
    """The share of a training step's wall time spent judging and scoring its rollouts (what a
    faster judge could save); ``reward_s`` and ``step_s`` as the engine times them."""
    return {f"{prefix}/reward_time_share": reward_s / step_s if step_s else 0.0}
