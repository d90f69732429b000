"""Which rows a local run's step takes, and the data a run cannot use (refused at set-up)."""

from __future__ import annotations

import numpy as np

from data.examples import DatasetError, Example
from recipe.local_engine.config import LocalTrainConfig


def step_indices(n_items: int, per_step: int, step: int, seed: int) -> list[int]:
    """Items of 0-based ``step``: a fresh seeded permutation every epoch, so the data position
    is a pure function of the step (resume needs nothing else)."""
    out = []
    start = step * per_step
    for pos in range(start, start + per_step):
        epoch, offset = divmod(pos, n_items)
        perm = np.random.default_rng(seed + epoch).permutation(n_items)
        out.append(int(perm[offset]))
    return out


def check_data(cfg: LocalTrainConfig, train: list[Example], heldout: list[Example]) -> None:
    """Refuse data the run cannot use, at set-up before the model loads.

    An empty data file used to run the whole warm-up (synthetic traces, not the file) and
    checkpoint it, then die in :func:`step_indices` (ZeroDivisionError). With fewer training rows
    than ``rollout.queries_per_step`` a step takes a query twice, and both sets of its rollouts
    share one GRPO group (the query's id): the step trains fewer, larger groups than configured.
    With no held-out rows an evaluation has nothing to score."""
    where = f"data.source: {cfg.data.source}"
    if not train:
        raise DatasetError(f"{where} holds no rows")
    needed = cfg.rollout.queries_per_step
    if cfg.trainer.steps > 0 and len(train) < needed:
        raise DatasetError(
            f"{where} has {len(train)} training row{'s' * (len(train) != 1)}, "
            f"fewer than rollout.queries_per_step={needed} "
            "(the different queries a step takes); add rows or lower rollout.queries_per_step"
        )
    if cfg.trainer.evaluates and not heldout:
        raise DatasetError(f"{where} has no held-out rows (split test) for the evaluations; turn trainer.eval_* off")
