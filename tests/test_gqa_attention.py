"""Grouped-query attention (:mod:`runtime.gqa_attention`): the same output as transformers' SDPA
with left padding and causality, and (slow) the same greedy text from the hf backend."""

from __future__ import annotations

import types

import pytest

from eval.backends import GenParams


@pytest.mark.parametrize("q_len", [1, 5])
def test_grouped_attention_matches_sdpa(q_len):
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from runtime.gqa_attention import grouped_sdpa_forward

    torch.manual_seed(0)
    b, kv_heads, n_rep, length, d = 3, 2, 3, 9, 8
    module = types.SimpleNamespace(num_key_value_groups=n_rep, is_causal=True)
    query = torch.randn(b, kv_heads * n_rep, q_len, d)
    key, value = torch.randn(b, kv_heads, length, d), torch.randn(b, kv_heads, length, d)
    # left padding (row 1 has 3 pad slots, row 2 has 1) plus causality over the last q_len positions
    pad = torch.tensor([0, 3, 1])
    kv_pos = torch.arange(length)
    q_pos = torch.arange(length - q_len, length)
    mask = (kv_pos[None, None, :] >= pad[:, None, None]) & (kv_pos[None, None, :] <= q_pos[None, :, None])
    mask = mask[:, None]  # [b, 1, q, length]
    ref, _ = sdpa_attention_forward(module, query, key, value, mask, scaling=d**-0.5)
    out, _ = grouped_sdpa_forward(module, query, key, value, mask, scaling=d**-0.5)
    assert out.shape == ref.shape == (b, q_len, kv_heads * n_rep, d)
    assert torch.allclose(out, ref, atol=1e-5)
    # no mask: the standard path
    ref, _ = sdpa_attention_forward(module, query, key, value, None, scaling=d**-0.5)
    out, _ = grouped_sdpa_forward(module, query, key, value, None, scaling=d**-0.5)
    assert torch.allclose(out, ref, atol=1e-6)


@pytest.mark.slow
def test_hf_grouped_attention_same_greedy_text(data_env):
    from data.loaders import load_examples
    from eval.backends import HFBackend
    from prompts import PromptSet

    chats = [PromptSet.load().plain_chat(ex.question) for ex in load_examples("gsm8k", limit=3)]
    params = GenParams(max_new_tokens=12, temperature=0.0)
    grouped = HFBackend("smollm2", batch_size=3, threads=1)
    grouped.load()
    assert grouped.model.config._attn_implementation == "pasr_sdpa_grouped"
    stock = HFBackend("smollm2", batch_size=3, threads=1, attention="sdpa")
    stock.load()
    a, b = grouped.generate(chats, params), stock.generate(chats, params)
    assert [(x.text, x.n_tokens) for x in a] == [(y.text, y.n_tokens) for y in b]
