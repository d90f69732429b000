"""Sampling by inverse CDF (runtime/sampling.py): the distribution transformers' sampling mode
draws from, temperature and top-p included, through ``generate``'s greedy mode."""

from __future__ import annotations

import pytest
import torch
from transformers import LogitsProcessorList

from runtime.sampling import InverseCdfSampler, sampling_processors


def _draw(processors, logits: torch.Tensor, n: int) -> torch.Tensor:
    scores = processors(None, logits.expand(n, -1).clone())
    assert torch.isfinite(scores).sum(dim=-1).eq(1).all()  # one token left per row
    return scores.argmax(dim=-1)


def _frequencies(tokens: torch.Tensor, vocab: int) -> torch.Tensor:
    return torch.bincount(tokens, minlength=vocab).double() / len(tokens)


def test_draws_follow_the_tempered_softmax():
    torch.manual_seed(0)
    logits = torch.tensor([[2.0, 1.0, 0.5, 0.0, -1.0, -3.0]])
    n = 200_000
    for temperature in (1.0, 0.6):
        want = torch.softmax(logits[0].double() / temperature, dim=-1)
        got = _frequencies(_draw(sampling_processors(temperature), logits, n), 6)
        # binomial standard error is at most 0.0011 here: 5 of them
        assert torch.allclose(got, want, atol=0.0056), (temperature, got, want)


def test_top_p_keeps_the_nucleus_and_renormalises_it():
    torch.manual_seed(1)
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    got = _frequencies(_draw(sampling_processors(1.0, top_p=0.8), logits, 100_000), 4)
    assert got[2:].sum() == 0  # outside the 0.8 nucleus: never drawn
    assert got[0] == pytest.approx(0.5 / 0.8, abs=0.007) and got[1] == pytest.approx(0.3 / 0.8, abs=0.007)


def test_a_token_of_zero_probability_is_never_drawn(monkeypatch):
    logits = torch.tensor([[0.0, float("-inf"), 1.0, float("-inf")]])
    torch.manual_seed(2)
    assert set(_draw(sampling_processors(0.9), logits, 20_000).tolist()) == {0, 2}
    # a uniform that rounds up to the whole mass (u * total == total) takes the last token of
    # positive probability, not the last, impossible, one
    monkeypatch.setattr(torch, "rand", lambda shape, **kw: torch.ones(shape, **kw))
    assert _draw(LogitsProcessorList([InverseCdfSampler()]), logits, 3).tolist() == [2, 2, 2]
    monkeypatch.setattr(torch, "rand", lambda shape, **kw: torch.zeros(shape, **kw))
    assert _draw(LogitsProcessorList([InverseCdfSampler()]), logits, 3).tolist() == [0, 0, 0]


def test_a_temperature_that_is_not_positive_is_refused():
    with pytest.raises(ValueError, match="temperature"):
        sampling_processors(0.0)


def test_generate_samples_repeatably_and_near_greedy_at_a_tiny_temperature(tiny):
    """Through the local engine's generation: the sampler runs in ``generate``'s greedy mode, a
    seed repeats a draw, another seed changes it, and a temperature near 0 gives the greedy
    tokens."""
    from runtime.hf_generate import SamplingParams, generate_ids

    model, tok = tiny
    prompts = [[5, 6, 7, 8], [9, 10], [11, 12, 13]] * 2
    kwargs = SamplingParams(10, temperature=0.9).generate_kwargs()
    assert kwargs["do_sample"] is False and isinstance(kwargs["logits_processor"][-1], InverseCdfSampler)

    def sampled(seed: int, temperature: float = 1.0):
        torch.manual_seed(seed)
        return generate_ids(model, tok, prompts, SamplingParams(10, temperature=temperature), batch_size=8)

    assert sampled(3) == sampled(3)
    assert sampled(3) != sampled(4)
    greedy = generate_ids(model, tok, prompts, SamplingParams(10, do_sample=False), batch_size=8)
    assert sampled(5, temperature=1e-4) == greedy
