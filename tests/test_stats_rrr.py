"""`pasr stats` on Reflect, Retry, Reward dumps: hand-built records with hand-computed numbers.

The records are built as the engines build them (an attempt and a retry as judged records, the
reflection by the engines' own :func:`recipe.rrr_step.reflection_record`) and written with
:func:`data.records.write_records`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from data.records import ATTEMPT, RETRY, RolloutRecord, write_records
from pasr_cli import main
from recipe.rrr_step import reflection_record
from rewards.format import check_format

QUESTION = "Using the numbers 2, 3, 4, write an equation that equals 10."
RIGHT, WRONG = "2 * 3 = 6. 6 + 4 = 10.<answer>2 * 3 + 4</answer>", "2 + 3 = 5. 5 + 4 = 10.<answer>2 + 3 + 4</answer>"


def answer(run_id, qid, variant, text, acc, tokens, k=0, **kw) -> RolloutRecord:
    """A judged RRR answer (attempt or retry) as :func:`recipe.scoring.judge_and_record` writes it."""
    fmt = check_format(text)
    base = dict(
        run_id=run_id,
        query_id=qid,
        data_source="countdown",
        variant=variant,
        prompt=QUESTION,
        response=text,
        response_tokens=tokens,
        format_ok=fmt.ok,
        format_reason=fmt.reason,
        n_refine=fmt.n_refine,
        extracted_answer=text.split("<answer>")[-1].split("</answer>")[0] if "<answer>" in text else None,
        gold="2, 3, 4 -> 10",
        acc=acc,
        judge_error="verifier timeout" if acc is None else None,
        sample_index=k,
    )
    base.update(kw)
    return RolloutRecord(**base)


def exchange(run_id, qid, k, reflection, reflection_tokens, retry_text, retry_acc, retry_tokens, **kw):
    """A reflection and its retry; the reflection's reward is the retry's success (None when unscored)."""
    retry = answer(run_id, qid, RETRY, retry_text, retry_acc, retry_tokens, k, **kw)
    reward = None if retry_acc is None else float(retry_acc >= 1.0)
    return [reflection_record(retry, reflection, list(range(reflection_tokens)), "stop", reward), retry]


# Training run "rrrA".
# Step 1: q1 right at once; q2 wrong, 2 reflections (retry right, retry wrong); q3 wrong, 2 reflections
# (retry unscored = verifier error, retry wrong); q4's attempt unscored (verifier error), not reflected on.
#   first-attempt acc 1/3 (q4 left out), failed 2, reflections 4, retry acc 1/3 (3 scored retries),
#   recovered 1/2 (q2), reflection length (10+20+30+40)/4 = 25, retry length (5+7+9+11)/4 = 8,
#   verifier errors 2 (q4's attempt, q3's first retry), trained rows 3.
# Step 2 (written in a scrambled order): q1 wrong, one reflection, retry wrong.
# Step 3: every attempt right: no reflection, nothing to count for the retry rates.
REFL_OK = "I wrote 2 + 3 + 4 = 10, but it is 9. Next time I will check the last step."
REFL_BAD = "My steps look right."


def step1():
    s = dict(step=1)
    return [
        answer("rrrA", "q1", ATTEMPT, RIGHT, 1.0, 30, **s),
        answer("rrrA", "q2", ATTEMPT, WRONG, 0.0, 31, **s),
        answer("rrrA", "q3", ATTEMPT, WRONG, 0.0, 32, **s),
        answer("rrrA", "q4", ATTEMPT, WRONG, None, 33, **s),
        *exchange("rrrA", "q2", 0, REFL_OK, 10, RIGHT, 1.0, 5, **s),
        *exchange("rrrA", "q2", 1, REFL_BAD, 20, WRONG, 0.0, 7, **s),
        *exchange("rrrA", "q3", 0, REFL_BAD, 30, WRONG, None, 9, **s),
        *exchange("rrrA", "q3", 1, REFL_BAD, 40, WRONG, 0.0, 11, **s),
    ]


def step2():
    refl, retry = exchange("rrrA", "q1", 0, REFL_BAD, 12, WRONG, 0.0, 6, step=2)
    return [retry, refl, answer("rrrA", "q1", ATTEMPT, WRONG, 0.0, 30, step=2)]


def step3():
    return [answer("rrrA", q, ATTEMPT, RIGHT, 1.0, 30, step=3) for q in ("q1", "q2")]


def heldout():
    """The local engine's in-training evaluation (step and dataset set; greedy, one reflection):
    h1 right; h2 wrong then right; h3 wrong twice; h4 wrong, retry unscored; h5 unscored."""
    s = dict(step=5, dataset="heldout")
    return [
        answer("rrrA", "h1", ATTEMPT, RIGHT, 1.0, 10, **s),
        answer("rrrA", "h2", ATTEMPT, WRONG, 0.0, 10, **s),
        answer("rrrA", "h3", ATTEMPT, WRONG, 0.0, 10, **s),
        answer("rrrA", "h4", ATTEMPT, WRONG, 0.0, 10, **s),
        answer("rrrA", "h5", ATTEMPT, WRONG, None, 10, **s),
        *exchange("rrrA", "h2", 0, REFL_OK, 5, RIGHT, 1.0, 10, **s),
        *exchange("rrrA", "h3", 0, REFL_BAD, 5, WRONG, 0.0, 10, **s),
        *exchange("rrrA", "h4", 0, REFL_BAD, 5, WRONG, None, 10, **s),
    ]


def passes(*texts):
    return [
        {"variant": v, "text": t, "tokens": 10, "finish_reason": "stop"}
        for v, t in zip(("attempt", "reflection", "retry"), texts)
    ]


def eval_samples():
    """`pasr eval --method reflect-retry` samples: one record per question, the passes in extra.
    e1 right at once; e2 wrong then right; e3 wrong twice; e4 attempt unscored (not retried);
    e5 generation error."""

    def ev(qid, variant, text, acc, tokens, extra):
        meta = {"method": "reflect-retry", "model": "m", "backend": "hf"} | extra
        return answer("evRR", qid, variant, text, acc, tokens, dataset="countdown", engine="eval", extra=meta)

    return [
        ev("e1", ATTEMPT, RIGHT, 1.0, 10, {"passes": passes(RIGHT), "retried": False, "first_acc": 1.0}),
        ev("e2", RETRY, RIGHT, 1.0, 30, {"passes": passes(WRONG, REFL_OK, RIGHT), "retried": True, "first_acc": 0.0}),
        ev("e3", RETRY, WRONG, 0.0, 30, {"passes": passes(WRONG, REFL_BAD, WRONG), "retried": True, "first_acc": 0.0}),
        ev("e4", ATTEMPT, WRONG, None, 10, {"passes": passes(WRONG), "retried": False, "first_acc": None}),
        answer(
            "evRR",
            "e5",
            ATTEMPT,
            "",
            None,
            0,
            dataset="countdown",
            engine="eval",
            format_reason="generation_error",
            judge_error=None,
            extra={"method": "reflect-retry", "error": "CUDA out of memory"},
        ),
    ]


# A PASR training run beside them, to check that RRR records change nothing of PASR's.
PASR_REFINE = "<think>12 * 3 = 35. <refine>12 * 3 is 36, not 35.</refine> So 40.</think>\n<answer>40</answer>"
PASR_PLAIN = "<think>so 41</think>\n<answer>41</answer>"


def pasr_records():
    def r(variant, text, acc, step, k=0):
        fmt = check_format(text)
        return RolloutRecord(
            run_id="pasrA",
            query_id="p1",
            data_source="gsm8k",
            variant=variant,
            prompt="q?",
            response=text,
            response_tokens=len(text) // 4,
            format_ok=fmt.ok,
            format_reason=fmt.reason,
            n_refine=fmt.n_refine,
            extracted_answer=None,
            gold="40",
            acc=acc,
            step=step,
            sample_index=k,
        )

    return [
        r("refine", PASR_REFINE, 1.0, 0),
        r("refine", PASR_PLAIN, 0.0, 0, 1),
        r("plain", PASR_PLAIN, 0.0, 0),
        r("refine", PASR_REFINE, 1.0, 1),
    ]


@pytest.fixture(scope="module")
def dumps(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("rrr_dumps")
    for i, recs in enumerate((step1(), step2(), step3()), 1):
        write_records(root / "rrrA" / "rollouts" / f"step_{i:06d}.jsonl", recs)
    write_records(root / "rrrA" / "eval" / "heldout.jsonl", heldout())
    write_records(root / "evRR" / "samples.jsonl", eval_samples())
    write_records(root / "pasrA" / "rollouts" / "step_000000.jsonl", [r for r in pasr_records() if r.step == 0])
    write_records(root / "pasrA" / "rollouts" / "step_000001.jsonl", [r for r in pasr_records() if r.step == 1])
    return root


def run_stats(out: Path, *paths: Path, args=()) -> dict:
    assert main(["stats", *map(str, paths), "--out", str(out), *args]) == 0
    return json.loads((out / "stats.json").read_text())


@pytest.fixture(scope="module")
def result(dumps, tmp_path_factory):
    out = tmp_path_factory.mktemp("rrr_out")
    s = run_stats(out, dumps / "rrrA", dumps / "evRR", dumps / "pasrA", args=("--examples", "1", "--seed", "3"))
    return out, s, (out / "report.md").read_text()


def test_training_steps(result):
    _, s, _ = result
    t = s["rrr"]["train"]["rrrA"]
    assert t["steps"] == [1, 2, 3]
    assert t["n_queries"] == [4, 1, 2]
    assert t["first_attempt_acc"] == pytest.approx([1 / 3, 0.0, 1.0])
    assert t["failed_queries"] == [2, 1, 0]
    assert t["n_reflections"] == [4, 1, 0] and t["n_retries"] == [4, 1, 0]
    assert t["retry_acc"][:2] == pytest.approx([1 / 3, 0.0]) and t["retry_acc"][2] is None  # unscored retry left out
    assert t["n_recovered"] == [1, 0, 0]
    assert t["recovered_rate"][:2] == pytest.approx([0.5, 0.0]) and t["recovered_rate"][2] is None
    assert t["reflection_tokens"][:2] == pytest.approx([25.0, 12.0]) and t["reflection_tokens"][2] is None
    assert t["retry_tokens"][:2] == pytest.approx([8.0, 6.0]) and t["retry_tokens"][2] is None
    assert t["verifier_errors"] == [2, 0, 0]  # counted, never scored 0
    assert t["trained_rows"] == [3, 1, 0]
    assert "rrrA" not in s["trends"]  # not read as a PASR run with no refine rollouts


def test_training_steps_agree_with_the_trainers_metrics():
    """The step numbers are the trainer's own `rrr/*` (rrr_metrics on the same step)."""
    from recipe.rrr_step import Attempt, Reflection, rrr_metrics

    recs = step1()
    attempts = [Attempt(r.query_id, r.prompt, r.response, r.acc) for r in recs if r.variant == "attempt"]
    reflections = [
        Reflection(r.query_id, r.sample_index, [1], [0] * r.response_tokens, r.acc)
        for r in recs
        if r.variant == "reflection"
    ]
    m = rrr_metrics(attempts, reflections)
    assert m["rrr/first_attempt_acc"] == pytest.approx(1 / 3) and m["rrr/retry_acc"] == pytest.approx(1 / 3)
    assert m["rrr/recovered_rate"] == 0.5 and m["rrr/reflection_length/mean"] == 25.0
    assert m["rrr/verifier_errors"] == 2.0 and m["rrr/failed_queries"] == 2.0


