"""Prompt prefill that runs each shared piece of a batch's prompts once.

Every prompt of a batch is the chat template around one of a few system prompts and a question:
on the CPU presets about 72 tokens, of which the first 25-40 (template and system prompt) are
the same in every row with the same system prompt. On CPU the prompt's forward pass is
compute-bound and costs as much as its tokens: a greedy evaluation spent about 40% of its time
prefilling, mostly the same few system prompts once per row.

Here a batch is laid out in two padded regions (:func:`pad_around_prefixes`): each row's shared
prefix, right-aligned in a prefix region, then the rest of its prompt, right-aligned after it
(``[padding | prefix | padding | rest]``) instead of one left-padded prompt. Position ids follow
the attention mask, so every real token keeps the position it has in a left-padded row and sees
exactly the same keys and values: the same computation. Then (:func:`prefill`) each distinct
prefix is run once, its keys and values are gathered to the distinct prompts, the rest of each
distinct prompt is run once on top, and the result is gathered to the rows. Gathering is
indexing, so gradients from every row add up on the one pass that computed a prefix: the
update's log-probs run their repeated prompts once this way.

:func:`shared_prefixes` picks each row's prefix to save the most tokens (all 0 when nothing is
shared; then only repeated prompts are run once). Generation uses it
(:func:`runtime.hf_generate.prompt_cache`) and so does the warm-up's loss, whose rows laid end
to end list each shared prefix once
(:func:`recipe.local_engine.logprobs.concatenated_response_logprobs`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def _best_common_length(distinct: Sequence[tuple[int, ...]]) -> int:
    """For distinct rows, the prefix length ``L`` that saves the most tokens:
    ``(distinct rows - distinct L-prefixes) * L``, at most the shortest row's length minus one."""
    if len(distinct) < 2:
        return 0
    distinct = sorted(distinct)
    cap = min(len(r) for r in distinct) - 1
    common = []  # the distinct L-prefixes of sorted rows are 1 + (neighbours sharing < L tokens)
    for a, b in zip(distinct, distinct[1:]):
        n = 0
        while n < cap and a[n] == b[n]:
            n += 1
        common.append(n)
    best, best_saved = 0, 0
    for length in range(1, cap + 1):
        saved = (len(distinct) - 1 - sum(c < length for c in common)) * length
        if saved > best_saved:
            best, best_saved = length, saved
    return best


def prefill_tokens(rows: Sequence[Sequence[int]], shared: Sequence[int]) -> int:
    """Tokens :func:`prefill` runs for ``rows`` laid out with these prefix lengths: each distinct
    prefix-region row, and each distinct row's rest padded to the longest rest."""
    width = max(shared)
    prefixes = {tuple(r[:n]) for r, n in zip(rows, shared)} if width else set()
    rests = {(tuple(r), n) for r, n in zip(rows, shared)}
    return len(prefixes) * width + len(rests) * max(len(r) - n for r, n in rests)


def shared_prefixes(rows: Sequence[Sequence[int]]) -> list[int]:
    """How many leading tokens of each row to prefill once for all rows starting with them.

    First the one length that saves the most over all distinct rows (with a refine and a plain
    system prompt in one batch: the part both prompts start with); then, within each group of
    rows that agree up to there, the length that saves the most in that group (its own system
    prompt), where that prefills fewer tokens in all (:func:`prefill_tokens`). Every row keeps
    at least one token after its prefix (the one that predicts what comes next).
    """
    distinct = {tuple(r) for r in rows}
    first = _best_common_length(list(distinct))
    single = [first] * len(rows)
    if not first:
        return single
    groups: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
    for r in distinct:
        groups.setdefault(r[:first], []).append(r)
    own = {key: max(first, _best_common_length(members)) for key, members in groups.items()}
    per_group = [own[tuple(r[:first])] for r in rows]
    return per_group if prefill_tokens(rows, per_group) < prefill_tokens(rows, single) else single


def pad_around_prefixes(
    rows: Sequence[Sequence[int]], pad_id: int, shared: Sequence[int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, attention mask) of ``rows`` in two padded regions: each row's first ``shared[i]``
    tokens right-aligned in a prefix region of ``max(shared)`` columns, then the rest of it
    right-aligned after that (all ``shared`` 0: ordinary left padding)."""
    if len(shared) != len(rows):
        raise ValueError(f"{len(rows)} rows but {len(shared)} prefix lengths")
    width = max(shared) if shared else 0
    rest = max(len(r) - n for r, n in zip(rows, shared))
    ids = torch.full((len(rows), width + rest), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width + rest), dtype=torch.long)
    for i, (r, n) in enumerate(zip(rows, shared)):
        if n:
            ids[i, width - n : width], mask[i, width - n : width] = torch.tensor(r[:n], dtype=torch.long), 1
        ids[i, width + rest - (len(r) - n) :] = torch.tensor(r[n:], dtype=torch.long)
        mask[i, width + rest - (len(r) - n) :] = 1
    return ids, mask


def positions(mask: torch.Tensor) -> torch.Tensor:
    """Position ids as ``generate`` computes them from the attention mask (padding gets 1)."""
    pos = mask.long().cumsum(-1) - 1
    return pos.masked_fill(mask == 0, 1)


def decoder(model):
    """The transformer body without the output layer: a prefill needs no logits, and the
    update computes them only where they are needed."""
    return model.get_decoder() if hasattr(model, "get_decoder") else model.base_model


def prefill(body, ids: torch.Tensor, mask: torch.Tensor, shared: int):
    """(KV cache of every row of ``ids``, last hidden state of every row) with each distinct
    row of the prefix region (its first ``shared`` columns) and each distinct row run once;
    None when no row repeats and nothing is shared (the caller runs the batch as it is).

    ``body``: a decoder (:func:`decoder`). ``ids``/``mask`` as laid out by
    :func:`pad_around_prefixes`, ``shared`` its prefix region's width; they must hold at least
    one column after it.
    """
    if ids.shape[1] <= shared:
        raise ValueError(f"nothing after the shared prefix: width {ids.shape[1]}, shared {shared}")
    rows = torch.cat([ids, mask], dim=1)
    unique, inverse = torch.unique(rows, dim=0, return_inverse=True)
    if shared == 0 and len(unique) == len(rows):
        return None
    u_ids, u_mask = unique[:, : ids.shape[1]], unique[:, ids.shape[1] :]
    cache = None
    if shared:
        regions = torch.cat([u_ids[:, :shared], u_mask[:, :shared]], dim=1)
        prefixes, to_prefix = torch.unique(regions, dim=0, return_inverse=True)
        p_ids, p_mask = prefixes[:, :shared], prefixes[:, shared:]
        cache = body(
            input_ids=p_ids, attention_mask=p_mask, position_ids=positions(p_mask), use_cache=True
        ).past_key_values
        cache.batch_select_indices(to_prefix)
    out = body(
        input_ids=u_ids[:, shared:],
        attention_mask=u_mask,
        position_ids=positions(u_mask)[:, shared:],
        past_key_values=cache,
        use_cache=True,
    )
    cache = out.past_key_values
    inverse = inverse.to(ids.device)
    cache.batch_select_indices(inverse)
    return cache, out.last_hidden_state[inverse, -1]
