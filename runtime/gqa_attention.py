"""Grouped-query attention without copying the KV cache, for batched (padded) generation.

transformers' SDPA path uses ``enable_gqa`` only when there is no attention mask. A batch of
left-padded prompts always has one, so every layer of every decode step expands the cached keys
and values from the KV heads to all query heads (``repeat_kv``): a copy of the whole cache,
batch x length, per layer per step. On CPU that copy, not the matmuls, dominates batched
decoding (measured on SmolLM2-135M, batch 32: about 2/3 of a decode step), which is what made
batching scale badly.

The same attention can be computed without the copy: the ``n_rep`` query heads that share one
KV head are laid out as ``n_rep * q_len`` query rows of that KV head, and the mask rows are
repeated to match (a boolean mask, cheap). Every (head, query) pair still attends to exactly
the same keys with exactly the same mask, so the result is the same attention; only the kernel's
blocking differs. Without a mask (one unpadded sequence) the standard SDPA path is used.

:func:`install` registers it with transformers' attention interface and switches a loaded
model to it; :func:`use_attention` is how ``pasr eval --backend hf`` and the local engine
choose (``--attention`` / ``model.attention``, grouped by default).
"""

from __future__ import annotations

NAME = "pasr_sdpa_grouped"
ATTENTIONS = ("grouped", "sdpa")  # what the local engine and `pasr eval --backend hf` accept


def grouped_sdpa_forward(
    module, query, key, value, attention_mask, dropout=0.0, scaling=None, is_causal=None, **kwargs
):
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    n_rep = int(getattr(module, "num_key_value_groups", 1) or 1)
    if (
        n_rep == 1
        or attention_mask is None
        or attention_mask.dim() != 4
        or attention_mask.shape[1] != 1
        or dropout
        or kwargs.get("output_attentions", False)
    ):
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, is_causal=is_causal, **kwargs
        )
    b, h, q, d = query.shape
    kv_heads = key.shape[1]
    grouped_q = query.reshape(b, kv_heads, n_rep * q, d)  # head k*n_rep+r, position i -> row r*q+i
    mb, _, mq, ml = attention_mask.shape
    mask = attention_mask[:, :, None].expand(mb, 1, n_rep, mq, ml).reshape(mb, 1, n_rep * mq, ml)
    out = torch.nn.functional.scaled_dot_product_attention(grouped_q, key, value, attn_mask=mask, scale=scaling)
    out = out.reshape(b, h, q, d).transpose(1, 2).contiguous()
    return out, None


def register() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(NAME, grouped_sdpa_forward)
    AttentionMaskInterface.register(NAME, sdpa_mask)


def install(model) -> bool:
    """Switch ``model`` to grouped SDPA when it uses SDPA with grouped KV heads; True if done."""
    config = model.config
    heads = getattr(config, "num_attention_heads", None)
    kv_heads = getattr(config, "num_key_value_heads", None)
    if getattr(config, "_attn_implementation", None) != "sdpa" or not heads or not kv_heads or heads == kv_heads:
        return False
    try:
        register()
        model.set_attn_implementation(NAME)
    except (ValueError, TypeError, ImportError, AttributeError):
        return False
    return getattr(model.config, "_attn_implementation", None) == NAME


def use_attention(model, attention: str) -> str:
    """Switch a loaded model to ``attention`` (one of :data:`ATTENTIONS`) and say what it runs
    now: ``grouped`` where the model uses SDPA with grouped KV heads (else it keeps its own),
    ``sdpa`` switches a grouped model back to transformers' SDPA."""
    if attention == "grouped":
        install(model)
    elif model.config._attn_implementation == NAME:
        model.set_attn_implementation("sdpa")
    implementation = model.config._attn_implementation
    return "grouped" if implementation == NAME else implementation
