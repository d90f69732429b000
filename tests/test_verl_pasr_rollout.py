"""The PASR rollout wrapper on the verl engine (:mod:`recipe.verl_engine.rollout`), one training
step with scripted token ids: one generate call, only refine rows back, rewards per ``uid`` at the
last response token, the judge-error row masked, ``fit()``'s union and GRPO advantages on the
result (the same as the local engine's), the ``pasr/*`` metrics and the dump; the
judge-error stop and the no-spread warning."""

from __future__ import annotations

import pytest

from tests.verl_scripted_rollout import (  # noqa: F401  (gen_batch, prompts, tokenizer, train_step, verl_mods are fixtures)
    EXPECTED_TOTALS,
    SCRIPT,
    ExactJudge,
    P,
    ScriptedRollout,
    _manager,
    _row_totals,
    _train_gen_batch,
    _variant,
    fit_side,
    gen_batch,
    prompts,
    tokenizer,
    train_step,
    verl_mods,
)


def test_one_generate_call_and_only_refine_rows_come_back(train_step, tokenizer):
    # 9 refine + 9 plain rows in ONE call, padded to the divisor 4 -> 20
    assert train_step.inner.calls == [20]
    out = train_step.out
    assert len(out) == 9
    assert list(out.non_tensor_batch["uid"]) == list(train_step.rep.non_tensor_batch["uid"])
    texts = [tokenizer.decode(r, skip_special_tokens=True) for r in out.batch["responses"]]
    assert all("</answer>" in t for t in texts) and not any("Steps." in t for t in texts)


def test_refine_rewards_per_uid_at_the_last_response_token(train_step):
    out = train_step.out
    expected = [t for k in range(3) for t in EXPECTED_TOTALS[k]]
    expected[8] = (2.0 + 0.0) / 2  # judge error: masked; its placeholder score is the mean of its group's judged totals
    assert _row_totals(out) == pytest.approx(expected)
    lengths = out.batch["attention_mask"][:, out.batch["prompts"].shape[1] :].sum(dim=1)
    nonzero = [row.nonzero().flatten().tolist() for row in out.batch["rm_scores"]]
    for i, idx in enumerate(nonzero):
        assert idx in ([int(lengths[i]) - 1], [])  # a 0.0 score has no nonzero entry
    assert out.meta_info["reward_extra_keys"] == ["acc", "format_reward", "refine_reward", "has_refine", "judge_error"]
    assert list(out.non_tensor_batch["refine_reward"]) == [-0.5, -0.5, 0.0, 1.0, 0.0, 0.0, 0.0, -1.0, 0.0]
    assert list(out.non_tensor_batch["judge_error"]) == [0.0] * 8 + [1.0]
    assert "pasr_score" in out.meta_info["timing"] and "agent_loop/generate_sequences/mean" in out.meta_info["timing"]


def test_judge_error_row_is_masked_not_scored_zero(train_step):
    mask = train_step.out.batch["response_mask"]
    assert mask[8].sum() == 0
    assert all(mask[i].sum() > 0 for i in range(8))
    assert list(train_step.out.non_tensor_batch["pasr_trained"]) == [True] * 8 + [False]


def _fit_side(train_step, gen_batch, verl_mods):
    return fit_side(train_step.out, gen_batch, verl_mods, n=3)


def test_fit_side_union_and_grpo_see_refine_rows_only(train_step, gen_batch, verl_mods):
    """Plain rows never get to fit(); the masked row gets no advantage and is outside its
    group's statistics."""
    batch = _fit_side(train_step, gen_batch, verl_mods)
    assert len(batch) == 9
    adv = batch.batch["advantages"]
    assert adv[8].abs().sum() == 0 and batch.batch["response_mask"][8].sum() == 0
    # q1: totals 3, 2, 1 -> normalised advantages +1, 0, -1
    assert adv[3].max().item() == pytest.approx(1.0, abs=1e-4) and adv[5].min().item() == pytest.approx(-1.0, abs=1e-4)
    # q2: judged totals 2, 0 (the third a judge error): mean 1 and std sqrt(2) over those two only
    assert adv[6].max().item() == pytest.approx(2**-0.5, abs=1e-4) and adv[7].min().item() == pytest.approx(
        -(2**-0.5), abs=1e-4
    )
    # the batch converts the way _compute_old_log_prob / _update_actor send it to the workers
    from verl.workers.utils.padding import left_right_2_no_padding

    td = left_right_2_no_padding(batch.to_tensordict())
    assert td["response_mask"].shape[0] == 9


