"""Sampled decoding with one uniform draw per row: the same distribution as transformers'
sampling, without ``torch.multinomial``'s cost on CPU.

**Why.** transformers ends every sampled decode step in ``torch.multinomial(probs, 1)``, which
on CPU draws one exponential per vocabulary entry (49k for SmolLM2) for every row. In a PASR
step that was the largest single cost of generation after the matmuls (23% of a sampled step's
profile, docs/results/step_floors.md): 36.9 ms of a 48-row decode step, where drawing the token
by the inverse of its cumulative distribution (one cumulative sum, one uniform per row, one
binary search) takes 6.5 ms with the temperature, and a PASR step's generation ran 1.14x faster
(``python -m benchmarks.sampler_speed``, one thread of a 2-core AMD EPYC).

**How.** :func:`sampling_processors` is what ``generate`` gets instead of ``do_sample=True``:
transformers' own temperature and top-p warpers (the same ones its sampling mode builds), then
:class:`InverseCdfSampler`, which draws the token and leaves only it finite, so ``generate``'s
greedy mode (an argmax) picks exactly the drawn token. The draw uses torch's global generator,
as ``multinomial`` did, so ``torch.manual_seed`` still makes a run repeat itself (the tokens
differ from ``multinomial``'s for the same seed; their distribution does not).
"""

from __future__ import annotations

import torch
from transformers import LogitsProcessor, LogitsProcessorList, TemperatureLogitsWarper, TopPLogitsWarper


class InverseCdfSampler(LogitsProcessor):
    """Draw one token per row from ``softmax(scores)`` and return scores where only it is finite.

    Works in place on ``scores`` (generate hands each decode step a fresh float32 copy, and the
    temperature warper before this makes another): on CPU a new tensor of ``rows x vocabulary``
    costs its page faults, about as much as the arithmetic. The cumulative sum of
    ``exp(scores - max)`` runs in float32 (torch's CPU kernel accumulates in float64), so each
    token's interval is exact to about 1e-7 of the total; a token whose probability is zero has
    an empty interval and is never drawn (``searchsorted`` with ``right=True`` skips it)."""

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        cdf = scores.sub_(scores.amax(dim=-1, keepdim=True)).exp_().cumsum_(dim=-1)
        total = cdf[:, -1:]
        # u * total can round up to the total itself (odds about 1e-7 a row): the largest float
        # below it still falls in the last token of positive probability, never past it
        u = torch.minimum(
            torch.rand(total.shape, device=cdf.device, dtype=cdf.dtype) * total,
            torch.nextafter(total, torch.zeros_like(total)),
        )
        token = torch.searchsorted(cdf, u, right=True)
        return cdf.fill_(float("-inf")).scatter_(1, token, 0.0)


def sampling_processors(temperature: float, top_p: float = 1.0) -> LogitsProcessorList:
    """The logits processors that make ``generate(do_sample=False, ...)`` sample at
    ``temperature`` from the top-``top_p`` nucleus (transformers' own warpers, then
    :class:`InverseCdfSampler`)."""
    if not temperature > 0:
        raise ValueError(f"sampling needs a temperature > 0, got {temperature}")
    processors: list[LogitsProcessor] = [TemperatureLogitsWarper(temperature)]
    if top_p < 1.0:
        processors.append(TopPLogitsWarper(top_p))
    processors.append(InverseCdfSampler())
    return LogitsProcessorList(processors)
