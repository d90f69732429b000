"""The local engine's log-probs and policy update (verl's math) on the tiny model: response
log-probs equal a full forward's, GRPO batches get verl's advantages, an update moves probability
towards the better response, a group's prompt runs once, the warm-up's rows laid end to end give
the padded batch's loss and gradients, and the warm-up's layout is chosen by cost."""

from __future__ import annotations

import pytest
import torch

from recipe.local_engine.config import LocalTrainConfig
from recipe.local_engine.kl_reference import KLReference
from recipe.local_engine.logprobs import pack, response_logprobs
from recipe.local_engine.policy_update import TrainRollout, build_batch, update_policy


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
    rolls = [
        TrainRollout("q", [1, 2, 3], good, 1.0),
        TrainRollout("q", [1, 2, 3], bad, -1.0),
        TrainRollout("z", [1, 2, 3], good, 0.5),
        TrainRollout("z", [1, 2, 3], bad, 0.5),
    ]
    data = build_batch(rolls, tok.pad_token_id, algo)
    before = response_logprobs(model, pack([[1, 2, 3]] * 2, [good, bad], tok.pad_token_id)).sum(-1)
    opt = torch.optim.SGD(model.parameters(), lr=algo.lr)
    metrics = update_policy(model, None, opt, data, algo, temperature=1.0)
    after = response_logprobs(model, pack([[1, 2, 3]] * 2, [good, bad], tok.pad_token_id)).sum(-1)
    assert after[0] > before[0] and after[1] < before[1]
    assert metrics["actor/trained_rows"] == 2 and metrics["actor/skipped_rows"] == 2
    # the gradients are freed once applied: the next step's generation and evaluations do not hold them
    assert all(q.grad is None for q in model.parameters())


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
    monkeypatch.setattr(lp_mod, "_shared_prompt_hidden", lambda body, b, width=None: None)  # a prompt pass per row
    lp_u, g_u = logprobs_and_grads()
    assert torch.allclose(lp_s, lp_u, atol=1e-10) and (lp_s[batch.response_mask == 0] == 0).all()
    for name in g_u:  # float64 sums in another order: equal to about 1e-7 of the gradient's scale
        torch.testing.assert_close(g_s[name], g_u[name], rtol=1e-6, atol=1e-6 * float(g_u[name].abs().max()), msg=name)


def _sgd_noting_gradients(model):
    """An SGD that moves nothing (lr 0) and notes each parameter's gradient when the update steps
    (``update_policy`` frees them right after)."""
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    grads = {}
    opt.register_step_pre_hook(lambda *_: grads.update({n: q.grad.clone() for n, q in model.named_parameters()}))
    return opt, grads


def test_micro_batches_group_rows_of_similar_response_length():
    from recipe.local_engine.logprobs import length_micro_batches

    mask = pack([[1]] * 7, [[3] * n for n in (5, 1, 9, 2, 8, 1, 4)], 0).response_mask
    batches = length_micro_batches(mask, 3)
    assert [b.tolist() for b in batches] == [[0, 2, 4], [1, 3, 6], [5]]  # lengths 9 8 5 | 4 2 1 | 1
    assert sorted(i for b in batches for i in b.tolist()) == list(range(7))