def test_both_engines_give_one_step_the_same_records_scores_masks_and_advantages(
    train_step, gen_batch, verl_mods, tokenizer
):
    """The scripted step (the same texts, golds and a judge that fails on one refine rollout)
    through the local engine's path (recipe.scoring on Rollouts, then policy_update.build_batch)
    and the verl engine's (PasrRolloutManager on verl's DataProto rows, then fit()'s advantage
    step): the same records, scores, masks and GRPO advantages."""
    import dataclasses

    from data.records import iter_records
    from prompts import THINK_PREFILL
    from recipe.local_engine.config import AlgoConfig
    from recipe.local_engine.policy_update import TrainRollout, build_batch
    from recipe.scoring import Rollout, group_scores, judge_and_record

    manager = train_step.manager
    assert (
        manager.cfg.prefill_think
    )  # as the cpu preset: the local engine's texts start with the prefill, its tokens are prompt
    rollouts = []  # as the local engine lays a step out: per query, its refine then its plain rollouts
    for k, (refine, plain) in SCRIPT.items():
        for variant, texts in (("refine", refine), ("plain", plain)):
            for j, text in enumerate(texts):
                answered = text.removeprefix(THINK_PREFILL)  # what the model wrote after the prefill
                n_tokens = len(tokenizer.encode(answered, add_special_tokens=False)) + 1  # EOS included
                rollouts.append(
                    Rollout(
                        f"syn:{k}",
                        "synthetic",
                        f"What is {k}+{k}?",
                        str(2 * k),
                        variant,
                        THINK_PREFILL + answered,
                        n_tokens,
                        "stop",
                        j,
                    )
                )
    records = judge_and_record(
        rollouts, ExactJudge(), run_id="test-run", step=5, engine="local", prompt_versions=manager.prompt_versions
    )
    scores, mask = group_scores(records, manager.cfg)

    def key(r):
        return (r.query_id, r.variant, r.sample_index)

    local = {key(r): (r, s, m) for r, s, m in zip(records, scores, mask)}
    verl_records = list(iter_records(train_step.tmp / "rollouts" / "step_000005.jsonl", strict=True))
    assert sorted(map(key, verl_records)) == sorted(local)
    for v in verl_records:
        assert v == dataclasses.replace(local[key(v)][0], engine="verl")

    out = train_step.out  # the refine rows fit() gets, query by query
    refine_keys = [(f"syn:{k}", "refine", j) for k in range(3) for j in range(3)]
    assert _row_totals(out) == pytest.approx([local[k][1] for k in refine_keys])
    local_mask = [local[k][2] for k in refine_keys]
    assert local_mask == [True] * 8 + [False]
    assert list(out.non_tensor_batch["pasr_trained"]) == local_mask
    assert [bool(row.sum()) for row in out.batch["response_mask"]] == local_mask

    prompt_len = out.batch["prompts"].shape[1]
    train = []
    for i, k in enumerate(refine_keys):
        prompt_ids = out.batch["prompts"][i][out.batch["attention_mask"][i, :prompt_len].bool()].tolist()
        length = int(out.batch["attention_mask"][i, prompt_len:].sum())
        train.append(TrainRollout(k[0], prompt_ids, out.batch["responses"][i, :length].tolist(), local[k][1]))
    local_batch = build_batch(train, tokenizer.pad_token_id, AlgoConfig(), mask=local_mask)
    verl_adv = _fit_side(train_step, gen_batch, verl_mods).batch["advantages"]
    trained = [i for i, m in enumerate(local_mask) if m]
    assert len(local_batch) == len(trained)
    assert local_batch.batch["advantages"][:, 0].tolist() == pytest.approx(verl_adv[trained, 0].tolist(), abs=1e-6)
    assert verl_adv[[i for i, m in enumerate(local_mask) if not m]].abs().sum() == 0


def test_step_metrics_on_the_scripted_step(train_step):
    m = train_step.metrics
    assert m["pasr/format_pass_rate"] == 1.0
    assert m["pasr/refine_rate"] == pytest.approx(4 / 9)
    assert m["pasr/acc_refine"] == pytest.approx(6 / 8)
    assert m["pasr/acc_plain"] == pytest.approx(7 / 9)
    assert m["pasr/judge_errors"] == 1.0
    assert m["pasr/reward_mean"] == pytest.approx(13 / 8)
    assert m["pasr/refine_reward_mean"] == pytest.approx(-1 / 8)
    assert m["pasr/refine_outcome/tie"] == pytest.approx(2 / 9)
    assert m["pasr/refine_outcome/better"] == pytest.approx(1 / 9)
    assert m["pasr/refine_outcome/worse"] == pytest.approx(1 / 9)
    assert m["pasr/refine_outcome/none"] == pytest.approx(4 / 9)
    assert m["pasr/refine_outcome/judge_error"] == pytest.approx(1 / 9)
    assert m["pasr/draft_acc"] == pytest.approx(1 / 4)  # R(a)'s draft "2" is right for query 1 only
    assert m["pasr/refine_break_rate"] == 0.0  # ... and query 1's R(2) keeps it right: no break among 4
    assert (m["pasr/masked_rows"], m["pasr/plain_rows"]) == (1.0, 9.0)
    assert train_step.manager.pop_metrics() == {}  # handed over once


