"""`pasr stats` on small hand-built dumps with known counts (tests/stats_records.py): every number
in stats.json, its report and plots, the transition between two eval runs, and the pieces it is
built from (Collector, Reservoir, the paired sign test, the throughput benchmark)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.stats.accumulate import Collector
from eval.stats.counting import Reservoir
from eval.stats.groups import LENGTH_EDGES
from pasr_cli import main
from tests.stats_records import (
    P_RIGHT,
    P_WRONG,
    T1,
    T1_PRE,
    T2,
    T2_PRE,
    T3,
    T6,
    T6_MID,
    T6_PRE,
    rec,
    train_records,
    write,
)


@pytest.fixture(scope="module")
def result(dumps, tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    rc = main(
        [
            "stats",
            str(dumps / "runA"),
            str(dumps / "a_pasr"),
            str(dumps / "b_plain"),
            "--out",
            str(out),
            "--examples",
            "2",
            "--top-k",
            "3",
        ]
    )
    assert rc == 0
    return out, json.loads((out / "stats.json").read_text())


def test_inputs_and_corrupt_lines(result, dumps):
    _, s = result
    inp = s["inputs"]
    assert len(inp["record_files"]) == 5
    assert inp["metrics_files"] == [str(dumps / "runA" / "metrics.jsonl")]
    assert inp["summary_files"] == [str(dumps / "a_pasr" / "summary.json")]
    assert [f["file"] for f in inp["skipped_files"]] == [str(dumps / "runA" / "judge_cache.jsonl")]
    counts = [inp[k] for k in ("n_records", "n_train_records", "n_val_records", "n_eval_records", "n_other_records")]
    assert counts == [24, 8, 3, 13, 0]
    c = s["corrupt_lines"]
    assert c["count"] == 3
    where = [(Path(e["file"]).name, e["line"]) for e in c["first"]]
    assert where == [("step_000001.jsonl", 2), ("step_000001.jsonl", 4), ("samples.jsonl", 8)]
    assert "not a JSON object" in c["first"][1]["reason"] and "missing field" in c["first"][2]["reason"]


def test_training_refine_group(result):
    _, s = result
    g = s["groups"]["train/runA/refine"]
    assert g["n_responses"] == 5 and g["n_refining"] == 4
    assert g["refine_rate"] == pytest.approx(0.8)
    # spans: T1 1 (new value), T2 1 (empty), T6 2 (re-read: empty; 15: new), T7 1 (new)
    assert (g["n_spans"], g["n_empty_spans"]) == (5, 2)
    assert g["empty_refine_rate"] == pytest.approx(0.4)
    # fixes: T1 yes (35 -> 40), T2 no (40 was stated), T6 unknown (judge error), T7 yes (11 -> 10)
    assert (g["n_fix"], g["n_fix_applicable"]) == (2, 3)
    assert g["refine_fix_rate"] == pytest.approx(2 / 3)
    # drafts, whatever the judge said: T1 35 wrong, T2 40 right, T6 14 wrong (judge error), T7 11 wrong
    assert (g["n_draft_ok"], g["n_draft_applicable"], g["draft_acc"]) == (1, 4, 0.25)
    # breaks: T2's right draft 40 stayed right; T1, T7 had wrong drafts; T6 unknown (judge error)
    assert (g["n_break"], g["n_break_applicable"], g["refine_break_rate"]) == (0, 3, 0.0)
    assert g["refines_per_response"] == {"0": 1, "1": 3, "2": 1}
    assert g["mean_refines_per_response"] == pytest.approx(1.0)
    assert g["judge_errors"] == 1
    acc = g["accuracy"]
    assert acc["with_refine"] == {"mean": 1.0, "n": 3, "n_correct": 3}
    assert acc["without_refine"] == {"mean": 0.0, "n": 1, "n_correct": 0}
    assert acc["mean"] == pytest.approx(0.75) and acc["n_judged"] == 4
    assert g["format"] == {"n_ok": 4, "pass_rate": 0.8, "failure_reasons": {"answer_inside_think": 1}}
    assert g["refine_outcomes"] == {"better": 2, "tie": 1, "none": 1, "judge_error": 1}
    assert g["refine_reward_values"] == {"+0": 1, "+1": 2, "-0.5": 1}
    assert g["n_refine_field_mismatch"] == 0
    assert g["engines"] == {"local": 5}


def test_positions_and_lengths(result):
    _, s = result
    g = s["groups"]["train/runA/refine"]
    think1 = T1[len("<think>") : T1.index("</think>")]
    think2 = T2[len("<think>") : T2.index("</think>")]
    think6 = T6[len("<think>") : T6.index("</think>")]
    starts = [
        (len(T1_PRE) + 8) / len(think1),
        (len(T2_PRE) + 8) / len(think2),
        (len(T6_PRE) + 8) / len(think6),
        (len(T6_PRE) + len("<refine>Let me re-read the question.</refine>") + len(T6_MID) + 8) / len(think6),
    ]  # T7 has no think block (broken format): no position
    bins = [0] * 10
    for p in starts:
        bins[int(p * 10)] += 1
    h = g["position_hist"]
    assert h["counts"] == bins and h["n"] == 4
    assert h["mean"] == pytest.approx(sum(starts) / 4)
    assert h["bin_edges"][0] == 0 and h["bin_edges"][-1] == 1
    # whitespace tokens: T1 8, T2 8, T6 5 + 5, T7 5
    rl = g["refine_length_tokens"]
    assert rl["n"] == 5 and rl["mean"] == pytest.approx(6.2) and rl["median"] == 5 and rl["max"] == 8
    assert rl["bin_counts"][LENGTH_EDGES.index(5)] == 5 and sum(rl["bin_counts"]) == 5
    tl = g["think_length_tokens"]  # well-formed: T1 17, T2 16, T3 4, T6 14
    assert tl["n"] == 4
    expected = [len(t.split()) for t in (think1, think2, "10 + 20 = 30.", think6)]
    assert tl["mean"] == pytest.approx(sum(expected) / 4) and tl["max"] == max(expected)
    assert g["answer_length_tokens"]["mean"] == pytest.approx(1.0)


def test_top_refines_and_examples(result):
    _, s = result
    g = s["groups"]["train/runA/refine"]
    top = g["top_refines"]
    assert len(top) == 3
    assert top[0] == {"text": "<n> + <n> = <n>", "count": 2}  # T6's second span and T7's span
    assert {t["count"] for t in top[1:]} == {1}
    assert g["example_cell_sizes"] == {
        "refine_correct": 3,
        "refine_wrong": 0,
        "no_refine_correct": 0,
        "no_refine_wrong": 1,
    }
    ex = g["examples"]
    assert len(ex["refine_correct"]) == 2 and len(ex["no_refine_wrong"]) == 1 and ex["refine_wrong"] == []
    assert ex["no_refine_wrong"][0]["response"] == T3
    assert {e["query_id"] for e in ex["refine_correct"]} <= {"q1", "q3"}


def test_plain_training_group(result):
    _, s = result
    g = s["groups"]["train/runA/plain"]
    assert g["n_responses"] == 3 and g["refine_rate"] == 0.0 and g["empty_refine_rate"] is None
    assert g["refine_fix_rate"] is None and g["draft_acc"] is None
    assert g["format"]["failure_reasons"] == {"missing_think": 3} and g["format"]["pass_rate"] == 0.0
    assert g["accuracy"]["mean"] == pytest.approx(1 / 3)
    assert g["think_length_tokens"]["n"] == 0 and g["refine_outcomes"] == {}


def test_training_trends(result):
    _, s = result
    t = s["trends"]["runA"]
    assert t["steps"] == [0, 1]
    assert t["n_refine_rollouts"] == [3, 2] and t["n_plain_rollouts"] == [2, 1]
    assert t["refine_rate"] == pytest.approx([2 / 3, 1.0])
    assert t["format_pass_rate"] == pytest.approx([1.0, 0.5])
    assert t["empty_refine_rate"] == pytest.approx([0.5, 1 / 3])
    assert t["acc_refine"] == pytest.approx([2 / 3, 1.0])
    assert t["acc_plain"] == pytest.approx([0.5, 0.0])
    assert t["judge_errors"] == [0, 1]
    step0, step1 = train_records()
    tok0 = [r.response_tokens for r in step0 if r.variant == "refine"]
    assert t["response_tokens_refine"][0] == pytest.approx(sum(tok0) / 3)
    assert t["response_tokens_plain"][1] == pytest.approx(step1[2].response_tokens)


def test_metrics_trends(result):
    _, s = result
    m = s["metrics_trends"]["runA"]  # labelled with the run id of the records beside it
    assert m["steps"] == [0, 1]
    assert m["series"]["pasr/refine_rate"] == [0.5, 0.75]
    assert m["series"]["timing_s/gen"] == [1.5, None]


def test_eval_groups(result):
    _, s = result
    groups = s["groups"]
    assert list(groups) == [
        "train/runA/refine",
        "train/runA/plain",
        "val/runA/heldout/refine",
        "eval/evP/gsm8k/plain",
        "eval/evP/math500/plain",
        "eval/evR/gsm8k/pasr",
        "eval/evR/math500/pasr",
    ]
    g = groups["eval/evR/gsm8k/pasr"]
    assert (g["n_responses"], g["n_refining"], g["n_spans"], g["n_empty_spans"]) == (5, 1, 1, 0)
    assert (g["n_fix"], g["n_fix_applicable"]) == (1, 1)
    assert g["judge_errors"] == 1 and g["n_refine_field_mismatch"] == 1
    assert g["method"] == "pasr" and g["dataset"] == "gsm8k" and g["engines"] == {"eval": 5}
    assert g["variant"] is None and g["variants"] == {"refine": 5}
    assert g["refine_outcomes"] == {} and g["refine_reward_values"] == {}
    assert g["accuracy"]["with_refine"]["mean"] == 1.0 and g["accuracy"]["without_refine"]["mean"] == pytest.approx(
        1 / 3
    )
    assert groups["eval/evP/gsm8k/plain"]["n_responses"] == 6
    assert s["eval_runs"] == ["evR:pasr", "evP:plain"]


def test_in_training_evaluation(result):
    _, s = result
    g = s["groups"]["val/runA/heldout/refine"]  # not mixed into the training group or trends
    assert (g["n_responses"], g["n_refining"], g["n_spans"], g["n_fix"]) == (3, 1, 1, 1)
    assert g["kind"] == "val" and g["dataset"] == "heldout" and g["variant"] == "refine"
    v = s["val_trends"]["runA"]["heldout"]
    assert v["steps"] == [0, 1] and v["n"] == [2, 1]
    assert v["acc"] == [0.5, 1.0] and v["refine_rate"] == [0.5, 0.0] and v["format_pass_rate"] == [1.0, 1.0]
    assert s["trends"]["runA"]["n_refine_rollouts"] == [3, 2]


def test_refine_breaks_beside_fixes(tmp_path):
    """A right draft refined into a wrong answer is a break: counted, rated and reported beside the fixes."""
    broke = T2.replace("Check: 81 - 41 is 40, not 40.", "Check: 81 - 41 is 41.").replace("So 40.", "So 41.")
    broke = broke.replace("<answer>40</answer>", "<answer>41</answer>")
    recs = [
        rec("evB", "q1", "refine", broke, "40", 0.0, dataset="gsm8k"),  # break
        rec("evB", "q2", "refine", T1, "40", 1.0, dataset="gsm8k"),  # fix
        rec("evB", "q3", "refine", T2, "40", 1.0, dataset="gsm8k"),  # right draft kept
        rec("evB", "q4", "refine", T2, "40", None, dataset="gsm8k", judge_error="x"),
    ]  # unknown
    write(tmp_path / "b" / "samples.jsonl", recs)
    assert main(["stats", str(tmp_path / "b"), "--out", str(tmp_path / "o"), "--no-plots", "--examples", "4"]) == 0
    s = json.loads((tmp_path / "o" / "stats.json").read_text())
    g = s["groups"]["eval/evB/gsm8k/pasr"]
    assert (g["n_fix"], g["n_fix_applicable"], g["n_break"], g["n_break_applicable"]) == (1, 3, 1, 3)
    assert g["refine_break_rate"] == pytest.approx(1 / 3) and g["refine_fix_rate"] == pytest.approx(1 / 3)
    assert [e["break"] for e in g["examples"]["refine_wrong"]] == [True]
    report = (tmp_path / "o" / "report.md").read_text()
    assert "refine fixes 1 of 3 applicable (33.3%), refine breaks 1 of 3 applicable (33.3%)" in report
    assert "| refine fixes | refine breaks |" in report and "| 33.3% (1/3) | 33.3% (1/3) |" in report
    assert "**refine break**" in report and "fix: False, break: True" in report


def test_self_refine_run_is_one_method(tmp_path):
    """Self-Refine records carry the variant of the pass that gave the final answer."""
    recs = [
        rec("evS", "q1", "self_refine:answer", P_RIGHT, "40", 1.0, dataset="gsm8k", extra={"method": "self-refine"}),
        rec("evS", "q2", "self_refine:refine:2", P_WRONG, "40", 0.0, dataset="gsm8k", extra={"method": "self-refine"}),
        rec("evS", "q3", "self_refine:refine:1", P_RIGHT, "40", 1.0, dataset="gsm8k"),  # method from the variant
        rec("evS", "q4", "self_refine:answer", "", "40", None, dataset="gsm8k", format_reason="generation_error"),
    ]
    write(tmp_path / "sr" / "samples.jsonl", recs)
    assert main(["stats", str(tmp_path / "sr"), "--out", str(tmp_path / "o"), "--no-plots"]) == 0
    s = json.loads((tmp_path / "o" / "stats.json").read_text())
    assert list(s["groups"]) == ["eval/evS/gsm8k/self-refine"]
    g = s["groups"]["eval/evS/gsm8k/self-refine"]
    assert g["variants"] == {"self_refine:answer": 2, "self_refine:refine:2": 1, "self_refine:refine:1": 1}
    assert g["judge_errors"] == 1 and g["generation_errors"] == 1 and g["accuracy"]["mean"] == pytest.approx(2 / 3)
    assert s["eval_runs"] == ["evS:self-refine"] and s["transitions"] == []
    assert "Record variants:" in (tmp_path / "o" / "report.md").read_text()


def test_transition_matrix_auto_pair(result, dumps):
    _, s = result
    assert len(s["transitions"]) == 2  # the two eval runs, then runA's two in-training evaluations
    tr = s["transitions"][0]
    assert (tr["before"], tr["after"]) == ("evP:plain", "evR:pasr")  # plain is "before"
    assert tr["order"] == "the plain run is the baseline"
    assert tr["before_label"] == f"{dumps / 'b_plain'} (plain)"
    assert tr["counts"] == {"wrong->right": 2, "right->right": 1, "wrong->wrong": 1, "right->wrong": 1}
    assert tr["query_ids"] == {
        "wrong->right": ["gsm8k/q1#0", "math500/q1#0"],
        "right->right": ["gsm8k/q2#0"],
        "wrong->wrong": ["gsm8k/q3#0"],
        "right->wrong": ["gsm8k/q4#0"],
    }
    assert tr["unjudged"] == ["gsm8k/q5#0"]
    assert (tr["n_pairs"], tr["only_before"], tr["only_after"], tr["net_gain"]) == (5, 1, 0, 1)
    assert tr["acc_before"] == pytest.approx(0.4) and tr["acc_after"] == pytest.approx(0.6)
    assert tr["p_sign"] == pytest.approx(1.0)  # 2 won, 1 lost: P(split at least this uneven) = 1
    assert tr["by_dataset"]["math500"] == {"wrong->right": 1, "right->right": 0, "wrong->wrong": 0, "right->wrong": 0}
    val = s["transitions"][1]  # runA's heldout evaluation at step 0 then 1: h1 right both times
    assert (val["before"], val["after"]) == ("runA/heldout@0:pasr", "runA/heldout@1:pasr")
    assert val["order"] == "in-training evaluations of one run, by step (0 before 1)"
    assert val["after_label"] == f"{dumps / 'runA'} · heldout evaluation at step 1 (pasr)"
    assert val["counts"]["right->right"] == 1 and val["n_pairs"] == 1 and val["only_before"] == 1


def test_report_and_plots(result):
    out, s = result
    report = (out / "report.md").read_text()
    assert "# Refine statistics" in report
    assert "**`<refine>`**" in report and "**`</refine>`**" in report  # tags highlighted in examples
    assert "3 corrupt line(s) skipped" in report and "step_000001.jsonl:2" in report
    assert "`gsm8k/q1#0`" in report  # transition cell ids
    assert "net +1 (sign test p = 1)" in report
    expected = {
        "overview_rates.png",
        "refines_per_response.png",
        "accuracy_by_refine.png",
        "refine_positions.png",
        "refine_lengths.png",
        "refine_outcomes.png",
        "trend_runA.png",
        "metrics_runA.png",
        "transition_1.png",
        "transition_2.png",
    }
    assert set(s["plots"]) == expected
    for name in expected:
        data = (out / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000, name
        assert f"({name})" in report


def test_overview_plots_say_no_data_rather_than_vanish(tmp_path):
    """No spans, outcomes, trends or pairs: the six overview plots all the same (those without data
    say so, see test_plots_empty.py) and linked from the report; none of the per-run ones."""
    from eval.stats.plots import OVERVIEW_PLOTS, make_plots

    recs = [
        rec("evS", "q1", "plain", P_RIGHT, "40", 1.0, dataset="gsm8k"),
        rec("evS", "q2", "plain", P_WRONG, "40", 0.0, dataset="gsm8k"),
    ]
    write(tmp_path / "p" / "samples.jsonl", recs)
    assert main(["stats", str(tmp_path / "p"), "--out", str(tmp_path / "o")]) == 0
    s = json.loads((tmp_path / "o" / "stats.json").read_text())
    assert s["plots"] == list(OVERVIEW_PLOTS)
    report = (tmp_path / "o" / "report.md").read_text()
    assert all(f"({name})" in report for name in OVERVIEW_PLOTS)
    empty = {"groups": {}, "trends": {}, "val_trends": {}, "metrics_trends": {}, "transitions": []}
    assert make_plots(empty, tmp_path) == list(OVERVIEW_PLOTS)


def test_explicit_pair_and_bad_pair(dumps, tmp_path, capsys):
    args = ["stats", str(dumps / "a_pasr"), str(dumps / "b_plain"), "--out", str(tmp_path), "--no-plots"]
    assert main(args + ["--pair", "evR", "evP:plain"]) == 0
    s = json.loads((tmp_path / "stats.json").read_text())
    tr = s["transitions"][0]
    assert (tr["before"], tr["after"]) == ("evR:pasr", "evP:plain")
    assert tr["counts"] == {"wrong->right": 1, "right->right": 1, "wrong->wrong": 1, "right->wrong": 2}
    assert tr["query_ids"]["wrong->right"] == ["gsm8k/q4#0"] and s["plots"] == []
    assert tr["p_sign"] == pytest.approx(1.0)
    capsys.readouterr()
    assert main(args + ["--pair", "nope", "evP"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "names no eval run" in err


def test_collector_api_and_reservoir():
    col = Collector(n_examples=1)
    step0, _ = train_records()
    for r in step0:
        col.add_record(r)
    assert col.n_records == 5 and col.groups[("train", "runA", None, "refine")].n_refining == 2
    import random

    res = Reservoir(2, random.Random(0))
    kept = []
    for i in range(100):
        j = res.slot()
        if j >= 0:
            res.items[j] = i
            kept.append(i)
    assert res.seen == 100 and len(res.items) == 2 and kept[:2] == [0, 1]


def test_throughput_benchmark_runs(tmp_path, capsys):
    from benchmarks.stats_throughput import main as bench

    assert bench(["--n", "60", "--no-plots", "--keep", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "records/s" in out and "projected for 1,000,000 rollouts" in out
    s = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert s["inputs"]["n_records"] == 60 and s["corrupt_lines"]["count"] == 0


def test_transition_sign_test_on_a_lopsided_pair():
    """Ten wrong->right, none right->wrong, five unchanged: p = 2 * 0.5**10; the ties do not count."""
    from eval.stats.pairing import PairedOutcomes, Pairing, System

    po = PairedOutcomes()
    before, after = System("before", "plain"), System("after", "pasr")
    for i in range(15):
        po.add(before, ("gsm8k", f"q{i}", 0), i >= 10)
        po.add(after, ("gsm8k", f"q{i}", 0), True)
    tr = po.transition(Pairing(before, after, "test"))
    assert (tr["net_gain"], tr["counts"]["right->right"]) == (10, 5)
    assert tr["p_sign"] == pytest.approx(2 * 0.5**10)
