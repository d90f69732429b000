"""Batched transformers generation shared by the local engine and ``pasr eval --backend hf``.

Prompts are rendered with the tokenizer's chat template, sorted by length and cut into
batches so a batch is not padded to one long outlier; each batch is padded after the prefixes
its prompts share (the template and system prompt), prefilled with each such prefix and each
distinct prompt run once (:mod:`runtime.prompt_prefill`), and generated with the KV cache. What
comes back keeps the **sampled token ids** (EOS included when the model stopped), because the
local engine trains on exactly those tokens: the reference code decoded and re-tokenised text
and never trained the stop token.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from runtime import prompt_prefill
from runtime.context_length import check_prompts
from runtime.decoding import decode_response  # the one decoder of every engine
from runtime.prompt_prefill import pad_around_prefixes, shared_prefixes
from runtime.sampling import sampling_processors


@dataclass
class SamplingParams:
    max_new_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    do_sample: bool = True  # False = greedy

    def generate_kwargs(self) -> dict:
        """``generate``'s arguments. Sampling runs in its greedy mode behind logits processors
        that draw the token (:mod:`runtime.sampling`): the same distribution as its sampling
        mode, without ``torch.multinomial``'s draw per vocabulary entry."""
        greedy = {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
        if not self.do_sample or self.temperature <= 0:
            return greedy
        return {**greedy, "logits_processor": sampling_processors(self.temperature, self.top_p)}


@dataclass
class Generation:
    prompt_ids: list[int]
    response_ids: list[int]  # the sampled tokens, EOS included when finish_reason == "stop"
    text: str  # prefill + decoded response (special tokens skipped)
    finish_reason: str  # stop | length
    prefill: str = ""

    @property
    def n_tokens(self) -> int:
        return len(self.response_ids)


def render_prompts(tokenizer, chats: Sequence[Sequence[dict]], prefill: str = "") -> list[list[int]]:
    """Token ids of each chat with the generation prompt (and an optional assistant prefill,
    e.g. ``<think>`` as a cold-start aid) appended."""
    out = []
    for chat in chats:
        text = tokenizer.apply_chat_template(list(chat), tokenize=False, add_generation_prompt=True)
        out.append(tokenizer(text + prefill, add_special_tokens=False)["input_ids"])
    return out


def length_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Indices grouped into batches of similar prompt length (longest first)."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def prompt_cache(model, ids: torch.Tensor, mask: torch.Tensor, shared: int):
    """The KV cache of every prompt but its last token (``generate`` runs that one), with each
    distinct prefix (the first ``shared`` columns) and each distinct prompt prefilled once
    (:func:`runtime.prompt_prefill.prefill`); None when nothing is shared or repeated
    (``generate`` prefills the batch as it is).

    A PASR step samples each query's refine prompt ``n_refine`` times and its plain prompt
    ``n_plain`` times in one batch, and every prompt starts with the same template and system
    prompt (about half its tokens): on CPU the prompt's forward pass (compute-bound) costs as
    much as tens of decode steps. Positions follow the mask as ``generate`` computes them, so
    each row's tokens see exactly the keys and values an unshared prefill would give them.
    """
    if ids.shape[1] < 2:
        return None
    body, ids, mask = prompt_prefill.decoder(model), ids[:, :-1], mask[:, :-1]
    if ids.shape[1] <= shared:  # each row's last token comes right after its prefix: the prefix region is all there is
        shared = 0
    out = prompt_prefill.prefill(body, ids, mask, shared)
    return None if out is None else out[0]


def _cut_at_eos(tokens: list[int], eos_ids: set[int]) -> tuple[list[int], str]:
    for i, t in enumerate(tokens):
        if t in eos_ids:
            return tokens[: i + 1], "stop"
    return tokens, "length"


def eos_token_ids(model, tokenizer) -> set[int]:
    ids = set()
    for src in (getattr(model.generation_config, "eos_token_id", None), tokenizer.eos_token_id):
        if isinstance(src, int):
            ids.add(src)
        elif src:
            ids.update(src)
    return ids


# New tokens between two checks for finished rows: each check is a new ``generate`` call (its
# set-up and a copy of the cache), each token past a row's stop a forward pass of that row. 8 made
# a PASR step's sampled generation 11% faster than 16 from the default setup's 160-step warm-up
# (its rows stop after about 30 tokens) and 2% from a 60-step demo warm-up (about 50); 4 and 2
# gained nothing more (one thread of the 2-core AMD EPYC, fp32, 2026-11-27).
DROP_EVERY = 8


def _generate_dropping_finished(
    model,
    ids,
    mask,
    cache,
    params: SamplingParams,
    eos: set[int],
    pad_id: int,
    on_finished=None,
    room: Sequence[int] | None = None,
) -> list[list[int]]:
    """The new tokens of each row, generated ``DROP_EVERY`` tokens at a time by ``model.generate``;
    rows that have stopped are dropped (with their KV cache) between two calls.

    A batch generates until its longest row stops, and every row costs a forward pass per new
    token until then: in a PASR step plain answers stop after about 20 tokens, refining ones
    after 60-90, so one call spent about half its compute on rows that had already stopped.
    Each call continues from the cache of the last (``generate`` runs only the tokens the cache
    lacks); greedy rows get exactly the tokens one call would give them, sampled rows the same
    distribution (the random draws are spread over fewer rows once some have stopped).
    ``on_finished(n)`` hears of the rows that stopped in each call, so a progress bar moves with
    the sequences rather than sitting still until the whole batch is done. ``room``: the new
    tokens each row has before the end of the model's context; a row that reaches it stops
    there (``length``), and no call runs any row past it.
    """
    new: list[list[int]] = [[] for _ in range(ids.shape[0])]
    alive = list(range(ids.shape[0]))
    limit = [min(params.max_new_tokens, r) for r in room] if room is not None else [params.max_new_tokens] * len(alive)
    made = 0  # new tokens so far of every row still alive
    while alive:
        step = min(DROP_EVERY, min(limit[i] for i in alive) - made)
        if step <= 0:
            break
        out = model.generate(
            input_ids=ids,
            attention_mask=mask,
            **({"past_key_values": cache} if cache is not None else {}),
            max_new_tokens=step,
            eos_token_id=sorted(eos),
            pad_token_id=pad_id,
            return_dict_in_generate=True,
            **params.generate_kwargs(),
        )
        chunk = out.sequences[:, ids.shape[1] :]
        made += chunk.shape[1]
        keep = []
        for row, tokens in enumerate(chunk.tolist()):
            tokens, finish = _cut_at_eos(tokens, eos)
            new[alive[row]] += tokens
            if finish == "length" and made < limit[alive[row]]:
                keep.append(row)
        if on_finished is not None:
            on_finished(len(alive) - len(keep))
        if not keep:
            break
        cache = out.past_key_values
        if len(keep) < len(alive):
            index = torch.tensor(keep, device=ids.device)
            cache.batch_select_indices(index)
            ids, mask, chunk = ids[index], mask[index], chunk[index]
            alive = [alive[row] for row in keep]
        ids = torch.cat([ids, chunk], dim=1)
        mask = torch.cat([mask, torch.ones_like(chunk)], dim=1)
    return new


@torch.no_grad()
def generate_ids(
    model,
    tokenizer,
    prompt_ids: Sequence[list[int]],
    params: SamplingParams,
    batch_size: int = 16,
    generator_seed: int | None = None,
    on_batch=None,
    on_finished=None,
    context: int | None = None,
) -> list[tuple[list[int], str]]:
    """(response_ids, finish_reason) for each prompt, in input order. ``on_batch(rows, tokens)``
    after each batch; ``on_finished(n)`` as rows stop (for progress bars). ``context``: the
    model's context length (:mod:`runtime.context_length`): a prompt that fills it is a
    ``ContextLengthError`` before anything is generated, and a response stops (``length``) at
    its end; None: neither."""
    check_prompts([len(p) for p in prompt_ids], context)
    if generator_seed is not None:
        torch.manual_seed(generator_seed)
    eos = eos_token_ids(model, tokenizer)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else next(iter(eos))
    results: list[tuple[list[int], str] | None] = [None] * len(prompt_ids)
    for batch in length_batches([len(p) for p in prompt_ids], batch_size):
        rows = [list(prompt_ids[i]) for i in batch]
        shared = shared_prefixes(rows)
        ids, mask = pad_around_prefixes(rows, pad_id, shared)
        ids, mask = ids.to(model.device), mask.to(model.device)
        cache = prompt_cache(model, ids, mask, max(shared))
        room = [context - len(r) for r in rows] if context is not None else None
        new = _generate_dropping_finished(model, ids, mask, cache, params, eos, pad_id, on_finished, room)
        for row, i in enumerate(batch):
            results[i] = _cut_at_eos(new[row], eos)
        if on_batch is not None:
            on_batch(len(batch), sum(len(results[i][0]) for i in batch))
    return results  # type: ignore[return-value]


def generate_chats(
    model,
    tokenizer,
    chats: Sequence[Sequence[dict]],
    params: SamplingParams,
    batch_size: int = 16,
    prefill: str = "",
    on_batch=None,
    on_finished=None,
    context: int | None = None,
) -> list[Generation]:
    """Generate one response per chat (repeat a chat in ``chats`` for several samples);
    ``context`` as for :func:`generate_ids`."""
    prompts = render_prompts(tokenizer, chats, prefill)
    raw = generate_ids(
        model,
        tokenizer,
        prompts,
        params,
        batch_size=batch_size,
        on_batch=on_batch,
        on_finished=on_finished,
        context=context,
    )
    return [Generation(p, r, decode_response(tokenizer, r, prefill), fr, prefill) for p, (r, fr) in zip(prompts, raw)]
