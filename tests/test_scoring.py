"""Step scoring shared by both engines: judge once, PASR reward per query, one record per rollout."""

from recipe.pasr_config import PasrConfig
from recipe.scoring import Rollout, score_rollouts
from rewards.judges.rule import RuleJudge


def test_score_rollouts_per_query_groups():
    q1 = dict(query_id="q1", data_source="synthetic", question="2+2?", gold="4")
    q2 = dict(query_id="q2", data_source="synthetic", question="3+3?", gold="6")
    rollouts = [
        Rollout(**q1, variant="refine", text="<think>2+2=5 <refine>2+2=4</refine></think><answer>4</answer>", n_tokens=9),
        Rollout(**q1, variant="refine", text="<think>2+2=4</think><answer>4</answer>", n_tokens=7, sample_index=1),
        Rollout(**q1, variant="plain", text="It is \\boxed{5}", n_tokens=5),
        Rollout(**q1, variant="plain", text="<answer>4</answer>", n_tokens=4, sample_index=1),
        Rollout(**q2, variant="refine", text="<think>x <refine>y</refine></think><answer>7</answer>", n_tokens=8),
        Rollout(**q2, variant="plain", text="<answer>7</answer>", n_tokens=3),
    ]
    recs = score_rollouts(rollouts, RuleJudge(mode="inline"), PasrConfig(), run_id="r", step=2, engine="local")
    assert [r.acc for r in recs] == [1.0, 1.0, 0.0, 1.0, 0.0, 0.0]
    assert [r.refine_outcome for r in recs] == ["better", "none", None, None, "tie", None]
    assert recs[0].total_reward == 1.0 + 1.0 + 1.0 and recs[1].total_reward == 2.0 and recs[4].total_reward == 1.0 + 0.0 - 0.5
    assert recs[2].format_reason == "missing_think" and recs[3].extracted_answer == "4"
    assert recs[0].n_refine == 1 and recs[0].format_ok and recs[0].extra["baseline"] == 0.5
    assert all(r.step == 2 and r.engine == "local" for r in recs)
