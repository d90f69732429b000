"""The step core shared by both engines and ``pasr eval``: judge once, one record per rollout,
the PASR reward per query, and the one judge-error policy."""

import pytest

from recipe.pasr_config import PasrConfig
from recipe.scoring import Rollout, group_scores, judge_and_record, score_rollouts
from rewards.judges.base import JudgeResult
from rewards.judges.rule import RuleJudge

Q1 = dict(query_id="q1", data_source="synthetic", question="2+2?", gold="4")
Q2 = dict(query_id="q2", data_source="synthetic", question="3+3?", gold="6")


def _step():
    return [
        Rollout(
            **Q1, variant="refine", text="<think>2+2=5 <refine>2+2=4</refine></think><answer>4</answer>", n_tokens=9
        ),
        Rollout(**Q1, variant="refine", text="<think>2+2=4</think><answer>4</answer>", n_tokens=7, sample_index=1),
        Rollout(**Q1, variant="plain", text="It is \\boxed{5}", n_tokens=5),
        Rollout(**Q1, variant="plain", text="<answer>4</answer>", n_tokens=4, sample_index=1),
        Rollout(**Q2, variant="refine", text="<think>x <refine>y</refine></think><answer>7</answer>", n_tokens=8),
        Rollout(**Q2, variant="plain", text="<answer>7</answer>", n_tokens=3),
    ]


def test_score_rollouts_per_query_groups():
    recs = score_rollouts(_step(), RuleJudge(mode="inline"), PasrConfig(), run_id="r", step=2, engine="local")
    assert [r.acc for r in recs] == [1.0, 1.0, 0.0, 1.0, 0.0, 0.0]
    assert [r.refine_outcome for r in recs] == ["better", "none", None, None, "tie", None]
    assert (
        recs[0].total_reward == 1.0 + 1.0 + 1.0
        and recs[1].total_reward == 2.0
        and recs[4].total_reward == 1.0 + 0.0 - 0.5
    )
    assert recs[2].format_reason == "missing_think" and recs[3].extracted_answer == "4"
    assert recs[0].n_refine == 1 and recs[0].format_ok and recs[0].extra["baseline"] == 0.5
    assert all(r.step == 2 and r.engine == "local" for r in recs)


def test_group_scores_applies_the_configured_empty_refine_rule():
    """pasr.empty_refine_value reaches the reward through the step core both engines share."""
    cfg = PasrConfig(empty_refine_value=0.0)
    recs = score_rollouts(_step(), RuleJudge(mode="inline"), cfg, run_id="r", step=2, engine="local")
    # q1's refine states a new value (4 after 2+2=5): compared as before; q2's "y" adds nothing
    assert [r.refine_outcome for r in recs] == ["better", "none", None, None, "empty", None]
    assert recs[4].total_reward == 1.0 + 0.0 + 0.0  # not the paper's -0.5 tie


class FailsOn:
    """Scores 1 for an answer equal to the gold; fails (a timeout, say) on the answers named."""

    name = "fails-on"

    def __init__(self, *answers):
        self.answers = set(answers)

    async def score_many(self, items):
        return [
            JudgeResult.failed("timeout") if i.answer in self.answers else JudgeResult(float(i.answer == i.gold))
            for i in items
        ]


def test_a_judge_error_is_masked_and_never_scored_zero():
    records = judge_and_record(_step(), FailsOn("7", "5"), run_id="r", step=1, engine="local")
    assert [r.judge_error for r in records] == [None, None, "timeout", None, "timeout", "timeout"]
    scores, mask = group_scores(records, PasrConfig())
    # q1: the failed plain rollout is left out of the baseline (1/1, not 1/2): refining ties
    assert records[0].refine_outcome == "tie" and records[0].extra["baseline"] == 1.0
    assert mask == [True, True, False, False, False, False]  # plain rows are never trained on
    assert scores[:2] == [1.0 + 1.0 - 0.5, 2.0]
    # q2: its only refine rollout failed: no reward, masked, its placeholder score is not a reward
    assert records[4].total_reward is None and records[4].refine_outcome == "judge_error" and scores[4] == 0.0