def test_update_over_one_prompt_pass_gives_the_gradients_of_one_padded_pass(tiny_model_dir, monkeypatch):
    """The update runs the batch's prompts once and its rows in micro-batches of similar response
    length, each padded to its own longest response, handing the prompt pass its gradient at the
    end; the policy's gradients, its loss and the reference's log-probs are those of the whole
    batch in one padded pass (float64: equal up to summation order)."""
    import copy

    from transformers import AutoModelForCausalLM

    import recipe.local_engine.policy_update as pu

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float64)
    eos = 2
    algo = LocalTrainConfig().algo
    algo.kl_coef, algo.max_grad_norm, algo.skip_zero_adv = 0.05, 1e9, False
    groups = {"a": [5, 6, 7, 8, 9], "b": [5, 6, 11, 12], "c": [5, 13, 14, 15, 16, 17]}
    lengths = {"a": (2, 9, 4, 1), "b": (7, 3, 3, 6), "c": (1, 1, 8, 2)}
    rolls = [
        TrainRollout(q, groups[q], [20 + (i * 7 + j) % 30 for j in range(n - 1)] + [eos], float(i % 2 + (q == "b")))
        for q in groups
        for i, n in enumerate(lengths[q])
    ]

    def update(micro_batch_size: int, shared: bool):
        m, ref = copy.deepcopy(model), copy.deepcopy(model)
        algo.micro_batch_size = micro_batch_size
        data = build_batch(rolls, 0, algo)
        with monkeypatch.context() as patch:
            if not shared:
                patch.setattr(pu.PromptPass, "run", classmethod(lambda cls, body, batch, separate_backward: None))
            opt, grads = _sgd_noting_gradients(m)
            metrics = update_policy(m, KLReference.held(ref), opt, data, algo, temperature=0.9)
        return data.batch["ref_log_prob"], metrics, grads

    ref_s, metrics_s, g_s = update(3, shared=True)  # 4 micro-batches of similar lengths, one prompt pass
    ref_u, metrics_u, g_u = update(12, shared=False)  # one padded pass over every row
    torch.testing.assert_close(ref_s, ref_u, rtol=1e-9, atol=1e-9)
    assert metrics_s["actor/pg_loss"] == pytest.approx(metrics_u["actor/pg_loss"], rel=1e-6)  # advantages are float32
    assert metrics_s["actor/kl_loss"] == pytest.approx(metrics_u["actor/kl_loss"], rel=1e-6)
    assert all(g_u[n] is not None and g_u[n].abs().sum() > 0 for n in ("model.embed_tokens.weight",))
    for name in g_u:
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
    assert not end_to_end_pays(
        smollm, [[1] * 75] * 8, [[2] * 90] + [[2] * 20] * 7
    )  # one prompt: the batch runs it once


def _unchunked_token_logprobs(model, predicting, targets, temperature=1.0):
    """The log-probs as one (rows, vocabulary) block of logits: what the chunked ones must equal."""
    logits = model.get_output_embeddings()(predicting).float() / temperature
    return torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def test_chunked_logprobs_give_the_unchunked_loss_and_gradients(tiny_model_dir, monkeypatch):
    """Above ``LOGIT_CHUNK_ROWS`` rows the output layer and log-softmax run over chunks of rows,
    each chunk's logits recomputed in the backward (logprobs._ChunkedLogprobs): the update's
    log-probs, reference log-probs, losses and gradients, and the warm-up's loss and gradients in
    both layouts, are those of one block of logits (float64: equal up to summation order).
    Chunks of 4 rows: micro-batches of one chunk and of several, the last one short."""
    import copy

    from transformers import AutoModelForCausalLM

    import recipe.local_engine.logprobs as lp_mod
    from recipe.local_engine.policy_update import sft_loss

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float64)
    algo = LocalTrainConfig().algo
    algo.kl_coef, algo.max_grad_norm, algo.skip_zero_adv, algo.micro_batch_size = 0.05, 1e9, False, 3
    groups = {"a": [5, 6, 7, 8, 9], "b": [5, 6, 11, 12]}
    rolls = [
        TrainRollout(q, groups[q], [20 + (i * 7 + j) % 30 for j in range(n - 1)] + [2], float(i % 2))
        for q in groups
        for i, n in enumerate((9, 4, 7, 1))
    ]
    prompts, responses = [r.prompt_ids for r in rolls], [r.response_ids for r in rolls]

    def run():
        m, ref = copy.deepcopy(model), copy.deepcopy(model)
        data = build_batch(rolls, 0, algo)
        opt, grads = _sgd_noting_gradients(m)
        metrics = update_policy(m, KLReference.held(ref), opt, data, algo, temperature=0.9)
        out = {
            "ref_log_prob": data.batch["ref_log_prob"],
            **{k: torch.tensor(metrics[k]) for k in ("actor/pg_loss", "actor/kl_loss")},
            **{f"update {n}": g for n, g in grads.items()},
        }
        for layout in ("end_to_end", "padded"):
            m.zero_grad()
            loss = sft_loss(m, prompts, responses, 0, layout=layout)
            loss.backward()
            out[f"sft {layout}"] = loss.detach()
            out.update({f"sft {layout} {n}": q.grad.clone() for n, q in m.named_parameters()})
        return out

    monkeypatch.setattr(lp_mod, "LOGIT_CHUNK_ROWS", 4)
    chunked = run()
    monkeypatch.setattr(lp_mod, "_token_logprobs", _unchunked_token_logprobs)
    whole = run()
    assert whole["update model.embed_tokens.weight"].abs().sum() > 0
    for name in whole:
        torch.testing.assert_close(
            chunked[name], whole[name], rtol=1e-6, atol=1e-6 * float(whole[name].abs().max()), msg=name
        )


