"""Reflect, Retry, Reward's validation on the verl engine, on CPU: one greedy reflection and retry
per failed first attempt, row-aligned with the validation batch, and verl's own ``_validate``
reading the RRR scores (the core figure: the accuracy after at most one retry). The rollout is
tests/rrr_scripted_rollout.py's."""

from __future__ import annotations

import pytest

from tests.rrr_scripted_rollout import (  # noqa: F401  (gen_batch, prompts, tokenizer, val_dataset, verl_mods are fixtures)
    RRR_OK,
    RrrScripted,
    _rrr_manager,
    gen_batch,
    prompts,
    tokenizer,
    val_dataset,
    verl_mods,
)
from tests.verl_compose import _compose
from tests.verl_scripted_rollout import generate_and_close, validation_batch


def test_validation_is_one_greedy_reflection_and_retry_per_failure(
    gen_batch, tokenizer, rrr_prompts, verl_mods, tmp_path
):
    from data.records import iter_records

    inner = RrrScripted(tokenizer, rrr_prompts, verl_mods.agent_loop)
    manager = _rrr_manager(inner, tokenizer, rrr_prompts, tmp_path)
    out, metrics = generate_and_close(manager, validation_batch(gen_batch))
    assert inner.calls == [4, 4, 4] and all(m["validate"] for m in inner.call_meta)  # every pass greedy
    assert len(out) == 3  # row-aligned with the validation batch: the first attempts
    # q0 right at once; q1 recovered by its one reflection; q2's retry unscored (counted 0)
    assert out.batch["rm_scores"].sum(dim=-1).tolist() == [1.0, 1.0, 0.0]
    nt = out.non_tensor_batch
    assert list(nt["first_attempt_acc"]) == [1.0, 0.0, 0.0] and list(nt["retried"]) == [0.0, 1.0, 1.0]
    assert list(nt["recovered"]) == [0.0, 1.0, 0.0] and list(nt["judge_error"]) == [0.0, 0.0, 1.0]
    records = list(iter_records(tmp_path / "rollouts" / "val_step_000000.jsonl", strict=True))
    assert [r.variant for r in records] == ["attempt"] * 3 + ["reflection"] * 2 + ["retry"] * 2
    assert {r.dataset for r in records} == {"val"}
    assert metrics == {}  # validation hands no training metrics over


def test_verls_own_validate_reads_the_rrr_scores(verl_mods, tokenizer, rrr_prompts, tmp_path, val_dataset):
    """verl's _validate (padding to agent.num_workers, extract_reward, per data source means)
    on the RRR rollout: the core figure is the accuracy after at most one retry."""
    from torchdata.stateful_dataloader import StatefulDataLoader
    from verl.utils.dataset.rl_dataset import collate_fn

    from data.records import iter_records

    t = object.__new__(verl_mods.trainer.PasrRayTrainer)
    t.config = _compose([*RRR_OK, "actor_rollout_ref.rollout.agent.num_workers=4"])
    t.tokenizer = tokenizer
    t.use_rm = False
    t.global_steps = 4
    t.val_dataloader = StatefulDataLoader(
        val_dataset, batch_size=len(val_dataset), shuffle=False, collate_fn=collate_fn
    )
    inner = RrrScripted(tokenizer, rrr_prompts, verl_mods.agent_loop)
    t.async_rollout_manager = _rrr_manager(inner, tokenizer, rrr_prompts, tmp_path)
    try:
        metrics = t._validate()
    finally:
        t.async_rollout_manager.close()
    assert metrics["val-core/synthetic/acc/mean@1"] == pytest.approx(2 / 3)
    assert metrics["val-aux/synthetic/first_attempt_acc/mean@1"] == pytest.approx(1 / 3)
    assert metrics["val-aux/synthetic/recovered/mean@1"] == pytest.approx(1 / 3)
    records = list(iter_records(tmp_path / "rollouts" / "val_step_000004.jsonl", strict=True))
    assert sum(r.variant == "attempt" for r in records) == 3  # verl's padding copies are not dumped