def test_a_failed_rows_placeholder_is_its_groups_judged_mean():
    rollouts = [
        Rollout(**Q1, variant="refine", text=f"<think>a</think><answer>{a}</answer>", n_tokens=5, sample_index=k)
        for k, a in enumerate(["4", "3", "9"])
    ] + [Rollout(**Q1, variant="plain", text="<answer>4</answer>", n_tokens=3)]
    records = judge_and_record(rollouts, FailsOn("9"), run_id="r", step=1, engine="local")
    scores, mask = group_scores(records, PasrConfig())
    assert mask == [True, True, False, False] and scores[2] == pytest.approx((2.0 + 1.0) / 2)


class Raises:
    name = "raises"

    async def score_many(self, items):
        raise ConnectionError("judge host down\nmore")


def test_a_judge_that_raises_makes_every_rollout_a_judge_error():
    records = judge_and_record(_step(), Raises(), run_id="r", step=1, engine="local")
    assert all(r.acc is None for r in records)
    assert {r.judge_error for r in records} == {"judge failed: ConnectionError: judge host down"}
    assert group_scores(records, PasrConfig())[1] == [False] * 6


def test_eval_records_carry_dataset_extra_and_one_prompt_version():
    r = Rollout(**Q1, variant="self_refine:answer", text="so 4", n_tokens=2, dataset="gsm8k", extra={"method": "m"})
    (rec,) = judge_and_record(
        [r],
        RuleJudge(mode="inline"),
        run_id="e",
        step=None,
        engine="eval",
        prompt_versions="v1",
        fallback_last_number=True,
    )
    assert (rec.acc, rec.dataset, rec.prompt_version, rec.extra["method"]) == (1.0, "gsm8k", "v1", "m")
    with pytest.raises(ValueError, match="variant"):
        group_scores([rec], PasrConfig())


def test_local_batch_leaves_masked_rows_out_of_the_group_statistics():
    """build_batch: GRPO over the trained rows only (mean 1, std sqrt 2 for scores 2 and 0),
    the masked row not in the batch; with it in the statistics the advantages would be +-1."""
    from recipe.local_engine.config import AlgoConfig
    from recipe.local_engine.policy_update import TrainRollout, build_batch

    rows = [TrainRollout("q", [1, 2], [3, 4], s) for s in (2.0, 0.0, 1.0)]
    batch = build_batch(rows, 0, AlgoConfig(), mask=[True, True, False])
    assert len(batch) == 2
    assert batch.batch["advantages"][:, 0].tolist() == pytest.approx([2**-0.5, -(2**-0.5)], abs=1e-5)
    assert build_batch(rows, 0, AlgoConfig()).batch["advantages"][:, 0].tolist() == pytest.approx(
        [1.0, -1.0, 0.0], abs=1e-5
    )


def test_a_rollout_without_an_answer_is_wrong_even_when_the_judge_breaks():
    """No answer is a wrong answer (acc 0) with or without a judge: a judge that raises makes
    the answered rollouts judge errors, never the ones it had nothing to judge."""
    rollouts = [
        Rollout(**Q1, variant="refine", text="<think>no idea</think>", n_tokens=3),
        Rollout(**Q1, variant="refine", text="<think>2+2</think><answer>4</answer>", n_tokens=5, sample_index=1),
        Rollout(**Q1, variant="refine", text="<answer> </answer>", n_tokens=2, sample_index=2),
    ]
    records = judge_and_record(rollouts, Raises(), run_id="r", step=1, engine="local")
    assert [(r.acc, r.judge_error) for r in records] == [
        (0.0, None),
        (None, "judge failed: ConnectionError: judge host down"),
        (0.0, None),
    ]


class LeaksItsKey:
    name = "leaks"

    async def score_many(self, items):
        raise RuntimeError("POST failed; sent Authorization: Bearer sk-live-abcdefghijklmnop1234")


def test_a_judge_exception_is_redacted_before_it_reaches_a_record():
    (record,) = judge_and_record(_step()[:1], LeaksItsKey(), run_id="r", step=1, engine="local")
    assert record.judge_error == "judge failed: RuntimeError: POST failed; sent Authorization: [REDACTED]"