def test_chunked_logprobs_under_bf16_autocast(tiny_model_dir, monkeypatch):
    """Under the update's bf16 autocast the chunks compute their logits as the output layer does
    there (bf16 matmuls), so log-probs and gradients match one block's to bf16 rounding."""
    from transformers import AutoModelForCausalLM

    import recipe.local_engine.logprobs as lp_mod

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    monkeypatch.setattr(lp_mod, "LOGIT_CHUNK_ROWS", 4)
    hidden = torch.randn(11, model.config.hidden_size, dtype=torch.float32, requires_grad=True)
    targets = torch.randint(0, model.config.vocab_size, (11,))

    def logprobs_and_grads(fn):
        model.zero_grad()
        hidden.grad = None
        with torch.autocast("cpu", dtype=torch.bfloat16):
            lp = fn(model, hidden, targets, 0.9)
        (lp * torch.arange(1, 12)).sum().backward()
        return lp.detach(), hidden.grad.clone(), model.get_output_embeddings().weight.grad.clone()

    chunked = logprobs_and_grads(lp_mod._token_logprobs)
    whole = logprobs_and_grads(_unchunked_token_logprobs)
    for a, b in zip(chunked, whole):
        torch.testing.assert_close(a, b, rtol=2e-2, atol=2e-2 * float(b.abs().max()))


def test_logprobs_keep_no_block_of_logits_for_the_backward(tiny_model_dir, monkeypatch):
    """Between the forward and the backward at most ``LOGIT_CHUNK_ROWS`` rows of logits are held:
    above it the chunks' logits are recomputed in the backward, one chunk at a time (a block of
    logits is 200 kB a row for SmolLM2). Counted by the tensors autograd saves for the backward."""
    from transformers import AutoModelForCausalLM

    import recipe.local_engine.logprobs as lp_mod

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    vocab, weight = model.config.vocab_size, model.get_output_embeddings().weight
    monkeypatch.setattr(lp_mod, "LOGIT_CHUNK_ROWS", 4)
    saved_rows = {}  # storage -> rows, a tensor saved twice counted once

    def pack_hook(t):  # (rows, vocabulary) tensors other than the output layer's weight itself
        storage = t.untyped_storage().data_ptr()
        if t.dim() >= 2 and t.shape[-1] == vocab and storage != weight.untyped_storage().data_ptr():
            saved_rows[storage] = t.numel() // vocab
        return t

    for lengths, held in (((9, 5, 7, 3), 0), ((2, 1), 3)):  # 24 response tokens: chunks; 3: one block
        batch = pack([[5, 6, 7]] * (len(lengths) - 1) + [[8, 9]], [[20 + j for j in range(n)] for n in lengths], 0)
        saved_rows.clear()
        model.zero_grad()
        with torch.autograd.graph.saved_tensors_hooks(pack_hook, lambda t: t):
            lp = response_logprobs(model, batch, temperature=0.9)
        assert sum(saved_rows.values()) <= held, lengths
        lp.sum().backward()
        assert weight.grad.abs().sum() > 0


def test_the_update_holds_no_graph_of_its_prompt_pass_between_micro_batches(tiny_model_dir):
    """An update's prompt pass runs without a graph (nothing saved for a backward while the
    micro-batches run) and again with one in ``backward()``, which fills the weights' gradients."""
    from transformers import AutoModelForCausalLM

    from recipe.local_engine.logprobs import PromptPass
    from runtime.prompt_prefill import decoder

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    batch = pack([[5, 6, 7]] * 3 + [[8, 9]], [[20, 21], [22], [23, 24, 25], [26]], 0)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t.shape) or t, lambda t: t):
        prompts = PromptPass.run(decoder(model), batch, separate_backward=True)
    assert prompts is not None and saved == []
    assert all(t.is_leaf and t.requires_grad for t in (*prompts.keys, *prompts.values, prompts.last))
    (prompts.last.sum() + sum(k.sum() for k in prompts.keys)).backward()
    assert model.model.embed_tokens.weight.grad is None  # the micro-batches' backward stops at the leaves
    prompts.backward()
    assert model.model.embed_tokens.weight.grad.abs().sum() > 0