def test_evaluations(result):
    _, s, _ = result
    ev = s["rrr"]["evals"]
    assert list(ev) == ["val/rrrA/heldout@5", "eval/evRR/countdown"]
    v = ev["val/rrrA/heldout@5"]
    assert (v["kind"], v["run_id"], v["dataset"], v["step"], v["n_samples"]) == ("val", "rrrA", "heldout", 5, 5)
    assert v["first_attempt_acc"] == pytest.approx(1 / 4)  # h5 unscored: left out
    assert (v["n_retried"], v["n_recovered"]) == (3, 1) and v["retry_rate"] == pytest.approx(3 / 4)
    assert v["retry_acc"] == pytest.approx(1 / 2)  # h4's retry unscored: left out
    assert v["final_acc"] == pytest.approx(2 / 3)  # h1, h2 right, h3 wrong; h4, h5 unknown
    assert (v["judge_errors"], v["generation_errors"]) == (2, 0)
    assert v["mean_tokens"] == pytest.approx((5 * 10 + 3 * 5 + 3 * 10) / 5)
    e = ev["eval/evRR/countdown"]
    assert (e["kind"], e["step"], e["n_samples"]) == ("eval", None, 5)
    assert e["first_attempt_acc"] == pytest.approx(1 / 3)
    assert (e["n_retried"], e["n_recovered"]) == (2, 1) and e["retry_rate"] == pytest.approx(2 / 3)
    assert e["retry_acc"] == pytest.approx(1 / 2) and e["final_acc"] == pytest.approx(2 / 3)
    assert (e["judge_errors"], e["generation_errors"]) == (1, 1)
    assert "evRR:reflect-retry" in s["eval_runs"]  # still a system that can be paired


