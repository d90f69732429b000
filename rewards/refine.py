"""The PASR refine reward: did refining beat answering without the refine prompt?

For a rollout that refines, its accuracy is compared with the **mean accuracy of the plain
rollouts** of the same query (plain system prompt, sampled in the same step, never trained on):

* better by more than ``zeta``  -> ``+1``
* worse by more than ``zeta``   -> ``-1``
* otherwise (a tie)             -> ``tie_value`` (the paper: ``-0.5``)
* no refine in the rollout      -> ``0``

Why ``zeta``: the reference code tests float equality, so a plain mean of 0.6666 and a judge
score of 0.6667 are "different". ``zeta`` makes the tie band explicit (default 1e-6 for rule
judges; widen it for a continuous LLM judge).

The paper's tie problem: when every plain rollout and the refined one score 1.0, refining is a
tie and gets ``-0.5``, so on easy questions the model is pushed to stop refining even though
the refinement did no harm. That is the paper's intent (refine only when it helps), but it also
means that on a training set the model already solves, PASR trains refinement away. Set
``tie_value: 0.0`` for a neutral tie; both are one config key (``pasr.tie_value``).

**Sign or margin** (``pasr.refine_compare``). The paper pays the *sign* of ``acc - baseline``.
With a binary judge that sign is biased by the model's accuracy, not by whether refining
helps: if refine- and plain-prompted answers are both right with probability ``p`` and the
baseline is the mean of ``n`` plain answers, a refining rollout earns
``p * (1 - p**n) - (1 - p) * (1 - (1 - p)**n)`` on average, which is below 0 for every
``p < 0.5`` (-0.23 at ``p = 0.3``, ``n = 4``) and above 0 for ``p > 0.5``. A strong model is
pushed to refine, a weak one to stop, whatever the refines do. ``margin`` pays
``acc - baseline`` instead (in [-1, 1]; ties still get ``tie_value``), whose mean is the
accuracy refining adds over the plain prompt: 0 when refining neither helps nor hurts. On the
embedded model (sampled accuracy ~0.3) the sign reward, together with an empty-refine cap (a
since retired variant of the rule below), trained refinement away within 25 steps
(``benchmarks/learning_signal``); without the cap, the sign reward with a neutral tie is the
setting that measured a gain, so both engines default to the paper's ``sign``
(:class:`recipe.pasr_config.PasrConfig`) and ``margin`` is an option.

Empty refines (not in the paper; off unless ``pasr.empty_refine_value`` is set): a rollout whose
every refine span adds nothing (:func:`rewards.refine_quality.is_empty_refine`, e.g.
``<refine>94 + 3 = 97, so 97 is right.</refine>`` after ``94 + 3 = 97``) takes the paper's
credit for a right answer without refining anything. On the CPU default, PASR with the paper's
credit drifted from worked checks to restating the step (greedy empty-refine rate 0.03 after
warm-up, 0.19 after PASR; ``benchmarks/learning_signal``): on an easy step a restatement is as
right as a worked check and shorter, and the paper pays both the same. With ``empty_value`` set,
such a rollout's refine reward is exactly ``empty_value`` whether its answer is right or wrong
(outcome ``empty``). With 0.0 an empty refine *is* no refine (``none`` earns 0): it is neither
paid for a right answer nor blamed for a wrong one, so refining is judged by the refines that do
something, and a worked check that is right earns more than a restatement that is right. After a
60-step warm-up whose checks did not help, it did not keep refining alive; after a 160-step one
(with the margin compare) it did in two PASR trajectories of three, and in two of two with the
RL lr ramped (``algo.lr_warmup_steps``); it is the local engine's default
(docs/results/learning_signal_history.md). (Using ``empty_value`` as a cap instead, so that a wrong empty
refine kept its -1, trained refining away in both CPU runs that tried it, and was retired after
commit 0c947d1: :mod:`recipe.retired_keys`.)

**Draft** (``pasr.refine_compare=draft``; not the paper, an option measured on the CPU demo).
Over a warm-up that refines on every answer, the paper's comparison cannot tell one refining
rollout from another: the baseline is the same for the whole group and cancels in GRPO's
advantage, so PASR's reward there is GRPO on accuracy, and a right answer earns the same whether
its check fixed a wrong draft or copied a right one. ``draft`` compares a rollout's accuracy with
its *own* answer before refining: the draft (the last number before the first ``<refine>``,
:func:`rewards.refine_quality.assess_refines`) scored 1.0 when it equals the numeric gold, else
0.0, and pays the margin: a fix earns +1, a break -1, a kept draft the tie value. That is the
paper's question (did refining beat not refining?) asked of the rollout itself instead of other
rollouts. Where there is no draft to judge (no number before the refine, a gold that is not a
plain number) it falls back to ``margin`` against the plain baseline. Use it with
``pasr.draft_credit=value``, so a wrong draft that a check repaired is not itself reinforced.

``tie_value``, ``zeta`` and ``empty_value`` have no defaults here: they are config values, and their defaults
live in one place, :class:`recipe.pasr_config.PasrConfig`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

BETTER, WORSE, TIE, NONE, NO_BASELINE, EMPTY = "better", "worse", "tie", "none", "no_baseline", "empty"
COMPARE_MODES = ("sign", "margin", "draft")


@dataclass(frozen=True)
class RefineReward:
    value: float
    outcome: str  # better | worse | tie | none | no_baseline
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
            that is better or worse (``pasr.refine_compare``; module docstring); ``draft`` pays
            the margin too, the caller passing the draft's correctness as ``baseline``.

    Returns:
        A :class:`RefineReward`: +1 ``better``, -1 ``worse`` (``margin``: ``acc - baseline``), ``tie_value`` ``tie``, 0 ``none``
        (no refine), 0 ``no_baseline``, or ``empty_value`` ``empty`` (every refine span empty,
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
