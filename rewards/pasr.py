"""The whole PASR reward of one query group: ``w_f * format + w_a * acc + w_r * refine``.

Input: the refine-prompted responses of one query with their judge scores, and the judge
scores of the plain-prompted responses of the same query. Output: one :class:`PasrReward` per
refine response with every component, so both engines log the same parts.

A response whose judge failed (``acc is None``) gets ``total = None``: engines leave it out of
the policy update and count it as a judge error; it is never scored 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rewards.format import FormatResult, check_format
from rewards.refine import plain_baseline, refine_reward


@dataclass(frozen=True)
class RewardWeights:
    format: float = 1.0
    acc: float = 1.0
    refine: float = 1.0


@dataclass(frozen=True)
class PasrReward:
    format: float
    format_ok: bool
    format_reason: str
    n_refine: int
    acc: float | None
    refine: float
    refine_outcome: str
    baseline: float | None
    total: float | None

    @property
    def judge_error(self) -> bool:
        return self.acc is None


def score_group(
    responses: Sequence[str],
    accs: Sequence[float | None],
    plain_accs: Sequence[float | None],
    weights: RewardWeights = RewardWeights(),
    tie_value: float = -0.5,
    zeta: float = 1e-6,
    formats: Sequence[FormatResult] | None = None,
) -> list[PasrReward]:
    """PASR rewards for the refine responses of one query (``formats``: their ``check_format``
    verdicts, when the caller already has them)."""
    if len(responses) != len(accs):
        raise ValueError(f"{len(responses)} responses but {len(accs)} accuracies")
    if formats is None:
        formats = [check_format(text) for text in responses]
    elif len(formats) != len(responses):
        raise ValueError(f"{len(responses)} responses but {len(formats)} format verdicts")
    baseline = plain_baseline(plain_accs)
    out = []
    for fmt, acc in zip(formats, accs):
        if acc is None:
            out.append(PasrReward(fmt.reward, fmt.ok, fmt.reason, fmt.n_refine, None, 0.0, "judge_error", baseline, None))
            continue
        ref = refine_reward(acc, fmt.has_refine, baseline, tie_value=tie_value, zeta=zeta)
        total = weights.format * fmt.reward + weights.acc * acc + weights.refine * ref.value
        out.append(PasrReward(fmt.reward, fmt.ok, fmt.reason, fmt.n_refine, acc, ref.value, ref.outcome, baseline, total))
    return out
