"""Reflect, Retry, Reward: the step's data logic (recipe/rrr_step.py) on a scripted step."""

from __future__ import annotations

import math

import pytest

from recipe.rrr_step import (
    Attempt,
    Reflection,
    RrrPrompts,
    fill,
    reflection_requests,
    rrr_metrics,
    select_failures,
    training_rows,
)

PAD = 0

# A scripted step: q0 solved at once, q1 and q2 failed (q1 recovers once in two retries, q2
# never), q3's verifier failed (neither a success nor a failure).
ATTEMPTS = [
    Attempt("q0", "Using the numbers 1, 2, 3, ... equals 6.", "<answer>1 + 2 + 3</answer>", 1.0),
    Attempt("q1", "Using the numbers 4, 5, 25, ... equals 80.", "<answer>25 * 4 - 5</answer>", 0.0),
    Attempt("q2", "Using the numbers 7, 8, 9, ... equals 11.", "<answer>{7 + 8}</answer>", 0.0),
    Attempt("q3", "Using the numbers 2, 3, 4, ... equals 9.", "<answer>2 + 3 + 4</answer>", None),
]
# Distinct id ranges: prompts 1x, reflections 10x, so a packed row shows what went where.
REFLECTIONS = [
    Reflection("q1", 0, prompt_ids=[11, 12, 13], reflection_ids=[101, 102, 103, 104], retry_score=1.0),
    Reflection("q1", 1, prompt_ids=[11, 12, 13], reflection_ids=[105, 106], retry_score=0.0),
    Reflection("q2", 0, prompt_ids=[21, 22], reflection_ids=[201, 202, 203], retry_score=0.0),
    Reflection("q2", 1, prompt_ids=[21, 22], reflection_ids=[204], retry_score=None),  # retry unscored
]


def test_failures_are_scored_unsuccessful_attempts_only():
    assert [a.query_id for a in select_failures(ATTEMPTS)] == ["q1", "q2"]
    assert select_failures([Attempt("q", "?", "x", 0.5)])[0].query_id == "q"  # partial is not success


def test_reflection_requests_n_per_failure_with_question_attempt_and_feedback():
    prompts = RrrPrompts.load()
    requests = reflection_requests(select_failures(ATTEMPTS), prompts, n=3)
    assert [(r.query_id, r.sample_index) for r in requests] == [
        ("q1", 0),
        ("q1", 1),
        ("q1", 2),
        ("q2", 0),
        ("q2", 1),
        ("q2", 2),
    ]
    chat = requests[3].chat
    assert [m["role"] for m in chat] == ["user"]  # no system prompt: a reflection gives no <answer>
    text = chat[0]["content"]
    assert ATTEMPTS[2].question in text
    assert "{7 + 8}" in text  # the attempt's own braces survive the filling
    assert "Your answer was wrong." in text
    assert not any(f"{{{k}}}" in text for k in ("question", "attempt", "feedback", "reflection"))
    with pytest.raises(ValueError, match="n "):
        reflection_requests(select_failures(ATTEMPTS), prompts, n=0)


def test_retry_chat_carries_the_reflection_and_the_answer_format():
    prompts = RrrPrompts.load()
    request = reflection_requests(select_failures(ATTEMPTS), prompts, n=1)[0]
    chat = request.retry_chat(prompts, "  I subtracted 5 instead of multiplying by (25 - 5).  ")
    assert chat[0] == {"role": "system", "content": prompts.attempt_system}
    user = chat[1]["content"]
    assert "I subtracted 5 instead of multiplying by (25 - 5)." in user
    assert ATTEMPTS[1].question in user and ATTEMPTS[1].text in user and "<answer>" in user
    assert prompts.attempt_chat("Q?") == [
        {"role": "system", "content": prompts.attempt_system},
        {"role": "user", "content": "Q?"},
    ]


def test_fill_is_one_pass_and_leaves_unknown_braces():
    assert fill("{question}|{reflection}|{x}", question="{reflection}", reflection="r") == "{reflection}|r|{x}"


def test_rewards_are_retry_success_and_unscored_retries_have_none():
    assert [r.reward for r in REFLECTIONS] == [1.0, 0.0, 0.0, None]
    assert Reflection("q", 0, [1], [2], 0.5).reward == 0.0  # a binary reward: partial is failure


def test_training_rows_one_group_per_failed_query_and_no_first_attempt_success():
    rows = training_rows(REFLECTIONS)
    assert [(r.uid, r.reward) for r in rows] == [("q1", 1.0), ("q1", 0.0), ("q2", 0.0)]
    assert "q0" not in {r.uid for r in rows}  # q0 succeeded at once: nothing to train
    assert [r.response_ids for r in rows] == [[101, 102, 103, 104], [105, 106], [201, 202, 203]]


