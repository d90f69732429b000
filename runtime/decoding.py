"""The one decoder of every engine and of ``pasr eval``: a response's token ids to its text.

It lives in the model runtime (below the engines and ``eval/``) because
:func:`runtime.hf_generate.generate_chats` decodes with it; :mod:`recipe.scoring` judges what it
returns."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from rewards.format import TAG_NAMES

PASR_TAGS = tuple(f"<{n}>" for n in TAG_NAMES) + tuple(f"</{n}>" for n in TAG_NAMES)


@lru_cache(maxsize=8)
def _dropped_ids(tokenizer) -> frozenset[int]:
    keep = set()
    for tag in PASR_TAGS:
        tid = tokenizer.convert_tokens_to_ids(tag)
        if isinstance(tid, int) and tid != tokenizer.unk_token_id:
            keep.add(tid)
    return frozenset(tokenizer.all_special_ids) - keep


def decode_response(tokenizer, ids: Sequence[int], prefill: str = "") -> str:
    """The text of a response's token ids, as every engine must read it: special tokens
    (padding, EOS, chat markers) dropped, PASR's tags kept even where a tokenizer registers them
    as special tokens (``skip_special_tokens=True`` would drop them and fail the format). For
    SmolLM2 the tags are plain text and this equals ``skip_special_tokens=True``. ``prefill``:
    the assistant text the prompt ended with (``prompts.THINK_PREFILL``), put back in front:
    the response the reward reads is what the model answered, prefill included."""
    dropped = _dropped_ids(tokenizer)
    return prefill + tokenizer.decode([t for t in ids if t not in dropped], skip_special_tokens=False)
