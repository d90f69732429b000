"""Reflect, Retry, Reward's training rollout on the verl engine, on CPU: the RRR rollout wrapper
(:mod:`recipe.verl_engine.rrr_rollout`) around a scripted rollout manager, the rows one training
step returns, what verl's ``fit()`` does with them, and the edge cases.

Generation is scripted (the answer to each chat is chosen by which pass it is: first attempt,
reflection or retry; tests/rrr_scripted_rollout.py), but everything around it is verl's own code,
as in tests/verl_scripted_rollout.py: ``RLHFDataset``, ``_get_gen_batch``, the agent loop worker's
padding and output assembly, ``DataProto``'s union, ``compute_advantage``.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from tests.rrr_scripted_rollout import (  # noqa: F401  (gen_batch, prompts, tokenizer, verl_mods are fixtures)
    QUESTION,
    REFL,
    SCRIPT,
    A,
    RrrScripted,
    _masked_tokens,
    _rrr_manager,
    _texts,
    fit_side,
    gen_batch,
    prompts,
    tokenizer,
    verl_mods,
)
from tests.verl_scripted_rollout import _train_gen_batch, generate_and_close, one_training_step


@pytest.fixture(scope="module")
def rrr_step(gen_batch, tokenizer, rrr_prompts, verl_mods, tmp_path_factory):
    """One RRR training step (n_reflections = rollout.n = 2) through the wrapper."""
    tmp = tmp_path_factory.mktemp("rrr_step")
    inner = RrrScripted(tokenizer, rrr_prompts, verl_mods.agent_loop)
    yield from one_training_step(inner, _rrr_manager(inner, tokenizer, rrr_prompts, tmp), gen_batch, 2, tmp)


# --------------------------------------------------------------------------- the training rows
def test_three_passes_and_rollout_n_rows_per_query_in_fits_order(rrr_step):
    # attempts (3 -> 4 with the divisor), 4 reflections on the two failures, 4 retries
    assert rrr_step.inner.calls == [4, 4, 4]
    assert all(m["global_steps"] == 5 and not m.get("validate") for m in rrr_step.inner.call_meta)
    out = rrr_step.out
    assert len(out) == 6  # fit() unions the output with its batch repeated rollout.n = 2 times
    assert list(out.non_tensor_batch["uid"]) == list(rrr_step.rep.non_tensor_batch["uid"])


def test_only_reflection_rows_are_trained(rrr_step, tokenizer, rrr_prompts):
    out = rrr_step.out
    trained = list(out.non_tensor_batch["pasr_trained"])
    # q0 succeeded: two masked filler rows; q1: both reflections; q2: the unscored one is out
    assert trained == [False, False, True, True, False, True]
    assert list(out.non_tensor_batch["is_reflection"]) == [0.0, 0.0, 1.0, 1.0, 1.0, 1.0]
    responses = _texts(tokenizer, [out.batch["responses"][i] for i in range(len(out))])
    assert responses[2:] == [REFL(0), REFL(1), REFL(0), REFL(1)]
    prompts = _texts(tokenizer, [out.batch["prompts"][i] for i in range(len(out))])
    assert all("Your attempt:" in p and A(5) in p for p in prompts[2:4])  # the reflection chat on q1's attempt
    assert not any("Your reflection:" in p for p in prompts)  # no retry prompt in any row
    assert not any(A(2) in t or A(4) in t for t in prompts + responses)  # no retry answer in any row


def test_response_mask_is_exactly_the_reflection_tokens(rrr_step, tokenizer):
    out = rrr_step.out
    masked = _masked_tokens(out)
    eos = tokenizer.eos_token_id
    for i in (2, 3, 5):  # the trained reflections: every reflection token, EOS included, nothing else
        j = {2: 0, 3: 1, 5: 1}[i]
        assert masked[i] == tokenizer.encode(REFL(j), add_special_tokens=False) + [eos]
    for i in (0, 1, 4):  # filler rows and the reflection whose retry was not scored
        assert masked[i] == []
    # the response mask never reaches into the prompt part: it is (B, response width)
    assert out.batch["response_mask"].shape == out.batch["responses"].shape


def test_rewards_are_the_retry_success_at_the_last_reflection_token(rrr_step):
    out = rrr_step.out
    totals = out.batch["rm_scores"].sum(dim=-1).tolist()
    # q1: recovered, not; q2: unscored (a placeholder, the group's scored mean: masked), recovered
    assert totals == [0.0, 0.0, 1.0, 0.0, 1.0, 1.0]
    prompt_width = out.batch["prompts"].shape[1]
    lengths = out.batch["attention_mask"][:, prompt_width:].sum(dim=1)
    assert out.batch["rm_scores"][2].nonzero().flatten().tolist() == [int(lengths[2]) - 1]
    assert list(out.non_tensor_batch["acc"]) == [0.0, 0.0, 1.0, 0.0, 0.0, 1.0]
    assert list(out.non_tensor_batch["judge_error"]) == [0.0, 0.0, 0.0, 0.0, 1.0, 0.0]
    assert out.meta_info["reward_extra_keys"] == ["acc", "is_reflection", "judge_error"]


def test_fit_side_groups_reflections_by_the_failed_query(rrr_step, gen_batch, verl_mods):
    """fit()'s union with its repeated batch accepts the rows; GRPO groups by uid over the
    trained reflections only: q1's two compete, q2's lone scored reflection keeps its reward
    (verl: mean 0, std 1 for a single row); filler and unscored rows get advantage 0."""
    batch = fit_side(rrr_step.out, gen_batch, verl_mods, n=2)
    adv = batch.batch["advantages"]
    assert len(batch) == 6
    for i in (0, 1, 4):
        assert adv[i].abs().sum() == 0 and batch.batch["response_mask"][i].sum() == 0
    mask = batch.batch["response_mask"].bool()
    assert adv[2][mask[2]].unique().tolist() == pytest.approx([2**-0.5], abs=1e-4)
    assert adv[3][mask[3]].unique().tolist() == pytest.approx([-(2**-0.5)], abs=1e-4)
    assert adv[5][mask[5]].unique().tolist() == pytest.approx([1.0], abs=1e-4)
    assert (adv[~mask] == 0).all()  # nothing outside the reflection tokens
    from verl.workers.utils.padding import left_right_2_no_padding

    assert left_right_2_no_padding(batch.to_tensordict())["response_mask"].shape[0] == 6  # as the actor gets it


def test_step_metrics(rrr_step):
    m = rrr_step.metrics
    assert m["rrr/first_attempt_acc"] == pytest.approx(1 / 3)
    assert (m["rrr/failed_queries"], m["rrr/trained_rows"], m["rrr/verifier_errors"]) == (2.0, 3.0, 1.0)
    assert m["rrr/retry_acc"] == pytest.approx(2 / 3) and m["rrr/recovered_rate"] == 1.0
    assert m["rrr/masked_rows"] == 3.0 and m["rrr/truncated_prompts"] == 0.0
    assert m["rrr/zero_spread_groups"] == 0.0  # q1's two differ; q2's lone scored reflection is not a group
    assert m["rrr/reflection_length/mean"] > 0 and m["rrr/response_length/mean"] > 0 and m["rrr/retry_length/mean"] > 0
    timing = rrr_step.out.meta_info["timing"]
    assert {"rrr_attempt", "rrr_reflection", "rrr_retry", "rrr_judge"} <= set(timing)
    from recipe.verl_engine.rollout_wrapper import UNTRAINED_TOKENS_KEY

    assert rrr_step.out.meta_info[UNTRAINED_TOKENS_KEY] > 0  # attempts and retries
    assert rrr_step.manager.pop_metrics() == {}  # handed over once


def test_rollout_dump_is_the_local_engines_record_format(rrr_step, rrr_prompts):
    from data.records import iter_records

    records = list(iter_records(rrr_step.tmp / "rollouts" / "step_000005.jsonl", strict=True))
    by = {v: [r for r in records if r.variant == v] for v in ("attempt", "reflection", "retry")}
    assert [len(by[v]) for v in ("attempt", "reflection", "retry")] == [3, 4, 4] and len(records) == 11
    assert [r.acc for r in by["attempt"]] == [1.0, 0.0, 0.0]
    assert [(r.query_id, r.sample_index) for r in by["reflection"]] == [
        ("syn:1", 0),
        ("syn:1", 1),
        ("syn:2", 0),
        ("syn:2", 1),
    ]
    assert [r.acc for r in by["reflection"]] == [1.0, 0.0, None, 1.0]  # a reflection's acc is its retry's success
    assert by["reflection"][2].judge_error == "judge unavailable" and by["retry"][2].acc is None
    assert [r.response for r in by["reflection"]] == [REFL(0), REFL(1), REFL(0), REFL(1)]
    assert all(r.prompt == f"What is {k}+{k}?" for r, k in zip(by["retry"], (1, 1, 2, 2)))
    assert {r.engine for r in records} == {"verl"} and {r.prompt_version for r in records} == {rrr_prompts.version()}
    assert {r.step for r in records} == {5} and by["attempt"][0].gold == "0"


def test_retries_have_the_reflection_in_context(rrr_step, rrr_prompts):
    chats = rrr_step.inner.retry_chats
    assert len(chats) == 4
    for chat, (k, j) in zip(chats, [(1, 0), (1, 1), (2, 0), (2, 1)]):
        attempt = SCRIPT[k][0]
        assert chat == rrr_prompts.retry_chat(f"What is {k}+{k}?", attempt, REFL(j))


# --------------------------------------------------------------------------- edge cases
def test_reflections_are_cut_to_max_reflection_tokens(gen_batch, tokenizer, rrr_prompts, verl_mods, tmp_path):
    from data.records import iter_records

    inner = RrrScripted(tokenizer, rrr_prompts, verl_mods.agent_loop, reflection_pad=10, response_length=96)
    manager = _rrr_manager(inner, tokenizer, rrr_prompts, tmp_path, rrr={"max_reflection_tokens": 8})
    try:
        out = manager.generate_sequences(_train_gen_batch(gen_batch, 2))
    finally:
        manager.close()
    full = tokenizer.encode(REFL(0, 10), add_special_tokens=False)
    masked = _masked_tokens(out)
    assert masked[2] == full[:8] and masked[3][:3] == full[:3]  # cut, then trained as cut
    cut = tokenizer.decode(full[:8])
    assert inner.retry_chats[0][-1]["content"].count(cut.strip()) == 1  # the retry saw the cut reflection
    assert REFL(0, 10) not in inner.retry_chats[0][-1]["content"]
    reflections = [r for r in iter_records(tmp_path / "rollouts" / "step_000005.jsonl") if r.variant == "reflection"]
    assert reflections[0].response_tokens == 8 and reflections[0].finish_reason == "length"


def test_truncate_responses_equals_generating_with_the_limit(gen_batch, tokenizer, rrr_prompts, verl_mods):
    """Cutting a generated row to k tokens gives exactly the row verl's agent loop assembles
    for the first k tokens: ids, masks and position ids."""
    from recipe.verl_engine.batch_convert import truncate_responses
    from recipe.verl_engine.plain_rollouts import with_system_prompt

    class FirstK(RrrScripted):
        def response_ids(self, messages, seen):
            return super().response_ids(messages, seen)[:5]

    batch = with_system_prompt(gen_batch.gen, rrr_prompts.attempt_system)
    full = RrrScripted(tokenizer, rrr_prompts, verl_mods.agent_loop).generate_sequences(batch)
    first5 = FirstK(tokenizer, rrr_prompts, verl_mods.agent_loop).generate_sequences(batch)
    before = full.batch["responses"].clone()
    cut = truncate_responses(full, 5, tokenizer.pad_token_id)
    for key in ("prompts", "responses", "input_ids", "attention_mask", "response_mask", "position_ids"):
        assert torch.equal(cut.batch[key], first5.batch[key]), key
    assert torch.equal(full.batch["responses"], before)  # the input rows are left as they were
    assert truncate_responses(first5, 5, tokenizer.pad_token_id).batch["responses"].equal(first5.batch["responses"])


def test_a_step_without_failures_trains_nothing_and_skips_the_update(
    gen_batch, tokenizer, rrr_prompts, verl_mods, tmp_path, capsys
):
    solved = {k: (A(2 * k), []) for k in range(3)}
    inner = RrrScripted(tokenizer, rrr_prompts, verl_mods.agent_loop, script=solved)
    manager = _rrr_manager(inner, tokenizer, rrr_prompts, tmp_path)
    out, metrics = generate_and_close(manager, _train_gen_batch(gen_batch, 2))
    assert inner.calls == [4]  # no reflection, no retry pass
    assert len(out) == 6 and not out.non_tensor_batch["pasr_trained"].any() and out.batch["response_mask"].sum() == 0
    assert metrics["rrr/trained_rows"] == 0 and metrics["rrr/first_attempt_acc"] == 1.0
    assert "RRR WARNING step 5: nothing to train: 0 of 3 first attempts failed" in capsys.readouterr().err
    # the trainer does not send it to the actor (token-mean over zero tokens)
    t = verl_mods.trainer
    trainer = object.__new__(t.PasrRayTrainer)
    trainer.global_steps = 5
    trainer.async_rollout_manager = SimpleNamespace(pop_metrics=lambda: metrics)
    assert t.nothing_to_train(out)
    assert trainer._update_actor(out).meta_info["metrics"]["actor/update_skipped"] == 1.0
    batch = fit_side(out, gen_batch, verl_mods, n=2)  # fit() itself copes up to the update
    assert batch.batch["advantages"].abs().sum() == 0


def test_an_unscored_first_attempt_is_not_reflected_on(gen_batch, tokenizer, rrr_prompts, verl_mods, tmp_path):
    script = {**SCRIPT, 2: (A("ERR"), [A(4), A(4)])}  # q2's attempt: the verifier fails
    inner = RrrScripted(tokenizer, rrr_prompts, verl_mods.agent_loop, script=script)
    manager = _rrr_manager(inner, tokenizer, rrr_prompts, tmp_path)
    out, metrics = generate_and_close(manager, _train_gen_batch(gen_batch, 2))
    assert inner.calls == [4, 4, 4]  # q1's two reflections and retries, padded to 4 with copies of themselves
    assert {QUESTION.search(c[-1]["content"]).group(1) for c in inner.retry_chats} == {"1"}
    assert list(out.non_tensor_batch["pasr_trained"]) == [False, False, True, True, False, False]
    assert metrics["rrr/failed_queries"] == 1.0 and metrics["rrr/verifier_errors"] == 1.0
    assert metrics["rrr/first_attempt_acc"] == 0.5  # of the two scored attempts


def test_too_many_verifier_errors_stop_after_the_dump(gen_batch, tokenizer, rrr_prompts, verl_mods, tmp_path):
    from data.records import iter_records
    from recipe.verl_engine.rollout_wrapper import JudgeErrorRateExceeded

    inner = RrrScripted(tokenizer, rrr_prompts, verl_mods.agent_loop)
    manager = _rrr_manager(inner, tokenizer, rrr_prompts, tmp_path, max_judge_error_rate=0.1)
    try:
        with pytest.raises(JudgeErrorRateExceeded, match=r"step 5: the judge failed on 1 of 7 rollouts \(14%\)"):
            manager.generate_sequences(_train_gen_batch(gen_batch, 2))  # 3 attempts + 4 retries judged
        assert manager.pop_metrics() == {}
    finally:
        manager.close()
    assert len(list(iter_records(tmp_path / "rollouts" / "step_000005.jsonl"))) == 11


def test_rows_not_grouped_by_n_reflections_are_refused(gen_batch, tokenizer, rrr_prompts, verl_mods, tmp_path):
    from recipe.verl_engine.plain_rollouts import PasrBatchError

    manager = _rrr_manager(
        RrrScripted(tokenizer, rrr_prompts, verl_mods.agent_loop), tokenizer, rrr_prompts, tmp_path, n=4
    )
    try:
        with pytest.raises(PasrBatchError, match=r"not a multiple of rollout.n = rrr.n_reflections = 4"):
            manager.generate_sequences(_train_gen_batch(gen_batch, 2))
    finally:
        manager.close()


def test_prompts_that_fill_the_prompt_length_are_counted(
    gen_batch, tokenizer, rrr_prompts, verl_mods, tmp_path, capsys
):
    # attempt prompts fit in 120 tokens; the reflection and retry prompts (attempt + template) do not
    inner = RrrScripted(tokenizer, rrr_prompts, verl_mods.agent_loop, prompt_length=120)
    manager = _rrr_manager(inner, tokenizer, rrr_prompts, tmp_path)
    _, metrics = generate_and_close(manager, _train_gen_batch(gen_batch, 2))
    assert metrics["rrr/truncated_prompts"] == 8.0  # 4 reflection + 4 retry prompts
    assert "may have been cut from the left" in capsys.readouterr().err
