"""The local engine: config, log-probs, verl-math update, rollouts, and a tiny end-to-end run."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from recipe.local_engine.config import LocalTrainConfig, load_config
from recipe.local_engine.logprobs import pack, response_logprobs
from recipe.local_engine.policy_update import TrainRollout, build_batch, rl_learning_rate, update_policy
from recipe.local_engine.trainer import step_indices
from recipe.pasr_config import ConfigError


def test_config_layers_and_errors(tmp_path):
    cfg = load_config(preset="demo", overrides=["trainer.steps=7", "pasr.tie_value=0.0"])
    assert cfg.trainer.steps == 7 and cfg.pasr.tie_value == 0.0 and cfg.trainer.run_dir == "runs/pasr-demo"
    with pytest.raises(ConfigError, match="pasr.judge.timout_s"):
        load_config(overrides=["pasr.judge.timout_s=3"])
    with pytest.raises(ConfigError, match="warmup.refine_style"):
        load_config(overrides=["warmup.refine_style=sometimes"])
    with pytest.raises(ConfigError, match="key=value"):
        load_config(overrides=["trainer.steps"])
    with pytest.raises(ConfigError, match="unknown preset"):
        load_config(preset="nope")
    extra = tmp_path / "c.yaml"
    extra.write_text("rollout:\n  max_new_tokens: 12\n")
    assert load_config(config_file=str(extra)).rollout.max_new_tokens == 12


def test_non_finite_settings_are_refused_all_at_once():
    """NaN passes every range check written as a comparison and infinity every lower bound:
    algo.lr=inf wrote a NaN checkpoint, pasr.weights.format=nan skipped every row and exited 0.
    One check over every float key names all of them, in one line."""
    from recipe.pasr_config import load_pasr_config

    bad = {"algo.lr": "inf", "warmup.lr": "inf", "pasr.weights.format": "nan", "pasr.zeta": "nan",
           "pasr.tie_value": "nan", "pasr.weights.acc": "inf", "rollout.top_p": "-inf", "pasr.judge.backoff_s": "inf"}
    with pytest.raises(ConfigError) as exc:
        load_config(overrides=[f"{key}={value}" for key, value in bad.items()])
    message = str(exc.value)
    assert all(f"{key}={value}" in message for key, value in bad.items()) and "\n" not in message, message
    with pytest.raises(ConfigError, match=r"pasr\.zeta=nan"):  # the section alone, as the verl engine loads it
        load_pasr_config({"zeta": "nan"})
    assert load_config(overrides=["algo.lr=2e-5", "pasr.empty_refine_value=null"]).algo.lr == 2e-5


def test_check_data_refuses_what_a_run_cannot_use():
    """No rows, fewer training rows than a step takes (only when there are RL steps), or no
    held-out rows while an evaluation is on."""
    from data.examples import DatasetError, Example
    from recipe.local_engine.trainer import check_data

    rows = [Example(str(i), "f", f"{i}+1?", str(i + 1)) for i in range(3)]
    cfg = load_config(overrides=["rollout.queries_per_step=2", "data.source=synthetic"])
    check_data(cfg, rows, rows)
    with pytest.raises(DatasetError, match="data.source: synthetic holds no rows"):
        check_data(cfg, [], [])
    with pytest.raises(DatasetError, match="has 1 training row, fewer than rollout.queries_per_step=2"):
        check_data(cfg, rows[:1], rows)
    check_data(load_config(overrides=["rollout.queries_per_step=2", "trainer.steps=0"]), rows[:1], rows)
    with pytest.raises(DatasetError, match="no held-out rows"):
        check_data(cfg, rows, [])
    no_evals = ["trainer.eval_at_start=false", "trainer.eval_after_warmup=false", "trainer.eval_at_end=false"]
    check_data(load_config(overrides=no_evals), rows * 4, [])


def test_rl_learning_rate_ramps_then_holds():
    assert [rl_learning_rate(1e-5, s, 4) for s in (1, 2, 3, 4, 5, 40)] == pytest.approx([2.5e-6, 5e-6, 7.5e-6, 1e-5, 1e-5, 1e-5])
    assert rl_learning_rate(1e-5, 1, 0) == 1e-5  # 0: no warm-up
    assert rl_learning_rate(1e-5, 1, 1) == 1e-5  # the first step is never a zero-lr no-op
    with pytest.raises(ConfigError, match="algo.lr_warmup_steps"):
        load_config(overrides=["algo.lr_warmup_steps=-1"])


def test_step_indices_are_a_pure_function_of_the_step():
    a = [step_indices(10, 4, s, seed=3) for s in range(5)]
    assert a == [step_indices(10, 4, s, seed=3) for s in range(5)]
    first_epoch = sum(a[:2], []) + a[2][:2]
    assert sorted(first_epoch) == list(range(10))  # every item once per epoch


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    from runtime.model_loading import load_model_and_tokenizer

    model, tok, _ = load_model_and_tokenizer(str(tiny_model_dir))
    return model, tok


def test_response_logprobs_match_a_full_forward(tiny):
    model, tok = tiny
    batch = pack([[5, 6, 7, 8], [9, 10]], [[11, 12, 13], [14]], tok.pad_token_id)
    lp = response_logprobs(model, batch)
    full = torch.log_softmax(model(torch.tensor([[5, 6, 7, 8, 11, 12, 13]])).logits, -1)[0]
    expected = full[3:6].gather(-1, torch.tensor([[11], [12], [13]])).squeeze(-1)
    torch.testing.assert_close(lp[0], expected, rtol=1e-4, atol=1e-4)
    full2 = torch.log_softmax(model(torch.tensor([[9, 10, 14]])).logits, -1)[0]
    torch.testing.assert_close(lp[1, 0], full2[1, 14], rtol=1e-4, atol=1e-4)
    assert lp[1, 1:].abs().sum() == 0  # padding carries no log-prob


def test_grpo_batch_uses_verl_advantages():
    rolls = [
        TrainRollout("q1", [1, 2], [3, 4, 2], 2.0),
        TrainRollout("q1", [1, 2], [5, 2], 0.0),
        TrainRollout("q2", [1, 2, 3], [6, 2], 1.0),
        TrainRollout("q2", [1, 2, 3], [7, 8, 9, 2], 1.0),
    ]
    data = build_batch(rolls, pad_id=0, algo=LocalTrainConfig().algo)
    adv = data.batch["advantages"]
    mask = data.batch["response_mask"]
    assert mask.sum(-1).tolist() == [3, 2, 2, 4]  # EOS (id 2) is a trained token
    assert adv[0, 0] > 0 and adv[1, 0] < 0
    assert torch.allclose(adv[0] * mask[0], adv[0])  # zero outside the response
    assert adv[2:].abs().sum() == 0  # no reward spread in q2: no signal
    assert list(data.non_tensor_batch["uid"]) == ["q1", "q1", "q2", "q2"]


def test_update_moves_probability_towards_the_better_response(tiny):
    import copy

    model, tok = tiny
    model = copy.deepcopy(model)
    algo = LocalTrainConfig().algo
    algo.lr, algo.kl_coef = 1e-2, 0.0
    good, bad = [100, 200, tok.eos_token_id], [300, 400, tok.eos_token_id]
    rolls = [TrainRollout("q", [1, 2, 3], good, 1.0), TrainRollout("q", [1, 2, 3], bad, -1.0),
             TrainRollout("z", [1, 2, 3], good, 0.5), TrainRollout("z", [1, 2, 3], bad, 0.5)]
    data = build_batch(rolls, tok.pad_token_id, algo)
    before = response_logprobs(model, pack([[1, 2, 3]] * 2, [good, bad], tok.pad_token_id)).sum(-1)
    opt = torch.optim.SGD(model.parameters(), lr=algo.lr)
    metrics = update_policy(model, None, opt, data, algo, temperature=1.0)
    after = response_logprobs(model, pack([[1, 2, 3]] * 2, [good, bad], tok.pad_token_id)).sum(-1)
    assert after[0] > before[0] and after[1] < before[1]
    assert metrics["actor/trained_rows"] == 2 and metrics["actor/skipped_rows"] == 2


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


def test_repeated_prompts_run_once_with_the_same_logprobs_and_gradients(tiny_model_dir, monkeypatch):
    """A group's rows share one prompt pass in the update: log-probs and gradients are those of
    a pass per row (float64, so equal up to summation order), with prompts that start alike (two
    "system prompts", not shared here) or share nothing, of other lengths, and right-padded
    responses of other lengths in the same batch."""
    import copy

    from transformers import AutoModelForCausalLM

    import recipe.local_engine.logprobs as lp_mod

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float64)
    sys_a, sys_b = [5, 6, 7, 8], [5, 6, 11]
    prompts = [sys_a + [9]] * 3 + [sys_b + [12, 13]] * 2 + [sys_a + [14, 15, 16]] + [[17, 18]]
    responses = [[20, 21, 22], [23, 24], [25, 26, 27, 28, 2], [29], [30, 31, 32], [33, 34], [35, 36, 37]]
    batch = pack(prompts, responses, 0)
    assert lp_mod._shared_prompt_hidden(model.get_decoder(), batch) is not None
    assert lp_mod._shared_prompt_hidden(model.get_decoder(), pack([[5, 6], [7, 8]], [[9], [10]], 0)) is None

    def logprobs_and_grads():
        m = copy.deepcopy(model)
        lp = response_logprobs(m, batch, temperature=0.9)
        (lp * torch.arange(1, lp.numel() + 1, dtype=lp.dtype).view_as(lp)).sum().backward()
        return lp.detach(), {n: q.grad for n, q in m.named_parameters()}

    lp_s, g_s = logprobs_and_grads()
    monkeypatch.setattr(lp_mod, "_shared_prompt_hidden", lambda body, b: None)  # a prompt pass per row
    lp_u, g_u = logprobs_and_grads()
    assert torch.allclose(lp_s, lp_u, atol=1e-10) and (lp_s[batch.response_mask == 0] == 0).all()
    for name in g_u:  # float64 sums in another order: equal to about 1e-7 of the gradient's scale
        torch.testing.assert_close(g_s[name], g_u[name], rtol=1e-6, atol=1e-6 * float(g_u[name].abs().max()), msg=name)


@pytest.mark.parametrize("attention", ["sdpa", "grouped", "eager"])
def test_warmup_rows_end_to_end_give_the_padded_loss_and_gradients(tiny_model_dir, attention):
    """The warm-up's loss over rows laid end to end without padding equals the loss over the
    padded batch, and so do its gradients (float64: equal up to summation order), and its
    log-probs those of each row run alone: no token attends across rows, each row sees its
    shared prefix (laid once; eager attention takes no explicit mask, so there each row is laid
    whole). Prompts and responses of other lengths, two
    "system prompts", a prompt sharing nothing, a one-token response, a repeated prompt."""
    import copy

    from transformers import AutoModelForCausalLM

    from recipe.local_engine.logprobs import concatenated_response_logprobs
    from recipe.local_engine.policy_update import sft_loss
    from runtime.gqa_attention import install
    from runtime.prompt_prefill import shared_prefixes

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float64)
    if attention == "grouped":
        assert install(model)
    elif attention == "eager":
        model.set_attn_implementation("eager")
    sys_a, sys_b = [5, 6, 7, 8, 10], [5, 6, 11, 12]
    prompts = [sys_a + [9], sys_b + [13], sys_a + [9], sys_a + [16, 17, 18, 19, 3, 4], sys_b + [24, 31], [14, 15]]
    responses = [[20, 21, 22], [23], [25, 26, 27, 28, 2], [29, 30], [32, 33], [34, 35, 36]]
    assert any(shared_prefixes(prompts))

    def loss_and_grads(padded: bool):
        m = copy.deepcopy(model)
        loss = sft_loss(m, prompts, responses, 0, layout="padded" if padded else "end_to_end")
        loss.backward()
        return loss.detach(), {n: q.grad for n, q in m.named_parameters()}

    flat = concatenated_response_logprobs(model, prompts, responses)
    alone = torch.cat([response_logprobs(model, pack([p], [r], 0))[0] for p, r in zip(prompts, responses)])
    # the log-softmax runs in fp32 (logprobs._token_logprobs): equal to fp32 rounding
    torch.testing.assert_close(flat, alone, rtol=1e-6, atol=1e-6)
    if attention == "eager":
        return  # transformers' eager attention turns a left-padded batch's all-padding rows into NaN
    batch = pack(prompts, responses, 0)
    torch.testing.assert_close(flat, response_logprobs(model, batch)[batch.response_mask.bool()], rtol=1e-6, atol=1e-6)
    loss_c, g_c = loss_and_grads(False)
    loss_p, g_p = loss_and_grads(True)
    torch.testing.assert_close(loss_c, loss_p, rtol=1e-6, atol=1e-6)
    for name in g_p:  # the padded batch runs its repeated prompt once (logprobs._shared_prompt_hidden): about 1e-7
        torch.testing.assert_close(g_c[name], g_p[name], rtol=1e-6, atol=1e-6 * float(g_p[name].abs().max()), msg=name)


def test_warmup_layout_is_chosen_by_cost():
    """Short rows of mixed lengths go end to end (the padding costs more than the attention over
    one sequence); long rows of one length stay padded (nothing to save, quadratic attention)."""
    from transformers import AutoConfig

    from recipe.local_engine.logprobs import end_to_end_pays
    from runtime.model_loading import resolve_model_path

    smollm = AutoConfig.from_pretrained(resolve_model_path("smollm2"))
    smollm._attn_implementation = "sdpa"
    # the PASR warm-up: one system prompt, distinct questions; one refining trace, short plain ones
    mixed = ([[1] * 36 + [3 + i] * 35 for i in range(8)], [[2] * 90] + [[2] * 20] * 7)
    # Countdown's RRR warm-up: long rows of about one length
    uniform = ([[1] * 30 + [3 + i] * 170 for i in range(8)], [[2] * 40] * 8)
    assert end_to_end_pays(smollm, *mixed)
    assert not end_to_end_pays(smollm, *uniform)
    assert not end_to_end_pays(smollm, [[1] * 10, [3] * 10], [[2] * 5] * 2)  # no padding at all: nothing to gain
    assert not end_to_end_pays(smollm, [[1] * 75] * 8, [[2] * 90] + [[2] * 20] * 7)  # one prompt: the batch runs it once


def test_generate_step_layout(tiny):
    from data.examples import Example
    from prompts import PromptSet
    from recipe.local_engine.rollout import generate_step
    from runtime.hf_generate import SamplingParams

    model, tok = tiny
    qs = [Example("a", "synthetic", "1+1?", "2"), Example("b", "synthetic", "2+2?", "4")]
    gens = generate_step(model, tok, qs, PromptSet.load("refine_system_short", "plain_system_short"), 3, 2,
                         SamplingParams(max_new_tokens=6), batch_size=4, prefill_think=True)
    assert [(g.rollout.query_id, g.rollout.variant) for g in gens] == (
        [("a", "refine")] * 3 + [("a", "plain")] * 2 + [("b", "refine")] * 3 + [("b", "plain")] * 2)
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
    prompts = [sys_a + [20, 21], sys_a + [20, 21], sys_a + [22], sys_b + [23, 24, 25], sys_b + [23, 24, 25], sys_b + [26, 27]]
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


class FlakyJudge:
    """Fails every third item: those rollouts must be counted and left out of the update."""

    name = "flaky"

    async def score(self, question, gold, answer):
        raise NotImplementedError

    async def score_many(self, items):
        from rewards.judges.base import JudgeResult

        return [JudgeResult.failed("boom") if i % 3 == 0 else JudgeResult(float(i % 2)) for i, _ in enumerate(items)]


@pytest.mark.parametrize("draft_credit", ["outcome", "value"])
def test_judge_errors_are_counted_and_not_trained(tiny_model_dir, tmp_path, draft_credit):
    """Judged refine rows are trained on; the step runs and logs its clipped rows with
    pasr.draft_credit=value."""
    from recipe.local_engine.trainer import LocalPasrTrainer

    cfg = load_config(overrides=[
        f"model.path={tiny_model_dir}", "warmup.steps=0", "trainer.steps=1", "rollout.queries_per_step=2",
        "pasr.n_refine=3", "pasr.n_plain=2", "rollout.max_new_tokens=4", "algo.skip_zero_adv=false",
        f"pasr.draft_credit={draft_credit}",
        "trainer.max_judge_error_rate=0.5",  # 4 errors in 10 rollouts: trained around, not a stop
    ])
    trainer = LocalPasrTrainer(cfg, tmp_path / "run")
    trainer.setup()
    trainer.judge = FlakyJudge()
    trainer.optimizer = trainer._make_optimizer("pasr")
    metrics = trainer.pasr_step(1)
    records = [json.loads(x) for x in (tmp_path / "run" / "rollouts" / "step_000001.jsonl").read_text().splitlines()]
    failed = [r for r in records if r["acc"] is None]
    assert len(records) == 10 and len(failed) == 4
    assert all(r["judge_error"] == "boom" and r["total_reward"] is None for r in failed)
    assert metrics["pasr/judge_errors"] == 4
    judged = [r for r in records if r["acc"] is not None and r["variant"] == "refine"]
    assert metrics["actor/trained_rows"] == len(judged)
    assert ("pasr/draft_clipped_rows" in metrics) == (draft_credit == "value")
    assert "pasr/draft_acc" in metrics
    assert all((r["total_reward"] is not None) == (r["acc"] is not None) for r in records if r["variant"] == "refine")
    assert {"timing_s/gen", "timing_s/reward", "timing_s/update"} <= set(metrics)


def test_trainer_uses_grouped_attention_and_wide_eval_batches(tiny_model_dir, tmp_path, monkeypatch):
    """model.attention=grouped (the default) switches the policy to the copy-free grouped-query
    attention with the same greedy tokens and log-probs as transformers' SDPA; evaluations
    generate in rollout.eval_batch_size batches, training steps in rollout.gen_batch_size."""
    import recipe.local_engine.rollout as rollout_mod
    import copy

    from recipe.local_engine.trainer import LocalPasrTrainer
    from runtime.gqa_attention import NAME, use_attention
    from runtime.hf_generate import SamplingParams

    with pytest.raises(ConfigError, match="model.attention"):
        load_config(overrides=["model.attention=flash"])
    with pytest.raises(ConfigError, match="rollout.eval_batch_size"):
        load_config(overrides=["rollout.eval_batch_size=0"])
    trainers = {}
    for attention in ("grouped", "sdpa"):
        cfg = load_config(overrides=[
            f"model.path={tiny_model_dir}", "warmup.steps=0", "trainer.steps=1", "rollout.queries_per_step=2",
            "pasr.n_refine=2", "pasr.n_plain=1", "rollout.max_new_tokens=4", "rollout.eval_max_new_tokens=6",
            "data.eval_size=5", "rollout.gen_batch_size=3", "rollout.eval_batch_size=4", f"model.attention={attention}",
        ])
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
    gens = {a: rollout_mod.generate_step(t.model, t.tokenizer, queries, t.prompts, 1, 1, greedy, 4, True)
            for a, t in trainers.items()}
    assert [g.response_ids for g in gens["grouped"]] == [g.response_ids for g in gens["sdpa"]]
    rows = [(g.prompt_ids, g.response_ids) for g in gens["grouped"]]
    batch = pack([p for p, _ in rows], [r for _, r in rows], trainers["grouped"].tokenizer.pad_token_id)
    with torch.no_grad():
        lp = {a: response_logprobs(t.model, batch) for a, t in trainers.items()}
    torch.testing.assert_close(lp["grouped"], lp["sdpa"], rtol=1e-5, atol=1e-5)

    sizes = []
    real = rollout_mod.generate_ids
    monkeypatch.setattr(rollout_mod, "generate_ids", lambda *a, batch_size, **k: sizes.append(batch_size) or real(*a, batch_size=batch_size, **k))
    t = trainers["grouped"]
    t.evals = {}
    t._evaluate("final")
    t.optimizer = t._make_optimizer("pasr")
    t.pasr_step(1)
    assert sizes == [4, 3]


# --------------------------------------------------------------------------- a judge that fails (issue 34)
class BrokenJudge:
    """Every reply unparseable: no rollout can be scored."""

    name = "broken"

    async def score(self, question, gold, answer):
        raise NotImplementedError

    async def score_many(self, items):
        from rewards.judges.base import JudgeResult

        return [JudgeResult.failed("openai judge: unparsable_score: 'n/a' (after 4 attempts)") for _ in items]


def test_max_judge_error_rate_is_validated():
    assert load_config().trainer.max_judge_error_rate == 0.2
    assert load_config(overrides=["trainer.max_judge_error_rate=1"]).trainer.max_judge_error_rate == 1.0
    for bad in ("1.5", "-0.1", "nan", "inf"):
        with pytest.raises(ConfigError, match=r"trainer.max_judge_error_rate"):
            load_config(overrides=[f"trainer.max_judge_error_rate={bad}"])
    for bad in (1.5, float("nan")):  # NaN compares false to everything: it would never stop a run
        cfg = LocalTrainConfig()
        cfg.trainer.max_judge_error_rate = bad
        with pytest.raises(ConfigError, match=r"trainer.max_judge_error_rate"):
            cfg.validate()
    from recipe.judge_errors import max_judge_error_rate_problem

    assert max_judge_error_rate_problem("k", float("nan")) == "k must be in [0, 1], got nan"
    assert max_judge_error_rate_problem("k", 0.0) is None and max_judge_error_rate_problem("k", 1.0) is None


def test_a_step_over_the_judge_error_limit_stops_before_its_update(tiny_model_dir, tmp_path):
    """The verl engine's stop: the step's records are dumped for inspection, the policy is not
    updated on masked rows, and the message names the setting and the first error."""
    from recipe.judge_errors import JudgeErrorRateExceeded
    from recipe.local_engine.trainer import LocalPasrTrainer

    cfg = load_config(overrides=[
        f"model.path={tiny_model_dir}", "warmup.steps=0", "trainer.steps=1", "rollout.queries_per_step=2",
        "pasr.n_refine=2", "pasr.n_plain=1", "rollout.max_new_tokens=4",
    ])
    trainer = LocalPasrTrainer(cfg, tmp_path / "run")
    trainer.setup()
    trainer.judge = BrokenJudge()
    trainer.optimizer = trainer._make_optimizer("pasr")
    before = [p.detach().clone() for p in trainer.model.parameters()]
    with pytest.raises(JudgeErrorRateExceeded, match=r"step 1: the judge failed on 6 of 6 rollouts \(100%\), more than "
                       r"trainer.max_judge_error_rate=0.2; first error: .*unparsable_score"):
        trainer.pasr_step(1)
    assert len((tmp_path / "run" / "rollouts" / "step_000001.jsonl").read_text().splitlines()) == 6
    assert all(torch.equal(a, b) for a, b in zip(before, trainer.model.parameters()))
    assert not trainer.optimizer.state  # no optimizer step either


def test_pasr_train_stops_on_a_judge_that_always_fails(tiny_model_dir, tmp_path, monkeypatch, capsys):
    """A judge that never answers is neither accuracy 0 nor a quiet exit 0: the evaluation has no
    accuracy, counts its errors and warns; the first PASR step stops the run with one line."""
    import rewards.judges
    from pasr_cli import main

    monkeypatch.setattr(rewards.judges, "build_judge", lambda cfg, prompt=None: BrokenJudge())
    run_dir = tmp_path / "run"
    rc = main([
        "train", "--run-dir", str(run_dir), f"model.path={tiny_model_dir}", "model.threads=1", "warmup.steps=0",
        "trainer.steps=2", "rollout.queries_per_step=2", "pasr.n_refine=2", "pasr.n_plain=1", "rollout.max_new_tokens=4",
        "rollout.eval_max_new_tokens=4", "data.eval_size=2", "data.train_size=8",
    ])
    err = capsys.readouterr().err
    assert rc != 0 and "Traceback" not in err
    assert "pasr train: error: step 1: the judge failed on 6 of 6 rollouts (100%)" in err
    assert "WARNING: the judge failed on 2 of 2 rollouts of evaluation 'base'" in err
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    (base,) = [x for x in lines if x["phase"] == "eval"]
    assert base["eval/acc"] is None and base["eval/judge_errors"] == 2
    assert [x["phase"] for x in lines] == ["eval"]  # the stopped step is not logged
    assert len((run_dir / "rollouts" / "step_000001.jsonl").read_text().splitlines()) == 6


def test_summarize_shows_the_judge_errors_and_no_accuracy_without_a_judged_sample():
    from recipe.local_engine.trainer import summarize

    row = {"eval/format_pass_rate": 0.5, "eval/acc": None, "eval/refine_rate": 0.0, "eval/empty_refine_rate": 0.0,
           "eval/refine_fix_rate": 0.0, "eval/response_length/mean": 4.0, "eval/judge_errors": 2.0}
    header, _, base, final = summarize({"base": row, "final": {**row, "eval/acc": 0.75, "eval/judge_errors": 0.0}}).splitlines()
    assert header.endswith("| judge errors |")
    assert base.startswith("| base | 0.50 | - |") and base.endswith("| 2 |")
    assert final.startswith("| final | 0.50 | 0.75 |") and final.endswith("| 0 |")