def test_rollout_dump_is_the_record_format(train_step):
    from data.records import iter_records

    path = train_step.tmp / "rollouts" / "step_000005.jsonl"
    records = list(iter_records(path, strict=True))
    assert len(records) == 18 and {r.engine for r in records} == {"verl"} and {r.step for r in records} == {5}
    refine = [r for r in records if r.variant == "refine"]
    plain = [r for r in records if r.variant == "plain"]
    assert len(refine) == len(plain) == 9 and all(r.total_reward is None for r in plain)
    assert [r.total_reward for r in refine] == [t for k in range(3) for t in EXPECTED_TOTALS[k]]
    assert [r.query_id for r in refine[:3]] == ["syn:0"] * 3 and refine[0].gold == "0"
    assert refine[8].judge_error == "judge unavailable" and refine[8].acc is None
    assert (
        refine[0].prompt == "What is 0+0?"
        and refine[0].prompt_version
        and plain[0].prompt_version != refine[0].prompt_version
    )


def test_decode_keeps_pasr_tags_that_a_tokenizer_marks_special():
    from transformers import AutoTokenizer

    from runtime.decoding import decode_response
    from runtime.model_loading import resolve_model_path

    tok = AutoTokenizer.from_pretrained(resolve_model_path("smollm2"))
    tok.add_special_tokens({"additional_special_tokens": ["<think>", "</think>"]})  # as some chat models do
    ids = tok.encode("<think>a<refine>b</refine></think><answer>1</answer>", add_special_tokens=False)
    ids += [tok.eos_token_id, tok.pad_token_id]
    assert decode_response(tok, ids) == "<think>a<refine>b</refine></think><answer>1</answer>"


# --------------------------------------------------------------------------- judge errors, no spread (11.3, 11.7)
def test_a_step_over_the_judge_error_limit_stops_after_its_dump(
    gen_batch, tokenizer, prompts, verl_mods, tmp_path, capsys
):
    """The stop the local engine takes too (recipe.judge_errors.check_judge_errors): past
    pasr.max_judge_error_rate the step is dumped and the run stops naming the key; below it, a
    warning on stderr."""
    from data.records import iter_records
    from recipe.verl_engine.rollout_wrapper import JudgeErrorRateExceeded

    inner = ScriptedRollout(tokenizer, prompts, verl_mods.agent_loop)
    manager = _manager(inner, tokenizer, prompts, tmp_path, max_judge_error_rate=0.05)  # 1 error in 18 rows
    try:
        with pytest.raises(
            JudgeErrorRateExceeded,
            match=r"step 5: the judge failed on 1 of 18 rollouts \(6%\), more than "
            r"pasr.max_judge_error_rate=0.05; first error: 'judge unavailable'",
        ):
            manager.generate_sequences(_train_gen_batch(gen_batch, 3))
        assert manager.pop_metrics() == {}  # nothing to train on, nothing logged
        assert len(list(iter_records(tmp_path / "rollouts" / "step_000005.jsonl"))) == 18  # dumped for inspection
        manager.max_judge_error_rate = 0.06
        capsys.readouterr()
        assert len(manager.generate_sequences(_train_gen_batch(gen_batch, 3))) == 9
        assert "WARNING: the judge failed on 1 of 18 rollouts of step 5" in capsys.readouterr().err
    finally:
        manager.close()


class UnformattedRollout(ScriptedRollout):
    """A base model that ignores the format: every refine rollout gets the same reward."""

    def respond(self, messages, seen) -> str:
        return "The answer is 4." if _variant(messages, self.prompts) == "refine" else P(4)


def test_zero_spread_groups_metric_and_loud_warning(
    train_step, gen_batch, tokenizer, prompts, verl_mods, tmp_path, capsys
):
    assert train_step.metrics["pasr/zero_spread_groups"] == 0.0
    manager = _manager(UnformattedRollout(tokenizer, prompts, verl_mods.agent_loop), tokenizer, prompts, tmp_path)
    try:
        out = manager.generate_sequences(_train_gen_batch(gen_batch, 3))
        metrics = manager.pop_metrics()
        first = capsys.readouterr().err
        manager.generate_sequences(_train_gen_batch(gen_batch, 3, step=6))
        second = capsys.readouterr().err
    finally:
        manager.close()
    assert metrics["pasr/zero_spread_groups"] == 1.0 and metrics["pasr/format_pass_rate"] == 0.0
    assert set(_row_totals(out)) == {-1.0}
    assert "PASR WARNING step 5: no refine group has any reward spread" in first and "Cold start" in first
    assert "PASR WARNING step 6" in second and "Cold start" not in second  # the hint once, the warning every step


def test_zero_spread_fraction():
    from recipe.metrics import zero_spread_fraction

    assert zero_spread_fraction([1, 1, 0, 2, 3, 3], ["a", "a", "b", "b", "c", "c"]) == pytest.approx(2 / 3)
    assert zero_spread_fraction([], []) == 0.0
