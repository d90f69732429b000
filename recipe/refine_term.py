"""Whether PASR's refine term reaches the advantages: the ``pasr/refine_term/*`` metrics and
the warning both engines print when it does not.

With a judge whose scores are 0 or 1, a refining rollout's refine reward depends only on its
accuracy ``a`` (its query's plain mean ``b`` is one number for the whole group), so inside a group
in which every rollout refines and the format does not vary, ``refine(a, b)`` is a straight line in
``a`` and the total reward is ``c * a + d`` with ``c > 0``. GRPO subtracts the group mean and
divides by the group std: an affine map of the scores leaves its advantages unchanged. So the
update equals that of the same reward without its refine term (``pasr.weights.refine=0``) unless
the group mixes refining and non-refining rollouts, holds an empty refine paid apart
(``pasr.empty_refine_value``), varies in format, or the judge gives graded scores; without the std
division (``norm_adv_by_std=false``, Dr. GRPO) the term scales the advantages by ``c``
(docs/design.md, "When the refine term acts").

Nothing in a training curve shows this: the refine reward's mean moves, the advantages do not. So
every step both engines form the advantages of the step's trained rows twice, with the reward
and with the reward less ``w_r * refine``, with verl's GRPO estimator on one scalar per row
(cheap), and log how much the term changed them (:func:`refine_term_metrics`);
:class:`RefineTermWatch` turns a run of steps in which it changed almost nothing into one line.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from data.records import REFINE, RolloutRecord

LIVE_TOL = 1e-4  # an advantage the refine term moved by more than this counts as changed
DOC = "docs/design.md#when-the-refine-term-acts"
# the warning: a live share under WARN_SHARE for WARN_STEPS steps in a row
WARN_SHARE = 0.05
WARN_STEPS = 3


def grpo_advantages(scores: Sequence[float], groups: Sequence[object], *, norm_adv_by_std: bool = True) -> list[float]:
    """One GRPO advantage per row, from verl's ``compute_grpo_outcome_advantage`` on one-token
    responses (the engines' estimator, so its edge cases are theirs: a group of one row keeps its
    score, an all-equal group gets 0)."""
    import numpy as np
    import torch
    from verl.trainer.ppo import core_algos

    if not scores:
        return []
    rewards = torch.tensor([[float(s)] for s in scores], dtype=torch.float32)
    adv, _ = core_algos.compute_grpo_outcome_advantage(
        token_level_rewards=rewards,
        response_mask=torch.ones_like(rewards),
        index=np.array([str(g) for g in groups], dtype=object),
        norm_adv_by_std_in_grpo=norm_adv_by_std,
    )
    return [float(a) for a in adv[:, 0]]


@dataclass(frozen=True)
class RefineTermEffect:
    """What the refine term did to one step's advantages (the rows trained on only)."""

    groups: int  # GRPO groups with at least one trained row
    live_groups: int  # groups in which it moved an advantage by more than LIVE_TOL
    mixed_groups: int  # groups whose trained rows mix refining and non-refining rollouts
    adv_change: float  # mean |advantage with - without| over mean |advantage with| (0 when no advantage)

    @property
    def live_share(self) -> float:
        return self.live_groups / self.groups if self.groups else 0.0

    @property
    def mixed_share(self) -> float:
        return self.mixed_groups / self.groups if self.groups else 0.0


def refine_term_effect(
    records: Sequence[RolloutRecord],
    scores: Sequence[float],
    mask: Sequence[bool],
    refine_weight: float,
    *,
    norm_adv_by_std: bool = True,
) -> RefineTermEffect:
    """The step's advantages with and without ``refine_weight * refine_reward`` in each trained
    row's score (``scores`` and ``mask`` as :func:`recipe.scoring.group_scores` returns them; a
    query's trained refine rows are its GRPO group, as in both engines' update)."""
    rows = [i for i, r in enumerate(records) if r.variant == REFINE and mask[i]]
    groups = [records[i].query_id for i in rows]
    with_term = [float(scores[i]) for i in rows]
    without = [float(scores[i]) - refine_weight * float(records[i].refine_reward or 0.0) for i in rows]
    adv = grpo_advantages(with_term, groups, norm_adv_by_std=norm_adv_by_std)
    adv_without = grpo_advantages(without, groups, norm_adv_by_std=norm_adv_by_std)
    moved: dict[str, float] = defaultdict(float)
    refines: dict[str, set[bool]] = defaultdict(set)
    for i, g, a, b in zip(rows, groups, adv, adv_without):
        moved[g] = max(moved[g], abs(a - b))
        refines[g].add(records[i].n_refine > 0)
    total_abs = sum(abs(a) for a in adv)
    change = sum(abs(a - b) for a, b in zip(adv, adv_without))
    return RefineTermEffect(
        groups=len(moved),
        live_groups=sum(m > LIVE_TOL for m in moved.values()),
        mixed_groups=sum(len(s) == 2 for s in refines.values()),
        adv_change=change / total_abs if total_abs > 0 else 0.0,
    )


def refine_term_metrics(
    records: Sequence[RolloutRecord],
    scores: Sequence[float],
    mask: Sequence[bool],
    refine_weight: float,
    *,
    norm_adv_by_std: bool = True,
    prefix: str = "pasr",
) -> dict[str, float]:
    """:func:`refine_term_effect` as the step's metrics: ``refine_term/live_groups`` (the share
    of trained groups whose advantages it changed), ``refine_term/adv_change`` (mean absolute
    change over mean absolute advantage) and ``refine_term/mixed_groups`` (the share of groups
    mixing refining and non-refining rollouts, where a binary judge lets it act)."""
    e = refine_term_effect(records, scores, mask, refine_weight, norm_adv_by_std=norm_adv_by_std)
    return {
        f"{prefix}/refine_term/live_groups": e.live_share,
        f"{prefix}/refine_term/adv_change": e.adv_change,
        f"{prefix}/refine_term/mixed_groups": e.mixed_share,
    }


@dataclass
class RefineTermWatch:
    """Counts the steps in a row whose ``refine_term/live_groups`` stayed under ``share`` and
    returns the warning once the count reaches ``steps`` (once per such stretch; a step above
    ``share`` starts the count again). With ``pasr.weights.refine=0`` the term is off by choice:
    the control, never warned about."""

    share: float = WARN_SHARE
    steps: int = WARN_STEPS
    refine_weight: float = 1.0
    _low: list[int] = field(default_factory=list)

    def observe(self, step: int, metrics: dict[str, float], prefix: str = "pasr") -> str | None:
        live = metrics.get(f"{prefix}/refine_term/live_groups")
        if live is None or self.refine_weight == 0:
            return None
        if live >= self.share:
            self._low = []
            return None
        self._low.append(step)
        if len(self._low) != self.steps:
            return None
        mixed = metrics.get(f"{prefix}/refine_term/mixed_groups", 0.0)
        return (
            f"PASR WARNING steps {self._low[0]}-{step}: the refine term changed the advantages of under "
            f"{self.share:.0%} of groups (last step {live:.0%}; groups mixing refining and non-refining rollouts "
            f"{mixed:.0%}): with a 0/1 judge GRPO cancels it wherever every rollout refines, so these steps trained "
            f"what pasr.weights.refine=0 trains ({DOC})"
        )
