"""Draft credit: the outcome advantage kept off a draft it contradicts (``pasr.draft_credit``).

**Why.** PASR's reward is an outcome reward, and GRPO gives every token of a response that
response's advantage. In a rollout whose refine fixed a wrong draft
(``21 + 57 = 102. <refine>21 + 50 = 71, 71 + 7 = 78 ...</refine>`` answered 78) the wrong
``102`` is reinforced exactly as much as the refine that repaired it. On the embedded model this
is much of what PASR reinforces: in the learning-signal benchmark's PASR run, 40-75% of the rows
with a positive advantage (per ten steps) had a wrong draft, and the greedy first values that
were right fell from 164 to 119 of 300 over 90 steps while the refines got better (docs/results/learning_signal_history.md,
"A longer PASR phase"). What the refines gained, the drafts lost.

**What it does.** The *draft* of a refining response is the last number it states before its
first ``<refine>`` (:func:`rewards.refine_quality.assess_refines`, ``draft_ok``). The modes:

* ``value``: the draft number's own tokens (``102``) keep their advantage ``A`` only where it
  agrees with the draft's own correctness: a wrong draft's get ``min(A, 0)``, a right draft's
  ``max(A, 0)``. The setup before it (``21 + 57 =``) and everything from the ``<refine>`` tag on
  keep ``A``. The local engine's CPU default.
* ``outcome`` (``PasrConfig``'s default, the verl engine's): every token gets ``A``, as in the
  paper.

Clipping every token before the ``<refine>`` tag instead (``span``) collapsed the embedded model
(the setup tokens of wrong drafts were only ever pushed down, the model began to miscopy
operands, accuracy fell from 0.57 to 0.29 in 40 steps; docs/results/learning_signal_history.md) and was
retired after commit 0c947d1 (:mod:`recipe.retired_keys`).

Responses without a refine, without a number before it, or with a gold that is not a plain
number are left alone, so on open questions the option changes nothing.

Both engines write three non-tensor columns (:data:`DRAFT_START`, :data:`DRAFT_END`,
:data:`DRAFT_SIGN`), and :func:`recipe.advantages.advantages_on_trained_rows` applies
:func:`apply_draft_credit` after the estimator, so the two compute the same advantages.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

from data.records import REFINE, RolloutRecord
from rewards.refine_quality import assess_refines, draft_value_span

DRAFT_START = "pasr_draft_start"  # non-tensor column: first response token of the clipped draft tokens
DRAFT_END = "pasr_draft_end"  # non-tensor column: one past the last
DRAFT_SIGN = "pasr_draft_sign"  # non-tensor column: +1 draft right, -1 wrong, 0 unknown / no draft
CLIPPING_MODE = "value"  # the pasr.draft_credit mode that clips (outcome does not)


def draft_sign(record: RolloutRecord) -> int:
    """+1 when the draft of a refine-prompted, refining ``record`` is right, -1 when it is wrong,
    0 when there is no draft to judge (see the module docstring)."""
    if record.variant != REFINE or record.n_refine == 0:
        return 0
    ok = assess_refines(record.response, record.gold, None).draft_ok
    return 0 if ok is None else (1 if ok else -1)


def tokens_before(decode: Callable[[Sequence[int]], str], response_ids: Sequence[int], char_at: int) -> int:
    """How many leading tokens of ``response_ids`` decode to text that ends at or before
    character ``char_at``. A token that straddles ``char_at`` (``" <"`` before a tag, ``" 1"``
    before a number) is not counted: it belongs to what starts there. Binary search: decoded
    length grows with the prefix."""
    if char_at <= 0:
        return 0
    lo, hi = 0, len(response_ids)  # invariant: the first lo tokens fit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(decode(response_ids[:mid])) <= char_at:
            lo = mid
        else:
            hi = mid - 1
    return lo


def draft_token_span(
    decode: Callable[[Sequence[int]], str], response_ids: Sequence[int], response: str, text_offset: int = 0
) -> tuple[int, int]:
    """The ``[start, end)`` response tokens of the draft number of ``response`` (empty: 0, 0).
    ``text_offset``: characters of ``response`` that are not in the decoded ids (a prefilled
    ``<think>``)."""
    chars = draft_value_span(response)
    if chars is None:
        return 0, 0
    start = tokens_before(decode, response_ids, chars[0] - text_offset)
    # the tokens up to the one that completes the number's last character
    end = min(tokens_before(decode, response_ids, chars[1] - 1 - text_offset) + 1, len(response_ids))
    return start, max(start, end)


def draft_columns(
    records: Sequence[RolloutRecord],
    response_ids: Sequence[Sequence[int]],
    decode: Callable[[Sequence[int]], str],
    text_offset: int = 0,
) -> dict[str, np.ndarray]:
    """The :data:`DRAFT_START`, :data:`DRAFT_END` and :data:`DRAFT_SIGN` columns of ``records``
    (one entry each), from their token ids."""
    cols = {name: np.zeros(len(records), dtype=np.int64) for name in (DRAFT_START, DRAFT_END, DRAFT_SIGN)}
    for i, (record, ids) in enumerate(zip(records, response_ids, strict=True)):
        sign = draft_sign(record)
        if sign == 0:
            continue
        cols[DRAFT_START][i], cols[DRAFT_END][i] = draft_token_span(decode, list(ids), record.response, text_offset)
        cols[DRAFT_SIGN][i] = sign
    return cols


def clip_draft_advantages(advantages: torch.Tensor, start: torch.Tensor, end: torch.Tensor, sign: torch.Tensor) -> torch.Tensor:
    """``advantages`` (rows x response tokens) with each row's tokens ``start <= t < end``
    clipped to agree with its draft: ``min(A, 0)`` where ``sign`` is -1, ``max(A, 0)`` where
    +1, unchanged where 0.

    >>> a = torch.tensor([[1.0, 1.0, 1.0], [-1.0, -1.0, -1.0], [1.0, 1.0, 1.0]])
    >>> clip_draft_advantages(a, torch.tensor([1, 0, 0]), torch.tensor([2, 2, 2]), torch.tensor([-1, 1, 0])).tolist()
    [[1.0, 0.0, 1.0], [0.0, 0.0, -1.0], [1.0, 1.0, 1.0]]
    """
    pos = torch.arange(advantages.shape[-1])[None, :]
    in_draft = (pos >= start[:, None]) & (pos < end[:, None])
    wrong = in_draft & (sign[:, None] < 0)
    right = in_draft & (sign[:, None] > 0)
    out = torch.where(wrong, advantages.clamp(max=0), advantages)
    return torch.where(right, out.clamp(min=0), out)


def apply_draft_credit(data) -> int:
    """Clip ``data``'s advantages by its draft columns (in place; a no-op without them).
    Returns how many rows had a draft token's advantage changed."""
    nt = data.non_tensor_batch
    if not all(name in nt for name in (DRAFT_START, DRAFT_END, DRAFT_SIGN)):
        return 0
    col = lambda name: torch.as_tensor(np.asarray(nt[name], dtype=np.int64))  # noqa: E731
    before = data.batch["advantages"]
    after = clip_draft_advantages(before, col(DRAFT_START), col(DRAFT_END), col(DRAFT_SIGN))
    data.batch["advantages"] = after
    return int((after != before).any(-1).sum())
