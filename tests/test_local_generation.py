"""The local engine's rollouts on the tiny model: finished rows leave the batch with the same
tokens, a step's rollout layout, shared prompt prefixes and repeated prompts prefilled once, and
the trainer's grouped-query attention and evaluation batch size."""

from __future__ import annotations

import pytest
import torch

from recipe.local_engine.config import load_config
from recipe.local_engine.logprobs import pack, response_logprobs
from recipe.pasr_config import ConfigError


def test_finished_rows_are_dropped_between_calls_with_the_same_tokens(tiny, monkeypatch):
    """Rows that stopped leave the batch between two generate calls; every row keeps exactly the
    greedy tokens of one call over the whole batch (rows stopping at different points, one not
    stopping at all, prompts of other lengths)."""
    import runtime.hf_generate as hf
    from runtime.hf_generate import SamplingParams, generate_ids

    model, tok = tiny
    prompts = [[5, 6, 7, 8], [9, 10], [11, 12, 13], [14, 15, 16, 17, 18], [19, 20]]
    greedy = SamplingParams(12, do_sample=False)
    free = generate_ids(model, tok, prompts, greedy, batch_size=8)
    # the random tiny model rarely says EOS: make tokens it does say stop some rows early
    stops = {free[0][0][1], free[2][0][6]} - set(free[4][0])
    assert stops, "need a stop token that row 4 never says"
    monkeypatch.setattr(hf, "eos_token_ids", lambda m, t: stops)
    batch_sizes = []
    real_generate = type(model).generate

    def counting_generate(self, *args, **kwargs):
        batch_sizes.append(kwargs["input_ids"].shape[0])
        return real_generate(self, *args, **kwargs)

    monkeypatch.setattr(type(model), "generate", counting_generate)
    monkeypatch.setattr(hf, "DROP_EVERY", 3)
    ticks: list[int] = []
    dropped = generate_ids(model, tok, prompts, greedy, batch_size=8, on_finished=ticks.append)
    monkeypatch.setattr(hf, "DROP_EVERY", 100)
    one_call = generate_ids(model, tok, prompts, greedy, batch_size=8)
    assert dropped == one_call
    assert any(f == "stop" for _, f in dropped) and dropped[4][1] == "length" and len(dropped[4][0]) == 12
    assert batch_sizes[0] == 5 and batch_sizes[-2] < 5 and batch_sizes[-1] == 5  # rows left the batch
    # progress: every row reported once, the first ones before the batch was done
    assert sum(ticks) == len(prompts) and next(t for t in ticks if t) < len(prompts)


def test_generate_step_layout(tiny):
    from data.examples import Example
    from prompts import PromptSet
    from recipe.local_engine.rollout import generate_step
    from runtime.hf_generate import SamplingParams

    model, tok = tiny
    qs = [Example("a", "synthetic", "1+1?", "2"), Example("b", "synthetic", "2+2?", "4")]
    gens = generate_step(
        model,
        tok,
        qs,
        PromptSet.load("refine_system_short", "plain_system_short"),
        3,
        2,
        SamplingParams(max_new_tokens=6),
        batch_size=4,
        prefill_think=True,
    )
    assert [(g.rollout.query_id, g.rollout.variant) for g in gens] == (
        [("a", "refine")] * 3 + [("a", "plain")] * 2 + [("b", "refine")] * 3 + [("b", "plain")] * 2
    )
    for g in gens:
        assert g.rollout.n_tokens == len(g.response_ids) <= 6
        # both prompts ask for <think>…</think><answer>…</answer>, so both get the prefill
        assert g.rollout.text.startswith("<think>")
        assert tok.decode(g.prompt_ids).endswith("<think>")
        if g.rollout.finish_reason == "stop":
            assert g.response_ids[-1] == tok.eos_token_id