def test_the_prompt_backward_reruns_a_few_prompts_at_a_time_with_the_same_gradients(tiny_model_dir, monkeypatch):
    """``PromptPass.backward`` reruns the prompts in chunks of whole distinct prompts (rows with
    one prompt together; a prompt no row repeats runs as a plain pass), so only one chunk's graph
    exists at once; the weights' gradients are those of one rerun of every prompt (float64)."""
    from transformers import AutoModelForCausalLM

    import recipe.local_engine.logprobs as lp
    from runtime.prompt_prefill import decoder

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float64)
    batch = pack([[5, 6, 7]] * 3 + [[8, 9]] + [[10, 11, 12]] * 2, [[20, 21], [22], [23, 24, 25], [26], [27], [28]], 0)

    def grads(chunk_tokens: int):
        model.zero_grad(set_to_none=True)
        monkeypatch.setattr(lp, "PROMPT_CHUNK_TOKENS", chunk_tokens)
        prompts = lp.PromptPass.run(decoder(model), batch, separate_backward=True)
        (prompts.last.pow(2).sum() + sum((k * k.detach().sin()).sum() for k in prompts.keys)).backward()
        rerun_rows = []
        hook = decoder(model).register_forward_pre_hook(
            lambda module, args, kwargs: rerun_rows.append(kwargs["input_ids"].shape[0]), with_kwargs=True
        )
        prompts.backward()
        hook.remove()
        return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}, rerun_rows

    whole, rows_whole = grads(1000)
    chunked, rows_chunked = grads(3)  # the prompts are 3 wide: one distinct prompt a chunk
    assert rows_whole == [3]  # the three distinct prompts in one pass
    assert sorted(rows_chunked) == [1, 1, 1]  # each alone: [8, 9] (no repeat) as a plain pass
    assert whole.keys() == chunked.keys() and "model.embed_tokens.weight" in whole
    for name in whole:
        torch.testing.assert_close(chunked[name], whole[name], rtol=1e-9, atol=1e-12, msg=name)


def test_warmup_micro_batches_give_the_whole_batch_loss_and_gradients(tiny_model_dir, monkeypatch):
    """``sft_backward`` runs the warm-up's rows a few at a time (at most ``micro_batch_size`` rows
    a forward), weighting each part by its tokens: the batch's token-mean loss and gradients as
    one pass over every row gives them (float64 weights; the log-softmax runs in fp32)."""
    from transformers import AutoModelForCausalLM

    import recipe.local_engine.policy_update as pu

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float64)
    prompts = [[5, 6, 7, 8], [5, 6, 9], [5, 10, 11, 12, 13], [14, 15], [5, 6, 7, 16]]
    responses = [[20, 21, 2], [22, 23, 24, 25, 26, 2], [27, 2], [28, 29, 30, 31, 2], [32, 33, 34, 2]]

    def run(micro_batch_size: int):
        model.zero_grad(set_to_none=True)
        sizes = []
        real = pu.sft_loss
        with monkeypatch.context() as patch:
            patch.setattr(pu, "sft_loss", lambda m, p, r, *a, **k: sizes.append(len(p)) or real(m, p, r, *a, **k))
            loss = pu.sft_backward(model, prompts, responses, 0, micro_batch_size)
        return loss, {n: p.grad.clone() for n, p in model.named_parameters()}, sizes

    whole, g_whole, sizes_whole = run(8)
    parts, g_parts, sizes_parts = run(2)
    assert sizes_whole == [5] and sorted(sizes_parts) == [1, 2, 2]
    assert not parts.requires_grad
    torch.testing.assert_close(parts, whole, rtol=1e-6, atol=0)
    for name in g_whole:
        scale = float(g_whole[name].abs().max())
        torch.testing.assert_close(g_parts[name], g_whole[name], rtol=1e-6, atol=1e-6 * scale, msg=name)
