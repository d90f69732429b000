"""Advantages over the rows PASR trains on: the judge-error policy's half that touches GRPO.

:func:`recipe.scoring.group_scores` masks the rollouts whose judge failed. Zeroing their
``response_mask`` keeps them out of the loss but not out of GRPO's group statistics: verl's
estimators take the mean and std of every row sharing a ``uid``, whatever its mask. So the
estimator runs on the trained rows only, and the masked rows get advantage and return 0. Both
engines call :func:`advantages_on_trained_rows`: the local engine around verl's
``compute_grpo_outcome_advantage``, the verl engine around ``ray_trainer.compute_advantage``
(any estimator), so the two compute the same numbers for the same step.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

TRAINED = "pasr_trained"  # non-tensor column: False for a row masked out of the update


def trained_rows(data) -> np.ndarray:
    """The :data:`TRAINED` column as a bool array (every row when the column is absent)."""
    column = data.non_tensor_batch.get(TRAINED)
    if column is None:
        return np.ones(len(data), dtype=bool)
    return np.asarray(column, dtype=bool)


def advantages_on_trained_rows(data, estimate: Callable):
    """Run ``estimate`` (``DataProto -> DataProto`` with ``advantages`` and ``returns``) on the
    trained rows of ``data`` only; the other rows get advantages, returns and ``response_mask``
    0. ``data`` is changed in place and returned."""
    trained = trained_rows(data)
    if trained.all():
        return estimate(data)
    mask = data.batch["response_mask"]
    advantages = torch.zeros(mask.shape, dtype=torch.float32)
    returns = torch.zeros(mask.shape, dtype=torch.float32)
    if trained.any():
        idx = np.flatnonzero(trained)
        part = estimate(data.select_idxs(idx))
        if len(part) != len(idx):
            raise RuntimeError(f"the advantage estimator returned {len(part)} rows for {len(idx)}")
        advantages[torch.from_numpy(idx)] = part.batch["advantages"].to(torch.float32)
        returns[torch.from_numpy(idx)] = part.batch["returns"].to(torch.float32)
    data.batch["response_mask"] = mask * torch.from_numpy(trained).to(mask.dtype)[:, None]
    data.batch["advantages"] = advantages
    data.batch["returns"] = returns
    return data
