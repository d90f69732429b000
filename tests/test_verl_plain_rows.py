"""The plain rows of a PASR step on the verl engine: the combined batch (the refine rows, then
each query's plain rows under the plain system prompt) built from a real ``RLHFDataset`` batch
after verl's ``_get_gen_batch``, its split back, its refusals, and the query ids per ``uid``."""

from __future__ import annotations

import numpy as np
import pytest

from tests.verl_scripted_rollout import _train_gen_batch, gen_batch, prompts, tokenizer, verl_mods  # noqa: F401  (fixtures)


def test_combined_batch_from_a_real_rlhf_batch(gen_batch, prompts):
    from recipe.verl_engine.plain_rollouts import build_combined_batch, split_combined

    rep = _train_gen_batch(gen_batch, 3)
    before = [list(map(dict, m)) for m in rep.non_tensor_batch["raw_prompt"]]
    combined, layout = build_combined_batch(
        rep, n_refine=3, n_plain=2, refine_system=prompts.refine, plain_system=prompts.plain
    )
    assert (layout.refine_rows, layout.plain_rows, len(combined)) == (9, 6, 15)
    uids = combined.non_tensor_batch["uid"]
    q = gen_batch.gen.non_tensor_batch["uid"]
    assert list(uids[:9]) == list(np.repeat(q, 3)) and list(uids[9:]) == list(np.repeat(q, 2))
    systems = [m[0]["content"] for m in combined.non_tensor_batch["raw_prompt"]]
    assert systems[:9] == [prompts.refine] * 9 and systems[9:] == [prompts.plain] * 6
    users = [m[-1]["content"] for m in combined.non_tensor_batch["raw_prompt"]]
    assert users[9:] == [f"What is {k}+{k}?" for k in range(3) for _ in range(2)]
    for key in ("extra_info", "reward_model", "data_source", "index"):
        assert list(combined.non_tensor_batch[key][9:]) == list(np.repeat(gen_batch.gen.non_tensor_batch[key], 2))
    assert combined.meta_info["global_steps"] == 5
    # the caller's batch (and messages shared between its repeated rows) are untouched
    assert [list(map(dict, m)) for m in rep.non_tensor_batch["raw_prompt"]] == before
    refine, plain = split_combined(combined, layout, expected_uids=uids)
    assert list(refine.non_tensor_batch["uid"]) == list(rep.non_tensor_batch["uid"]) and len(plain) == 6


def test_combined_batch_rejects_wrong_grouping(gen_batch, prompts):
    from recipe.verl_engine.plain_rollouts import PasrBatchError, build_combined_batch, split_combined

    kw = dict(refine_system=prompts.refine, plain_system=prompts.plain)
    rep = gen_batch.gen.repeat(repeat_times=2, interleave=False)  # q0 q1 q2 q0 q1 q2: not grouped
    with pytest.raises(PasrBatchError, match="not grouped by uid"):
        build_combined_batch(rep, n_refine=2, n_plain=1, **kw)
    with pytest.raises(PasrBatchError, match="not a multiple"):
        build_combined_batch(_train_gen_batch(gen_batch, 2), n_refine=4, n_plain=1, **kw)
    combined, layout = build_combined_batch(_train_gen_batch(gen_batch, 2), n_refine=2, n_plain=1, **kw)
    shuffled = combined.select_idxs(np.arange(len(combined))[::-1].copy())
    with pytest.raises(PasrBatchError, match="uid mismatch"):
        split_combined(shuffled, layout, expected_uids=combined.non_tensor_batch["uid"])


def test_query_ids_unique_per_uid():
    from verl import DataProto

    from recipe.verl_engine.batch_convert import query_ids

    d = DataProto.from_dict(
        non_tensors={
            "uid": np.array(["a", "a", "b", "b"], dtype=object),
            "extra_info": np.array([{"id": "q1"}, {"id": "q1"}, {"id": "q1"}, {"id": "q1"}], dtype=object),
        }
    )
    assert query_ids(d) == ["q1", "q1", "q1@b", "q1@b"]