def test_format_and_refine_columns_are_not_applicable(result):
    _, s, report = result
    rrr_groups = [
        "train/rrrA/attempt",
        "train/rrrA/reflection",
        "train/rrrA/retry",
        "val/rrrA/heldout/attempt",
        "val/rrrA/heldout/reflection",
        "val/rrrA/heldout/retry",
        "eval/evRR/countdown/reflect-retry",
    ]
    for key in rrr_groups:
        g = s["groups"][key]
        assert g["rrr"] is True, key
        assert g["format"] is None and g["refine_rate"] is None and g["refine_fix_rate"] is None, key
        assert g["refine_break_rate"] is None, key
        assert g["accuracy"]["with_refine"] is None and g["accuracy"]["without_refine"] is None, key
        assert "format" in g["not_applicable"]
    g = s["groups"]["train/rrrA/attempt"]
    assert g["n_responses"] == 7 and g["judge_errors"] == 1 and g["accuracy"]["mean"] == pytest.approx(3 / 6)
    row = next(line for line in report.splitlines() if line.startswith("| `train/rrrA/attempt` |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2:8] == ["n/a (RRR)"] * 6 and cells[9:11] == ["n/a (RRR)"] * 2
    assert cells[8] == "50.0%"  # the attempts' accuracy does apply
    assert "text_before_think" not in report and "missing_think" not in report  # PASR format reasons are noise here


def test_report_section(result):
    out, s, report = result
    assert report.count("## Reflect, Retry, Reward") == 1
    section = report.split("## Reflect, Retry, Reward")[1].split("\n## ")[0]
    assert "| 1 | 4 | 33.3% | 2 | 4 | 33.3% | 1/2 (50.0%) | 25.0 | 8.0 | 2 |" in section
    assert "| 3 | 2 | 100.0% | 0 | 0 | – | 0/0 (–) | – | – | 0 |" in section
    assert "| `val/rrrA/heldout@5` | 5 | 25.0% | 3 (75.0%) | 1 | 50.0% | 66.7% | 2 | 19.0 |" in section
    assert "| `eval/evRR/countdown` | 5 | 33.3% | 2 (66.7%) | 1 | 50.0% | 66.7% | 1 | 16.0 |" in section
    assert "(rrr_rrrA.png)" in section


def test_examples(result):
    _, s, report = result
    ex, sizes = s["rrr"]["examples"], s["rrr"]["example_cell_sizes"]
    # train: q2#0 succeeded; q2#1, q3#1 and step 2's q1#0 (records out of order) failed; q3#0 unscored: no example
    assert sizes["train/rrrA"] == {"retry_succeeded": 1, "retry_failed": 3}
    [ok] = ex["train/rrrA"]["retry_succeeded"]
    assert (ok["query_id"], ok["step"], ok["sample_index"], ok["retry_score"]) == ("q2", 1, 0, 1.0)
    assert (ok["attempt"], ok["reflection"], ok["retry"]) == (WRONG, REFL_OK, RIGHT)
    assert ok["question"] == QUESTION and ok["attempt_answer"] == "2 + 3 + 4" and ok["retry_answer"] == "2 * 3 + 4"
    [bad] = ex["train/rrrA"]["retry_failed"]
    assert (bad["query_id"], bad["step"], bad["sample_index"]) in {("q2", 1, 1), ("q3", 1, 1), ("q1", 2, 0)}
    assert (bad["attempt"], bad["reflection"], bad["retry"], bad["retry_score"]) == (WRONG, REFL_BAD, WRONG, 0.0)
    assert sizes["val/rrrA"] == {"retry_succeeded": 1, "retry_failed": 1}
    assert sizes["eval/evRR"] == {"retry_succeeded": 1, "retry_failed": 1}
    [ev_ok] = ex["eval/evRR"]["retry_succeeded"]
    assert (ev_ok["query_id"], ev_ok["attempt"], ev_ok["reflection"], ev_ok["retry"]) == ("e2", WRONG, REFL_OK, RIGHT)
    assert "#### `train/rrrA`: retry succeeded (1 exchanges)" in report and "*Reflection:*" in report


def test_examples_follow_seed_and_count(dumps, tmp_path):
    args = ("--no-plots", "--examples", "3")
    a = run_stats(tmp_path / "a", dumps / "rrrA", args=(*args, "--seed", "1"))["rrr"]["examples"]
    b = run_stats(tmp_path / "b", dumps / "rrrA", args=(*args, "--seed", "1"))["rrr"]["examples"]
    assert a == b and len(a["train/rrrA"]["retry_failed"]) == 3
    none = run_stats(tmp_path / "c", dumps / "rrrA", args=("--no-plots", "--examples", "0"))
    assert none["rrr"]["examples"] == {} and none["rrr"]["train"]["rrrA"]["steps"] == [1, 2, 3]


def test_plot(result):
    out, s, _ = result
    assert "rrr_rrrA.png" in s["plots"]
    data = (out / "rrr_rrrA.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000
    # PASR's per-group figures leave RRR groups out: only pasrA's groups are drawn
    assert "trend_pasrA.png" in s["plots"] and not any(p.startswith("trend_rrrA") for p in s["plots"])


def test_pasr_run_is_unchanged_by_rrr_records(dumps, result, tmp_path):
    """A PASR run alone: no RRR section, key empty, no RRR plot; beside RRR runs: the same numbers."""
    _, mixed, _ = result
    s = run_stats(tmp_path / "p", dumps / "pasrA", args=("--examples", "1", "--seed", "3"))
    report = (tmp_path / "p" / "report.md").read_text()
    assert "Reflect, Retry, Reward" not in report and "n/a (RRR)" not in report
    assert s["rrr"] == {"train": {}, "evals": {}, "examples": {}, "example_cell_sizes": {}}
    assert not any(p.startswith("rrr_") for p in s["plots"])
    for key in ("train/pasrA/refine", "train/pasrA/plain"):
        alone, beside = s["groups"][key], mixed["groups"][key]
        assert alone["rrr"] is False and alone["format"]["pass_rate"] == beside["format"]["pass_rate"]
        assert {k: v for k, v in alone.items() if k != "examples"} == {
            k: v for k, v in beside.items() if k != "examples"
        }
    assert s["trends"]["pasrA"] == mixed["trends"]["pasrA"]
    assert s["groups"]["train/pasrA/refine"]["refine_rate"] == pytest.approx(2 / 3)
