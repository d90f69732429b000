"""The shared-prefix prefill (runtime.prompt_prefill): which prefix it shares, how it lays rows
out, and that running shared pieces once gives every row the same hidden states, keys and
gradients as running each row whole."""

from __future__ import annotations

import pytest

from runtime.prompt_prefill import pad_around_prefixes, positions, prefill, prefill_tokens, shared_prefixes


def test_the_prefixes_that_save_most_tokens_are_chosen():
    a, b = [1, 2, 3, 4, 5, 6], [1, 2, 7, 8, 9, 10]
    # two system prompts of 6 tokens, two questions each: 6 saves (4 - 2) * 6, 2 saves (4 - 1) * 2
    assert shared_prefixes([a + [20], a + [21, 22], b + [23], b + [24]]) == [6, 6, 6, 6]
    # one system prompt: all of it, capped so the shortest row keeps a token after it
    assert shared_prefixes([a + [20], a + [21, 22, 23]]) == [6, 6]
    assert shared_prefixes([a, a + [7, 8]]) == [5, 5]
    # nothing in common, or a single distinct row (repeats are handled by deduplication)
    assert shared_prefixes([[1, 2], [3, 4]]) == [0, 0]
    assert shared_prefixes([a, a, a]) == [0, 0, 0]
    # a long and a short system prompt starting alike (the refine and plain prompts): across the
    # batch only [1, 2] is common, but each group shares its whole system prompt
    long, short = [1, 2, 3, 4, 5, 6, 7, 8, 9], [1, 2, 11, 12]
    rows = [long + [20, 21], long + [22, 23], long + [24, 25], short + [26, 27], short + [28, 29], short + [30, 31]]
    shared = shared_prefixes(rows)
    assert shared == [9, 9, 9, 4, 4, 4]
    assert prefill_tokens(rows, shared) == 2 * 9 + 6 * 2 < prefill_tokens(rows, [4] * 6) == 2 * 4 + 6 * 7


def test_prefixes_and_rests_are_padded_apart_and_positions_follow_the_mask():
    ids, mask = pad_around_prefixes([[1, 2, 3], [1, 2, 4, 5, 6]], 0, [2, 2])
    assert ids.tolist() == [[1, 2, 0, 0, 3], [1, 2, 4, 5, 6]]
    assert mask.tolist() == [[1, 1, 0, 0, 1], [1, 1, 1, 1, 1]]
    assert positions(mask).tolist() == [[0, 1, 1, 1, 2], [0, 1, 2, 3, 4]]  # as a left-padded row's
    ids, mask = pad_around_prefixes([[1, 2, 3, 4, 5], [1, 6, 7, 8]], 0, [3, 1])
    assert ids.tolist() == [[1, 2, 3, 0, 4, 5], [0, 0, 1, 6, 7, 8]]
    assert positions(mask).tolist() == [[0, 1, 2, 1, 3, 4], [1, 1, 0, 1, 2, 3]]
    left, left_mask = pad_around_prefixes([[1, 2, 3], [1, 2, 4, 5, 6]], 0, [0, 0])
    assert left.tolist() == [[0, 0, 1, 2, 3], [1, 2, 4, 5, 6]] and left_mask[0].tolist() == [0, 0, 1, 1, 1]


@pytest.mark.parametrize("attention", ["sdpa", "grouped"])
def test_prefill_gives_each_row_what_running_it_alone_gives(tiny_model_dir, attention):
    """Hidden state of every row's last token, its cached keys, and the gradient of a loss on
    them: equal (to fp32 rounding) whether shared pieces run once or each row runs whole."""
    import torch
    from transformers import AutoModelForCausalLM

    from runtime.gqa_attention import use_attention

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert use_attention(model, attention) == attention
    body = model.get_decoder()
    sys_a, sys_b = [5, 6, 7, 8, 9, 14, 15], [5, 6, 11, 12, 13]
    rows = [sys_a + [20, 21], sys_a + [20, 21], sys_a + [22], sys_b + [23, 24, 25], sys_b + [26, 27], [40, 41, 42]]
    # each system prompt its own prefix; the last row shares nothing: its prefix region is all padding
    ids, mask = pad_around_prefixes(rows, 0, [7, 7, 7, 5, 5, 0])
    shared = 7

    def grads(loss):
        model.zero_grad(set_to_none=True)
        loss.backward()
        return [p.grad.clone() for p in body.parameters() if p.grad is not None]

    cache, last = prefill(body, ids, mask, shared)
    keys = cache.layers[-1].keys
    real_keys = keys * mask[:, None, :, None]  # padding columns hold keys nobody attends to
    g_shared = grads(last.pow(2).sum() + real_keys.pow(2).sum())
    alone_last, alone_keys = [], []
    for r in rows:
        out = body(input_ids=torch.tensor([r]), use_cache=True)
        alone_last.append(out.last_hidden_state[0, -1])
        alone_keys.append(out.past_key_values.layers[-1].keys[0])
    g_alone = grads(sum(h.pow(2).sum() for h in alone_last) + sum(k.pow(2).sum() for k in alone_keys))
    torch.testing.assert_close(last, torch.stack(alone_last), rtol=1e-4, atol=1e-5)
    for i, _r in enumerate(rows):
        real = mask[i].bool()
        torch.testing.assert_close(keys[i][:, real], alone_keys[i], rtol=1e-4, atol=1e-5)
    assert len(g_shared) == len(g_alone)
    for a, b in zip(g_shared, g_alone):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-4)
    with pytest.raises(ValueError, match="nothing after the shared prefix"):
        prefill(body, ids[:, :shared], mask[:, :shared], shared)
    distinct, distinct_mask = pad_around_prefixes([[5, 6], [7, 8, 9]], 0, [0, 0])
    assert prefill(body, distinct, distinct_mask, 0) is None
