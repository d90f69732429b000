"""The PASR refine reward: did refining beat answering without the refine prompt?

The paper's definition: a rollout that refines is compared with the **mean accuracy of the
plain rollouts** of its query (plain system prompt, sampled in the same step, never trained on):

* better by more than ``zeta``  -> ``+1``
* worse by more than ``zeta``   -> ``-1``
* otherwise (a tie)             -> ``tie_value`` (the paper: ``-0.5``)
* no refine in the rollout      -> ``0``

``zeta`` makes the tie band explicit: the reference code tests float equality, so a plain mean
of 0.6666 and a judge score of 0.6667 would differ (1e-6 for rule judges; widen it for a
continuous LLM judge).

Three deviations are options, each for a reason a user may have (the defaults are the paper's,
:class:`recipe.pasr_config.PasrConfig`; the CPU preset ``recipe/config/local_cpu.yaml`` sets all
three; the measurements: docs/design.md and docs/results/history/learning_signal_history.md):

* ``tie_value: 0.0``: on questions the model always (or never) solves every refine ties, and
  -0.5 trains refining away there.
* ``refine_compare: margin`` pays ``acc - baseline`` instead of its sign: with a binary judge the
  sign's mean is below 0 for any model right less than half the time, whatever the refines do
  (the derivation: docs/design.md); the margin's mean is the accuracy refining adds.
* ``empty_refine_value``: a rollout whose refine spans all only restate
  (:func:`rewards.refine_quality.is_empty_refine`) earns this, right or wrong (outcome
  ``empty``); with 0.0 an empty refine is no refine, so a small model is not paid for restating
  a step instead of checking it.

The outcome names (:data:`OUTCOMES`) are the one vocabulary of the metrics and the plots.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

BETTER, WORSE, TIE, NONE, NO_BASELINE, EMPTY = "better", "worse", "tie", "none", "no_baseline", "empty"
JUDGE_ERROR = "judge_error"  # no score: the rollout is masked (rewards.pasr.score_group)
# every refine outcome a rollout can have, in the order metrics and plots list them
OUTCOMES = (BETTER, WORSE, TIE, EMPTY, NONE, NO_BASELINE, JUDGE_ERROR)
COMPARED_OUTCOMES = (BETTER, WORSE, TIE, EMPTY)  # a refine paid against a baseline
COMPARE_MODES = ("sign", "margin")  # pasr.refine_compare


@dataclass(frozen=True)
class RefineReward:
    value: float
    outcome: str  # one of OUTCOMES but JUDGE_ERROR
    baseline: float | None  # mean plain accuracy used, None when there was none


def plain_baseline(plain_accs: Sequence[float | None]) -> float | None:
    """The refine reward's baseline: the mean judge score of a query's plain rollouts.

    Args:
        plain_accs: judge scores in [0, 1] of the plain-prompted rollouts of one query; ``None``
            for a rollout whose judge failed, which is left out (a timeout is not a wrong answer).

    Returns:
        The mean of the judged scores, or ``None`` when none was judged.

    Example:
        >>> plain_baseline([1.0, None, 0.0])
        0.5
        >>> plain_baseline([None, None]) is None
        True
    """
    valid = [a for a in plain_accs if a is not None]
    return sum(valid) / len(valid) if valid else None


def refine_reward(
    acc: float,
    has_refine: bool,
    baseline: float | None,
    *,
    tie_value: float,
    zeta: float,
    empty: bool = False,
    empty_value: float | None = None,
    compare: str = "sign",
) -> RefineReward:
    """The refine reward of one rollout: did refining beat the plain rollouts of its query?

    Args:
        acc: the rollout's judge score in [0, 1].
        has_refine: whether the rollout holds a ``<refine>`` span.
        baseline: :func:`plain_baseline` of its query (``None``: no plain rollout was judged).
        tie_value: the reward of a tie (``pasr.tie_value``; the paper: -0.5).
        zeta: how far apart ``acc`` and ``baseline`` must be to differ (``pasr.zeta``).
        empty: whether every refine span of the rollout is empty.
        empty_value: what an empty refine earns, right or wrong (``pasr.empty_refine_value``;
            module docstring); None: the paper, an empty refine is paid like any refine.
        compare: ``sign`` (the paper: +1 / -1) or ``margin`` (``acc - baseline``) for a rollout
            that is better or worse (``pasr.refine_compare``; module docstring).

    Returns:
        A :class:`RefineReward`: +1 ``better``, -1 ``worse`` (``margin``: ``acc - baseline``), ``tie_value`` ``tie``, 0
        ``none`` (no refine), 0 ``no_baseline``, or ``empty_value`` ``empty`` (every refine span empty,
        with ``empty_value`` set and a baseline to compare with).

    Example:
        >>> refine_reward(1.0, True, 0.5, tie_value=-0.5, zeta=1e-6)
        RefineReward(value=1.0, outcome='better', baseline=0.5)
        >>> refine_reward(1.0, True, 1.0, tie_value=-0.5, zeta=1e-6).value  # the paper's tie problem
        -0.5
        >>> refine_reward(0.6667, True, 2 / 3, tie_value=-0.5, zeta=1e-3).outcome  # within zeta
        'tie'
        >>> refine_reward(0.0, False, 0.5, tie_value=-0.5, zeta=1e-6).outcome
        'none'
        >>> refine_reward(1.0, True, 0.5, tie_value=0.0, zeta=1e-6, empty=True, empty_value=0.0).outcome
        'empty'
        >>> refine_reward(0.0, True, 0.5, tie_value=0.0, zeta=1e-6, empty=True,
        ...               empty_value=0.0)  # an empty refine is no refine: not blamed either
        RefineReward(value=0.0, outcome='empty', baseline=0.5)
        >>> refine_reward(0.0, True, 0.25, tie_value=0.0, zeta=1e-6, compare="margin").value
        -0.25
    """
    if compare not in COMPARE_MODES:
        raise ValueError(f"compare must be one of {', '.join(COMPARE_MODES)}, got {compare!r}")
    reward = _compared(acc, has_refine, baseline, tie_value, zeta)
    if compare != "sign" and reward.outcome in (BETTER, WORSE):
        reward = RefineReward(acc - reward.baseline, reward.outcome, reward.baseline)
    if has_refine and empty and empty_value is not None and reward.outcome != NO_BASELINE:
        return RefineReward(float(empty_value), EMPTY, reward.baseline)
    return reward


def _compared(acc: float, has_refine: bool, baseline: float | None, tie_value: float, zeta: float) -> RefineReward:
    """The paper's comparison with the plain baseline (module docstring)."""
    if not has_refine:
        return RefineReward(0.0, NONE, baseline)
    if baseline is None:
        # Every plain rollout of this query failed to be judged: there is nothing to compare
        # with, so no refine signal (counted under `no_baseline` in the metrics).
        return RefineReward(0.0, NO_BASELINE, None)
    if acc > baseline + zeta:
        return RefineReward(1.0, BETTER, baseline)
    if acc < baseline - zeta:
        return RefineReward(-1.0, WORSE, baseline)
    return RefineReward(float(tie_value), TIE, baseline)
