"""Hand-built rollout records with known counts, for the `pasr stats` tests (tests/test_stats_json.py,
tests/test_stats_inputs.py, tests/test_plots_empty.py; the ``dumps`` fixture in tests/conftest.py
writes them as dumps): a training run "runA" (two steps, refine and plain rollouts), its
in-training evaluation, and two `pasr eval` runs (methods pasr and plain)."""

from __future__ import annotations

from pathlib import Path

from data.records import RolloutRecord
from rewards.format import check_format


def rec(run_id, qid, variant, response, gold, acc, **kw) -> RolloutRecord:
    fmt = check_format(response)
    base = dict(
        run_id=run_id,
        query_id=qid,
        data_source="gsm8k",
        variant=variant,
        prompt="q?",
        response=response,
        response_tokens=len(response) // 4,
        format_ok=fmt.ok,
        format_reason=fmt.reason,
        n_refine=fmt.n_refine,
        extracted_answer=None,
        gold=gold,
        acc=acc,
    )
    base.update(kw)
    return RolloutRecord(**base)


def write(path: Path, lines: list) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "".join((x.to_json() if isinstance(x, RolloutRecord) else x) + "\n" for x in lines), encoding="utf-8"
    )


# Training run "runA": step 0 and 1, refine and plain rollouts.
T1_PRE, T1_SPAN, T1_POST = "12 * 3 = 35. ", "Check: 12 * 3 is 36, not 35.", " So 36 + 4 = 40."
T1 = f"<think>{T1_PRE}<refine>{T1_SPAN}</refine>{T1_POST}</think>\n<answer>\\boxed{{40}}</answer>"
T2_PRE, T2_SPAN, T2_POST = "81 - 41 = 40. ", "Check: 81 - 41 is 40, not 40.", " So 40."
T2 = f"<think>{T2_PRE}<refine>{T2_SPAN}</refine>{T2_POST}</think>\n<answer>40</answer>"
T3 = "<think>10 + 20 = 30.</think>\n<answer>30</answer>"
P_RIGHT = "Step by step: 40. The answer is \\boxed{40}."
P_WRONG = "Step by step: 41. The answer is \\boxed{41}."
T6_PRE = "Let us compute 7 + 8 = 14. "
T6_MID = " "
T6 = (
    f"<think>{T6_PRE}<refine>Let me re-read the question.</refine>{T6_MID}"
    "<refine>7 + 8 = 15</refine> Done.</think><answer>15</answer>"
)
T7 = "<think>5 + 5 = 11 <refine>5 + 5 = 10</refine> so 10 <answer>10</answer>"  # broken format


def train_records():
    step0 = [
        rec("runA", "q1", "refine", T1, "40", 1.0, step=0, refine_reward=1.0, refine_outcome="better", sample_index=0),
        rec("runA", "q1", "refine", T2, "40", 1.0, step=0, refine_reward=-0.5, refine_outcome="tie", sample_index=1),
        rec("runA", "q1", "refine", T3, "40", 0.0, step=0, refine_reward=0.0, refine_outcome="none", sample_index=2),
        rec("runA", "q1", "plain", P_RIGHT, "40", 1.0, step=0),
        rec("runA", "q1", "plain", P_WRONG, "40", 0.0, step=0, sample_index=1),
    ]
    step1 = [
        rec("runA", "q2", "refine", T6, "15", None, step=1, judge_error="timeout", refine_outcome="judge_error"),
        rec("runA", "q3", "refine", T7, "10", 1.0, step=1, refine_reward=1.0, refine_outcome="better"),
        rec("runA", "q3", "plain", P_WRONG, "10", 0.0, step=1),
    ]
    return step0, step1


def val_records():
    """In-training evaluation (local engine's eval/<tag>.jsonl): step and dataset set."""
    return [
        rec("runA", "h1", "refine", T1, "40", 1.0, step=0, dataset="heldout"),
        rec("runA", "h2", "refine", T3, "40", 0.0, step=0, dataset="heldout"),
        rec("runA", "h1", "refine", T3, "30", 1.0, step=1, dataset="heldout"),
    ]


EV_RIGHT = "<think>so 5</think><answer>5</answer>"
EV_WRONG = "<think>so 6</think><answer>6</answer>"
EV_FIX = "<think>2 + 2 = 4 <refine>it is 2 + 3 = 5</refine> so 5</think><answer>5</answer>"


def eval_records():
    def ev(run, variant, ds, qid, resp, acc, **kw):
        return rec(run, qid, variant, resp, "5", acc, dataset=ds, engine="eval", **kw)

    pasr = [  # run "evR", method pasr (as `pasr eval` writes it: extra.method)
        ev("evR", "refine", "gsm8k", "q1", EV_FIX, 1.0, extra={"method": "pasr", "model": "m"}),
        ev("evR", "refine", "gsm8k", "q2", EV_RIGHT, 1.0, n_refine=1),  # field disagrees with the text
        ev("evR", "refine", "gsm8k", "q3", EV_WRONG, 0.0),
        ev("evR", "refine", "gsm8k", "q4", EV_WRONG, 0.0),
        ev("evR", "refine", "gsm8k", "q5", EV_RIGHT, None),
        ev("evR", "refine", "math500", "q1", EV_RIGHT, 1.0),
    ]
    plain = [  # run "evP", method plain
        ev("evP", "plain", "gsm8k", "q1", P_WRONG, 0.0),
        ev("evP", "plain", "gsm8k", "q2", P_RIGHT, 1.0),
        ev("evP", "plain", "gsm8k", "q3", P_WRONG, 0.0),
        ev("evP", "plain", "gsm8k", "q4", P_RIGHT, 1.0),
        ev("evP", "plain", "gsm8k", "q5", P_RIGHT, 1.0),
        ev("evP", "plain", "gsm8k", "q6", P_RIGHT, 1.0),
        ev("evP", "plain", "math500", "q1", P_WRONG, 0.0),
    ]
    return pasr, plain
