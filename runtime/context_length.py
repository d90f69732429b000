"""A model's context length: the positions it has (``max_position_embeddings`` in its
``config.json``), and the one-line errors for what does not fit in it.

A prompt longer than the context cannot be answered (a learned position table has no row for
it; rotary positions past the trained range give text that means nothing), and generating past
the context's end is the same. :func:`runtime.hf_generate.generate_ids` refuses the first
(:func:`check_prompts`) and stops a row with ``length`` at the second; ``pasr eval`` refuses a
``--max-new-tokens`` that leaves no room for any prompt (:func:`check_new_tokens`) before it
generates anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# where transformers' configs keep the context length (Llama/Qwen/Mistral; GPT-2; BLOOM-like; a few others)
CONFIG_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")


class ContextLengthError(ValueError):
    """A prompt or a generation limit that does not fit the model's context; one line."""


def context_length(config: Any) -> int | None:
    """The context length a model config (a transformers ``PretrainedConfig`` or a dict of
    ``config.json``) states, or None when it states none (no limit is then enforced)."""
    for key in CONFIG_KEYS:
        value = config.get(key) if isinstance(config, dict) else getattr(config, key, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def check_new_tokens(max_new_tokens: int, context: int | None, flag: str = "--max-new-tokens") -> None:
    """A :class:`ContextLengthError` when ``max_new_tokens`` leaves no room in the context for
    even a one-token prompt."""
    if context is not None and max_new_tokens >= context:
        raise ContextLengthError(
            f"{flag} {max_new_tokens} does not fit the model's context of {context} positions "
            f"(max_position_embeddings in its config.json) with any prompt: use at most {context - 1}, "
            "less the prompt's length"
        )


def check_prompts(lengths: Sequence[int], context: int | None) -> None:
    """A :class:`ContextLengthError` naming the longest prompt when any of ``lengths`` (tokens)
    fills the context, leaving no position to generate from."""
    if context is None or not lengths:
        return
    longest = max(lengths)
    if longest >= context:
        over = sum(n >= context for n in lengths)
        others = f"; {over} prompts of this batch do not" if over > 1 else ""
        raise ContextLengthError(
            f"a prompt of {longest} tokens does not fit the model's context of {context} positions "
            f"(max_position_embeddings in its config.json), so it cannot be answered{others}"
        )
