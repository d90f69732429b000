"""Best-of-n in `pasr eval` (``--select majority|score``): the majority vote groups answers as the
judge compares them, score selection with ties and failed scores, and a run's records, resume and
summary, with the scripted generator of tests/scripted_selection.py (no model)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.best_of_n import run_best_of_n
from eval.majority_vote import answer_key, vote
from eval.methods import MethodPrompts, Selection, produce
from eval.run import EvalError, run_eval
from tests.scripted_eval import cfg_for, records_of
from tests.scripted_selection import Scripted, generator, golds, score_reply, scripted_samples


def test_best_of_n_majority_groups_answers_as_the_judge_compares_them():
    samples = {
        "QA": [
            "\\boxed{3}",
            "\\boxed{0.5}",
            "\\boxed{\\frac{1}{2}}",
            "\\boxed{3}",
            "<answer>1/2</answer>",
        ],  # 1/2 wins 3 to 2
        "QB": ["\\boxed{7}", "\\boxed{8}", "\\boxed{8}", "\\boxed{7}"],  # a tie: the group that began first
        "QC": ["no answer", "\\boxed{1,000}", "<answer>\\$1000</answer>", "\\boxed{999}"],  # a None votes for nothing
        "QD": ["nothing", "still nothing", "no", "none"],  # no answer at all: the first, counted
    }
    backend = Scripted(scripted_samples(samples))
    out = produce(
        "best-of-n",
        ["QA"],
        generator(backend),
        MethodPrompts.load(),
        selection=Selection(candidates=5, judge_kind="rule"),
    )  # the default selection: majority
    assert "#1" in out[0].text and out[0].meta["votes"] == 3 and out[0].meta["selected"] == 1
    backend4 = Scripted(scripted_samples(samples))
    rest = produce(
        "best-of-n",
        ["QB", "QC", "QD"],
        generator(backend4),
        MethodPrompts.load(),
        selection=Selection(select="majority", candidates=4),
    )
    b, c, d = rest
    assert b.meta["selected"] == 0 and b.meta["votes"] == 2 and not b.meta["selection_fallback"]
    assert c.meta["selected"] == 1 and c.meta["votes"] == 2 and c.meta["answers"][0] is None
    assert d.meta["selected"] == 0 and d.meta["votes"] == 0 and d.meta["selection_fallback"] is True
    # one call for all candidates of all questions, no scoring
    assert [len(chats) for chats, _ in backend4.calls] == [12] and backend4.kinds() == ["answer"]
    for p in (*out, *rest):
        n = p.meta["candidates"]
        assert p.n_tokens == sum(x["tokens"] for x in p.passes) and len(p.passes) == n
        assert p.variant == f"best_of_n:sample:{p.meta['selected']}"
        assert p.meta["final_tokens"] == len(p.text.split()) < p.n_tokens


def test_majority_vote_keys_and_ties():
    assert answer_key("**1,000.**", "rule") == answer_key("1000", "rule")
    assert answer_key("60\\%", "rule") != answer_key("60", "rule")
    assert answer_key("3 + 4*5 = 23", "countdown") == answer_key("3+4*5=23", "countdown")
    assert answer_key(" Paris ", "openai") == answer_key("paris", "openai")
    assert answer_key("Paris", "rule") != answer_key("paris", "rule")  # math: case matters (X vs x)
    v = vote(["5", "x = 5", "6", "6"], "rule")  # Math-Verify reads "x = 5" as 5
    assert v.groups == [[0, 1], [2, 3]] and v.choice.index == 0
    assert vote(["6", "5", "5", "6"], "countdown").choice.index == 0  # a tie: the group that began first
    assert vote(["a", None, "b", "b"], "openai").choice.index == 2  # the winning group's first sample
    assert vote([None], "rule").choice.fallback is False  # one candidate: nothing to choose
    assert vote([None, " "], "rule").choice.fallback is True


def test_best_of_n_score_selection_ties_and_failed_scores():
    samples = {q: [f"\\boxed{{{k}}}" for k in range(4)] for q in ("QA", "QB", "QC", "QD")}
    scores = {
        "QA": [0.2, 0.8, 0.5, 0.8],  # the best, the earlier of a tie
        "QB": [None, 0.1, None, 0.05],  # failed scores cannot win
        "QC": [None, None, None, None],  # no score: the first, counted
        "QD": [1, 0.0, 0.0, 0.0],  # the first can win on its own merit (not a fallback)
    }
    backend = Scripted(scripted_samples(samples, scores))
    out = produce(
        "best-of-n",
        list(samples),
        generator(backend),
        MethodPrompts.load(),
        selection=Selection(select="score", candidates=4, score_tokens=20),
    )
    expect = {"QA": (1, False), "QB": (1, False), "QC": (0, True), "QD": (0, False)}
    for q, p in zip(samples, out):
        index, fallback = expect[q]
        assert p.meta["selected"] == index and f"#{index}" in p.text and p.meta["selection_fallback"] is fallback
        assert p.meta["scores"] == [None if s is None else float(s) for s in scores[q]]
        assert p.meta["score_failures"] == sum(s is None for s in scores[q])
        seen = [s for s in p.meta["scores"] if s is not None]
        if seen:
            assert p.meta["scores"][index] == max(seen)
        # tokens of all four candidates and all four scoring replies
        kinds = [x["variant"].split(":")[1] for x in p.passes]
        assert kinds == ["sample"] * 4 + ["score"] * 4
        assert p.n_tokens == sum(x["tokens"] for x in p.passes) > sum(x["tokens"] for x in p.passes[:4])
    assert backend.kinds() == ["answer", "score"] and backend.calls[1][1] == 20 and len(backend.calls[1][0]) == 16


def test_best_of_n_one_candidate_is_the_plain_answer_and_not_scored():
    backend = Scripted(scripted_samples({"QA": ["\\boxed{4}"]}, {"QA": [0.3]}))
    (p,) = produce(
        "best-of-n", ["QA"], generator(backend), MethodPrompts.load(), selection=Selection("score", candidates=1)
    )
    assert p.meta["selected"] == 0 and p.meta["scores"] == [] and backend.kinds() == ["answer"]
    assert p.n_tokens == p.meta["final_tokens"]


def test_run_best_of_n_rejects_bad_arguments():
    with pytest.raises(ValueError, match="n >= 1"):
        run_best_of_n(["q"], lambda chats: [], "sys", 0)
    with pytest.raises(ValueError, match="unknown best-of-n selection 'best'"):
        run_best_of_n(["q"], lambda chats: [], "sys", 2, "best")


def test_best_of_n_run_one_record_per_question_resume_and_summary(data_env, tmp_path):
    gold = golds(3)
    qs = list(gold)
    # q0: right 2 of 3; q1: right once against two agreeing wrong answers; q2: no answer at all
    plans = {qs[0]: [gold[qs[0]], "-5", gold[qs[0]]], qs[1]: [gold[qs[1]], "-7", "-7"], qs[2]: [None, None, None]}
    seen: dict[str, int] = {}

    def respond(kind, user, chat):
        k = seen.get(user, 0)
        seen[user] = k + 1
        a = plans[user][k]
        return "I do not know." if a is None else f"Working it out, the result is <answer>\\boxed{{{a}}}</answer>"

    cfg = cfg_for(tmp_path, method="best-of-n", samples=3, limit=3)
    assert cfg.gen_params().temperature == 0.6  # N > 1 samples, as mean@K does
    backend = Scripted(respond)
    summary = run_eval(cfg, backend=backend)
    recs = records_of(cfg.out)
    assert len(recs) == 3 and {r.sample_index for r in recs} == {0}
    by_q = {r.prompt: r for r in recs}
    assert by_q[qs[0]].acc == 1.0 and by_q[qs[1]].acc == 0.0 and by_q[qs[1]].extracted_answer == "-7"
    assert by_q[qs[2]].extra["selection_fallback"] is True and by_q[qs[2]].acc == 0.0
    for r in recs:
        assert r.extra["method"] == "best-of-n" and r.extra["candidates"] == 3 and r.extra["select"] == "majority"
        assert (
            r.response_tokens
            == sum(p["tokens"] for p in r.extra["passes"])
            == sum(len(t.split()) for t in (p["text"] for p in r.extra["passes"]))
        )
    d = summary["datasets"]["gsm8k"]
    assert d["n_samples"] == d["expected_samples"] == 3 and d["n_questions"] == 3
    assert d["selection_fallbacks"] == 1 and "score_failures" not in d and summary["complete"]
    assert summary["candidates"] == 3 and summary["samples"] == 1 and summary["select"] == "majority"
    assert d["mean_tokens"] == pytest.approx(sum(r.response_tokens for r in recs) / 3)
    md = (Path(cfg.out) / "summary.md").read_text()
    assert "best-of-n (3 candidates, select majority)" in md and "mean@" not in md
    assert "summed over all 3 candidates." in md and "| fallbacks |" in md
    # rerun: nothing generated; another N is another run
    again = Scripted(respond)
    run_eval(cfg, backend=again)
    assert again.calls == []
    with pytest.raises(EvalError, match="candidates: 3 there, 5 now"):
        run_eval(cfg_for(tmp_path, method="best-of-n", samples=5, limit=3), backend=Scripted(respond))
    with pytest.raises(EvalError, match="select"):
        run_eval(cfg_for(tmp_path, method="best-of-n", samples=3, limit=3, select="score"), backend=Scripted(respond))


def test_best_of_n_score_run_counts_scoring_tokens(data_env, tmp_path):
    gold = golds(2)
    q_of = {q: q for q in gold}

    def respond(kind, user, chat):
        if kind == "answer":
            q = q_of[user]
            return f"Try {len(chat)}: <answer>\\boxed{{{gold[q]}}}</answer>"
        return score_reply(None)  # every score fails: the first candidate, counted

    cfg = cfg_for(tmp_path, method="best-of-n", samples=2, select="score", limit=2, max_score_tokens=16)
    backend = Scripted(respond)
    summary = run_eval(cfg, backend=backend)
    d = summary["datasets"]["gsm8k"]
    assert d["accuracy"] == 1.0 and d["score_failures"] == 4 and d["selection_fallbacks"] == 2
    assert [limit for _, limit in backend.calls] == [1500, 16]
    for r in records_of(cfg.out):
        answers, scoring = r.extra["passes"][:2], r.extra["passes"][2:]
        assert len(scoring) == 2 and all(p["variant"].startswith("best_of_n:score:") for p in scoring)
        assert r.response_tokens == sum(p["tokens"] for p in answers) + sum(p["tokens"] for p in scoring)
    settings = json.loads((Path(cfg.out) / "run.json").read_text())["settings"]
    assert settings["select"] == "score" and settings["candidates"] == 2 and settings["max_score_tokens"] == 16
    md = (Path(cfg.out) / "summary.md").read_text()
    assert "| score failures | fallbacks |" in md and "| 4 | 2 |" in md and "and every scoring reply." in md
