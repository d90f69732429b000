"""The whole PASR reward of one query group: ``w_f * format + w_a * acc + w_r * refine``.

Input: the refine-prompted responses of one query with their judge scores, and the judge
scores of the plain-prompted responses of the same query. Output: one :class:`PasrReward` per
refine response with every component, so both engines log the same parts.

A response whose judge failed (``acc is None``) gets ``total = None``: it is never scored 0.
What the engines do with it (leave it out of the update and of its group's statistics) is
decided once, in :func:`recipe.scoring.group_scores`.

The weights, ``tie_value``, ``zeta`` and the empty-refine and compare rules have no defaults here;
they live in one place, :class:`recipe.pasr_config.PasrConfig` (``pasr.weights.*``,
``pasr.tie_value``, ``pasr.zeta``, ``pasr.empty_refine_value``, ``pasr.refine_compare``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rewards.format import check_format
from rewards.refine import JUDGE_ERROR, plain_baseline, refine_reward
from rewards.refine_quality import assess_refines


@dataclass
class RewardWeights:
    """``w_f``, ``w_a``, ``w_r``: the weights of the three parts (``pasr.weights.*``)."""

    format: float
    acc: float
    refine: float


@dataclass(frozen=True)
class PasrReward:
    format: float
    format_ok: bool
    format_reason: str
    n_refine: int
    acc: float | None
    refine: float
    refine_outcome: str
    baseline: float | None  # what the refine reward compared with: the plain rollouts' mean accuracy
    total: float | None

    @property
    def judge_error(self) -> bool:
        return self.acc is None


def score_group(
    responses: Sequence[str],
    accs: Sequence[float | None],
    plain_accs: Sequence[float | None],
    *,
    weights: RewardWeights,
    tie_value: float,
    zeta: float,
    empty_refine_value: float | None = None,
    refine_compare: str = "sign",
) -> list[PasrReward]:
    """PASR rewards for the refine-prompted responses of one query.

    Args:
        responses: the refine-prompted responses of the query.
        accs: their judge scores in [0, 1], ``None`` where the judge failed.
        plain_accs: the judge scores of the query's plain-prompted responses (the baseline).
        weights: the weights of format, accuracy and refine reward.
        tie_value: the refine reward of a tie (see :func:`rewards.refine.refine_reward`).
        zeta: the tie tolerance.
        empty_refine_value: what a rollout whose refine spans are all empty earns as refine
            reward, right or wrong (see :mod:`rewards.refine`); None (the paper): the same as any
            refine.
        refine_compare: ``sign`` (the paper) or ``margin`` (see :mod:`rewards.refine`).

    Returns:
        One :class:`PasrReward` per response, in order; ``total`` is ``None`` for a judge error.

    Example:
        >>> w = RewardWeights(format=1.0, acc=1.0, refine=1.0)
        >>> refined = "<think>2+2=5 <refine>no: 2+2=4</refine></think><answer>4</answer>"
        >>> plain = "<think>2+2=4</think><answer>4</answer>"
        >>> out = score_group([refined, plain, refined], [1.0, 1.0, None], [0.0, 1.0],
        ...                   weights=w, tie_value=-0.5, zeta=1e-6)
        >>> [(r.total, r.refine_outcome) for r in out]
        [(3.0, 'better'), (2.0, 'none'), (None, 'judge_error')]
    """
    if len(responses) != len(accs):
        raise ValueError(f"{len(responses)} responses but {len(accs)} accuracies")
    baseline = plain_baseline(plain_accs)
    out = []
    for text, acc in zip(responses, accs):
        fmt = check_format(text)
        if acc is None:
            out.append(PasrReward(fmt.reward, fmt.ok, fmt.reason, fmt.n_refine, None, 0.0, JUDGE_ERROR, baseline, None))
            continue
        empty = (
            empty_refine_value is not None and fmt.has_refine and all(assess_refines(text, None, None, fmt=fmt).empty)
        )
        ref = refine_reward(
            acc,
            fmt.has_refine,
            baseline,
            tie_value=tie_value,
            zeta=zeta,
            empty=empty,
            empty_value=empty_refine_value,
            compare=refine_compare,
        )
        total = weighted_total(weights, fmt.reward, acc, ref.value)
        out.append(
            PasrReward(fmt.reward, fmt.ok, fmt.reason, fmt.n_refine, acc, ref.value, ref.outcome, baseline, total)
        )
    return out


def weighted_total(weights: RewardWeights, format_reward: float, acc: float, refine: float) -> float:
    """``w_f * format + w_a * acc + w_r * refine``: the one place the parts are summed."""
    return weights.format * format_reward + weights.acc * acc + weights.refine * refine