def _batch(rows, norm_adv_by_std: bool = True):
    """Reflection rows through the engine's batch builder, the one PASR rollouts go through."""
    from recipe.local_engine.config import AlgoConfig
    from recipe.local_engine.policy_update import build_batch

    return build_batch(rows, PAD, AlgoConfig(norm_adv_by_std=norm_adv_by_std))


def test_the_loss_covers_exactly_the_reflection_tokens_of_a_packed_batch():
    batch = _batch(training_rows(REFLECTIONS))
    b = batch.batch
    # left-padded prompts (width 3), right-padded reflections (width 4)
    assert b["input_ids"].tolist() == [
        [11, 12, 13, 101, 102, 103, 104],
        [11, 12, 13, 105, 106, PAD, PAD],
        [PAD, 21, 22, 201, 202, 203, PAD],
    ]
    assert b["response_mask"].tolist() == [[1, 1, 1, 1], [1, 1, 0, 0], [1, 1, 1, 0]]
    trained_tokens = b["responses"][b["response_mask"].bool()].tolist()
    assert trained_tokens == [101, 102, 103, 104, 105, 106, 201, 202, 203]
    # rewards sit on each row's last reflection token; advantages are zero off the mask
    assert b["token_level_rewards"].tolist() == [[0, 0, 0, 1.0], [0, 0, 0, 0], [0, 0, 0, 0]]
    assert (b["advantages"] * (1 - b["response_mask"])).abs().sum() == 0
    assert batch.non_tensor_batch["uid"].tolist() == ["q1", "q1", "q2"]


def test_grpo_advantages_compete_within_a_failed_query():
    a = _batch(training_rows(REFLECTIONS)).batch["advantages"]
    # q1: rewards 1 and 0, mean 0.5, (unbiased) std 1/sqrt(2): +-0.7071 on every token
    assert a[0, :4].tolist() == pytest.approx([math.sqrt(0.5)] * 4, abs=1e-4)
    assert a[1, :2].tolist() == pytest.approx([-math.sqrt(0.5)] * 2, abs=1e-4)
    # q2 has one scored reflection: verl's lone-row rule (mean 0, std 1) gives it its reward, 0
    assert a[2].abs().sum() == 0
    plain = _batch(training_rows(REFLECTIONS), norm_adv_by_std=False)
    assert plain.batch["advantages"][0, 0].item() == pytest.approx(0.5)


def test_a_lone_successful_reflection_is_reinforced():
    rows = training_rows([Reflection("q9", 0, [1, 2], [3, 4], 1.0)])
    assert _batch(rows).batch["advantages"][0].tolist() == pytest.approx([1.0, 1.0], abs=1e-5)


def test_metrics_of_a_scripted_step():
    m = rrr_metrics(ATTEMPTS, REFLECTIONS)
    assert m == {
        "rrr/first_attempt_acc": pytest.approx(1 / 3),  # q0 of q0, q1, q2 (q3 unscored)
        "rrr/retry_acc": pytest.approx(1 / 3),  # one success in three scored retries
        "rrr/reflection_length/mean": pytest.approx((4 + 2 + 3 + 1) / 4),
        "rrr/recovered_rate": 0.5,  # q1 recovered, q2 did not
        "rrr/trained_rows": 3.0,
        "rrr/failed_queries": 2.0,
        "rrr/verifier_errors": 2.0,  # q3's attempt and q2's second retry
    }


def test_metrics_when_everything_succeeds_at_once():
    m = rrr_metrics([Attempt("q0", "?", "x", 1.0)], [])
    assert m["rrr/first_attempt_acc"] == 1.0
    assert m["rrr/trained_rows"] == 0.0 and m["rrr/recovered_rate"] == 0.0 and m["rrr/retry_acc"] == 0.0


def test_final_score_is_the_retry_only_after_a_scored_failure():
    from recipe.rrr_step import final_score

    assert final_score(1.0, [0.0]) == 1.0  # a first-attempt success is final
    assert final_score(None, [1.0]) is None  # an unscored attempt is not a failure to recover
    assert final_score(0.0, []) == 0.0  # a failure that was not retried stays wrong
    assert final_score(0.0, [0.0, 1.0]) == 1.0  # the best scored retry
    assert final_score(0.0, [None, 0.0]) == 0.0
    assert final_score(0.0, [None]) is None  # retried, but no retry was scored: not a 0
