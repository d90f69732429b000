"""Validation on the verl engine: validation batches get the refine prompt and no plain rows, and
verl's own ``_validate`` (its padding to ``agent.num_workers``, several batches with
``data.val_batch_size``) dumps each question's samples once per validation (issue 11.5)."""

from __future__ import annotations

import pytest

from tests.verl_compose import _compose
from tests.verl_scripted_rollout import (  # noqa: F401  (gen_batch, prompts, tokenizer, val_dataset, verl_mods are fixtures)
    ScriptedRollout,
    _manager,
    _row_totals,
    gen_batch,
    generate_and_close,
    prompts,
    tokenizer,
    val_dataset,
    validation_batch,
    verl_mods,
)


def test_validation_batches_are_scored_without_plain_rows(gen_batch, tokenizer, prompts, verl_mods, tmp_path):
    inner = ScriptedRollout(tokenizer, prompts, verl_mods.agent_loop)
    manager = _manager(inner, tokenizer, prompts, tmp_path)
    out, metrics = generate_and_close(manager, validation_batch(gen_batch))
    assert inner.calls == [4] and len(out) == 3  # padded to the divisor, then unpadded
    # first refine script per query: R(0) right, R(2) right, N(4) right
    assert _row_totals(out) == [1.0, 1.0, 1.0]
    assert metrics == {}  # validation hands no training metrics over
    assert (tmp_path / "rollouts" / "val_step_000000.jsonl").is_file()


def _validating_trainer(verl_mods, tokenizer, prompts, tmp_path, val_dataset, *, val_batch_size, val_n, step):
    """A PasrRayTrainer with what verl's own _validate reads: config, val dataloader (as
    _create_dataloader builds it), tokenizer, and the PASR rollout around scripted generation."""
    from torchdata.stateful_dataloader import StatefulDataLoader
    from verl.utils.dataset.rl_dataset import collate_fn

    t = object.__new__(verl_mods.trainer.PasrRayTrainer)
    t.config = _compose(
        [f"actor_rollout_ref.rollout.val_kwargs.n={val_n}", "actor_rollout_ref.rollout.agent.num_workers=4"]
    )
    t.tokenizer = tokenizer
    t.use_rm = False
    t.global_steps = step
    t.val_dataloader = StatefulDataLoader(val_dataset, batch_size=val_batch_size, shuffle=False, collate_fn=collate_fn)
    inner = ScriptedRollout(tokenizer, prompts, verl_mods.agent_loop)
    t.async_rollout_manager = _manager(inner, tokenizer, prompts, tmp_path, size_divisor=4, val_n=val_n)
    return t, inner


@pytest.mark.parametrize("val_batch_size,val_n,calls", [(None, 1, [4]), (2, 1, [4, 4]), (2, 2, [4, 4])])
def test_validation_dump_holds_each_question_once(
    verl_mods, tokenizer, prompts, tmp_path, val_dataset, val_batch_size, val_n, calls
):
    """verl's own _validate: batches padded to agent.num_workers with copies of their first rows,
    several batches with data.val_batch_size; the dump has each question's val_n samples once."""
    from data.records import iter_records

    t, inner = _validating_trainer(
        verl_mods,
        tokenizer,
        prompts,
        tmp_path,
        val_dataset,
        val_batch_size=val_batch_size or len(val_dataset),
        val_n=val_n,
        step=7,
    )
    try:
        metrics = t._validate()
    finally:
        t.async_rollout_manager.close()
    assert inner.calls == calls  # verl padded: 3 -> 4, or 2+1 -> 4+4 (with n=2: 4 + 2 -> 4 + 4)
    records = list(iter_records(tmp_path / "rollouts" / "val_step_000007.jsonl", strict=True))
    assert len(records) == 3 * val_n
    assert sorted((r.query_id, r.sample_index) for r in records) == [
        (f"val:{k}", i) for k in range(3) for i in range(val_n)
    ]
    assert {r.dataset for r in records} == {"val"} and {r.step for r in records} == {7}
    # verl's metrics see the unpadded rows: the first refine answers are right for every question
    assert metrics[f"val-core/synthetic/acc/mean@{val_n}"] == pytest.approx(1.0 if val_n == 1 else 5 / 6)


def test_each_validation_starts_its_own_dump(verl_mods, tokenizer, prompts, tmp_path, val_dataset):
    from data.records import iter_records

    t, _ = _validating_trainer(verl_mods, tokenizer, prompts, tmp_path, val_dataset, val_batch_size=2, val_n=1, step=3)
    try:
        t._validate()
        t.global_steps = 6
        t._validate()
    finally:
        t.async_rollout_manager.close()
    for step in (3, 6):
        assert len(list(iter_records(tmp_path / "rollouts" / f"val_step_{step:06d}.jsonl"))) == 3
    # a resumed run validating the same step again rewrites that step's file instead of appending
    t2, _ = _validating_trainer(verl_mods, tokenizer, prompts, tmp_path, val_dataset, val_batch_size=2, val_n=1, step=6)
    try:
        t2._validate()
    finally:
        t2.async_rollout_manager.close()
    assert len(list(iter_records(tmp_path / "rollouts" / "val_step_000006.jsonl"))) == 3