def test_shared_prefixes_and_repeated_prompts_are_prefilled_once_and_generate_the_same(tiny, monkeypatch):
    """A batch's shared prompt prefix (two "system prompts" here) and its repeated prompts are
    prefilled once each; every row generates exactly what an ordinary left-padded prefill gives
    it (greedy, and sampled from the same seed), prompts of different lengths included."""
    import torch

    import runtime.hf_generate as hf
    from runtime import prompt_prefill
    from runtime.hf_generate import SamplingParams, generate_ids

    model, tok = tiny
    sys_a, sys_b = [5, 6, 7, 8, 9, 10], [5, 6, 11, 12, 13, 14]
    prompts = [
        sys_a + [20, 21],
        sys_a + [20, 21],
        sys_a + [22],
        sys_b + [23, 24, 25],
        sys_b + [23, 24, 25],
        sys_b + [26, 27],
    ]
    prefilled = []
    real_prefill = prompt_prefill.prefill

    def counting(body, ids, mask, shared):
        prefilled.append((len(ids), shared))
        return real_prefill(body, ids, mask, shared)

    monkeypatch.setattr(prompt_prefill, "prefill", counting)
    real_cache = hf.prompt_cache
    outs = {}
    for shared in (True, False):
        if not shared:  # the ordinary path: left padding, generate prefills every row
            monkeypatch.setattr(hf, "shared_prefixes", lambda rows: [0] * len(rows))
            monkeypatch.setattr(hf, "prompt_cache", lambda *a: None)
        greedy = generate_ids(model, tok, prompts, SamplingParams(8, do_sample=False), batch_size=8)
        torch.manual_seed(3)
        sampled = generate_ids(model, tok, prompts, SamplingParams(8, temperature=1.0), batch_size=8)
        outs[shared] = (greedy, sampled)
    assert outs[True] == outs[False]
    assert prefilled == [(6, 6), (6, 6)]  # each system prompt once, then the rest of each distinct prompt once
    ids, mask = prompt_prefill.pad_around_prefixes(prompts, tok.pad_token_id, [6] * len(prompts))
    cache = real_cache(model, ids, mask, 6)
    assert cache.get_seq_length() == ids.shape[1] - 1 and cache.layers[0].keys.shape[0] == len(prompts)
    distinct = prompt_prefill.pad_around_prefixes([[5, 6, 7], [9, 10, 11]], tok.pad_token_id, [0, 0])
    assert real_cache(model, *distinct, 0) is None  # nothing shared or repeated: generate prefills as usual


def test_trainer_uses_grouped_attention_and_wide_eval_batches(tiny_model_dir, tmp_path, monkeypatch):
    """model.attention=grouped (the default) switches the policy to the copy-free grouped-query
    attention with the same greedy tokens and log-probs as transformers' SDPA; evaluations
    generate in rollout.eval_batch_size batches, training steps in rollout.gen_batch_size."""
    import copy

    import recipe.local_engine.rollout as rollout_mod
    from recipe.local_engine.trainer import LocalPasrTrainer
    from runtime.gqa_attention import NAME, use_attention
    from runtime.hf_generate import SamplingParams

    with pytest.raises(ConfigError, match="model.attention"):
        load_config(overrides=["model.attention=flash"])
    with pytest.raises(ConfigError, match="rollout.eval_batch_size"):
        load_config(overrides=["rollout.eval_batch_size=0"])
    trainers = {}
    for attention in ("grouped", "sdpa"):
        cfg = load_config(
            overrides=[
                f"model.path={tiny_model_dir}",
                "warmup.steps=0",
                "trainer.steps=1",
                "rollout.queries_per_step=2",
                "pasr.n_refine=2",
                "pasr.n_plain=1",
                "rollout.max_new_tokens=4",
                "rollout.eval_max_new_tokens=6",
                "data.eval_size=5",
                "rollout.gen_batch_size=3",
                "rollout.eval_batch_size=4",
                f"model.attention={attention}",
            ]
        )
        trainers[attention] = t = LocalPasrTrainer(cfg, tmp_path / attention)
        t.setup()
    assert trainers["grouped"].model.config._attn_implementation == NAME
    assert trainers["sdpa"].model.config._attn_implementation == "sdpa"
    assert trainers["grouped"].attention == "grouped" and trainers["sdpa"].attention == "sdpa"
    spare = copy.deepcopy(trainers["grouped"].model)  # switching back and forth (benchmarks/local_eval_speed)
    assert use_attention(spare, "sdpa") == "sdpa" and spare.config._attn_implementation == "sdpa"
    assert use_attention(spare, "grouped") == "grouped" and spare.config._attn_implementation == NAME

    greedy = SamplingParams(max_new_tokens=8, do_sample=False)
    queries = trainers["grouped"].heldout
    gens = {
        a: rollout_mod.generate_step(t.model, t.tokenizer, queries, t.prompts, 1, 1, greedy, 4, True)
        for a, t in trainers.items()
    }
    assert [g.response_ids for g in gens["grouped"]] == [g.response_ids for g in gens["sdpa"]]
    rows = [(g.prompt_ids, g.response_ids) for g in gens["grouped"]]
    batch = pack([p for p, _ in rows], [r for _, r in rows], trainers["grouped"].tokenizer.pad_token_id)
    with torch.no_grad():
        lp = {a: response_logprobs(t.model, batch) for a, t in trainers.items()}
    torch.testing.assert_close(lp["grouped"], lp["sdpa"], rtol=1e-5, atol=1e-5)

    sizes = []
    real = rollout_mod.generate_ids
    monkeypatch.setattr(
        rollout_mod,
        "generate_ids",
        lambda *a, batch_size, **k: sizes.append(batch_size) or real(*a, batch_size=batch_size, **k),
    )
    t = trainers["grouped"]
    t.evals = {}
    t._evaluate("final")
    t.optimizer = t._make_optimizer("pasr")
    t.pasr_step(1)
    assert sizes == [4, 3]
