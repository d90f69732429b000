"""Choosing by score in `pasr eval`: :func:`~eval.self_score.pick_best` and the scoring pass, and
Self-Refine's ``--select best`` (the best-scored answer so far, not the latest), with the scripted
generator of tests/scripted_selection.py (no model)."""

from __future__ import annotations

import random

import pytest

from eval.methods import MethodPrompts, Selection, produce
from eval.run import EvalConfig, EvalError, run_eval
from eval.self_refine import NO_CHANGE
from eval.self_score import ScorePrompt, pick_best, score_candidates
from tests.scripted_eval import cfg_for, records_of
from tests.scripted_selection import Scripted, candidate_of, generator, golds, score_reply


def test_pick_best_returns_the_maximum_seen_and_the_earlier_on_a_tie():
    """The invariant over many random score lists: the chosen candidate's score is the maximum
    of the scores seen, it is the first candidate with that score, and a failed score (None)
    never wins unless every score failed, when the fallback is returned and flagged."""
    rng = random.Random(0)
    for _ in range(2000):
        n = rng.randint(1, 6)
        scores = [rng.choice([None, 0.0, 0.25, 0.5, 0.5, 1.0]) for _ in range(n)]
        fallback = rng.randrange(n)
        choice = pick_best(scores, fallback)
        seen = [s for s in scores if s is not None]
        if seen:
            assert scores[choice.index] == max(seen) and not choice.fallback
            assert choice.index == scores.index(max(seen))  # ties go to the earlier candidate
        else:
            assert choice.index == fallback and choice.fallback
    assert pick_best([], 0).fallback is False  # a question that was not scored did not fall back


def test_score_candidates_parses_scores_and_records_failures():
    replies_for = {"A": "Score: 0.9", "B": "Looks fine to me, 9 out of 10", "C": "Score: 7", "D": "**Score:** 8/10"}
    backend = Scripted(lambda kind, user, chat: replies_for[candidate_of(user)])
    (rs, single) = score_candidates(
        ["Q1", "Q2"], [["A", "B", "C", "D"], ["only"]], generator(backend), ScorePrompt.load(), 32
    )
    assert [r.score for r in rs] == [0.9, None, None, 0.8]  # no label, and 7 (outside 0-1), are failed scores
    assert [r.candidate for r in rs] == [0, 1, 2, 3] and rs[1].text == replies_for["B"]
    assert single == []  # one candidate: nothing to choose, not scored
    ((chats, limit),) = backend.calls
    assert len(chats) == 4 and limit == 32
    assert "Q1" in chats[0][-1]["content"] and chats[0][0]["role"] == "user"


def scripted_self_refine(rounds_of: dict[str, int], scores: dict[str, list]):
    """Question q gets rounds_of[q] refine rounds (then NO CHANGE NEEDED); its answers are
    "answer <i> to q \\boxed{i}" and answer i's score is scores[q][i] (None: no score)."""
    seen: dict[str, int] = {}

    def respond(kind, user, chat):
        q = next(q for q in rounds_of if q in user)
        if kind == "answer":
            return f"answer 0 to {q} \\boxed{{0}}"
        if kind == "score":
            i = int(candidate_of(user).split()[1])
            return score_reply(scores[q][i])
        if kind == "feedback":
            seen[q] = seen.get(q, 0) + 1
            return f"fine\n{NO_CHANGE}" if seen[q] > rounds_of[q] else "step two is wrong"
        return f"answer {seen[q]} to {q} \\boxed{{{seen[q]}}}"

    return respond


def test_self_refine_select_best_keeps_the_best_so_far():
    """The returned candidate's score is the maximum seen, the earlier one on a tie; a failed
    score cannot win; with no score at all the latest answer is returned and counted."""
    plan = {
        "QA": [0.2, 0.9, 0.4],  # the best is in the middle: neither the first nor the latest
        "QB": [0.5, None, 0.5, 0.5],  # tie: the earliest of the best
        "QC": [None, 0.1],  # a failed score cannot win, even against a low one
        "QD": [None, None, None],  # nothing scored: the latest, as today, counted
        "QE": [0.7],  # one answer (NO CHANGE at once): not scored
    }
    backend = Scripted(scripted_self_refine({q: len(s) - 1 for q, s in plan.items()}, plan))
    out = produce(
        "self-refine",
        list(plan),
        generator(backend),
        MethodPrompts.load(),
        4,
        selection=Selection(select="best", score_tokens=64),
    )
    got = dict(zip(plan, out))
    expect = {"QA": (1, False), "QB": (0, False), "QC": (1, False), "QD": (2, True), "QE": (0, False)}
    for q, p in got.items():
        index, fallback = expect[q]
        assert f"answer {index} to {q}" in p.text, (q, p.text)
        assert p.meta["select"] == "best" and p.meta["selection_fallback"] is fallback
        assert p.meta["selected"] == ("answer" if index == 0 else f"refine:{index}")
        assert p.variant == "self_refine:" + p.meta["selected"]
        seen = [s for s in p.meta["scores"] if s is not None]
        if seen:  # the invariant: the chosen candidate's score is the maximum seen
            assert p.meta["scores"][index] == max(seen)
        assert p.meta["score_failures"] == sum(s is None for s in p.meta["scores"])
        # tokens: every pass of the loop and every scoring reply, the final answer's own apart
        assert p.n_tokens == sum(x["tokens"] for x in p.passes)
        assert p.meta["final_tokens"] == len(p.text.split())
    assert got["QA"].meta["scores"] == [0.2, 0.9, 0.4] and got["QD"].meta["score_failures"] == 3
    assert got["QE"].meta["scores"] == [] and not any("score" in x["variant"] for x in got["QE"].passes)
    scoring = [x for x in got["QA"].passes if ":score:" in x["variant"]]
    assert [x["variant"] for x in scoring] == ["self_refine:score:0", "self_refine:score:1", "self_refine:score:2"]
    assert all("Score:" in x["text"] for x in scoring)
    # one scoring call after the loop, for every answer of every question with more than one
    assert backend.kinds()[-1] == "score" and backend.kinds().count("score") == 1
    assert len(backend.calls[-1][0]) == 3 + 4 + 2 + 3 and backend.calls[-1][1] == 64


def test_self_refine_select_best_over_random_scripts_keeps_the_invariant():
    rng = random.Random(7)
    plan = {
        f"Q{i:02d}": [rng.choice([None, 0.0, 0.3, 0.6, 0.6, 1.0]) for _ in range(rng.randint(1, 5))] for i in range(40)
    }
    backend = Scripted(scripted_self_refine({q: len(s) - 1 for q, s in plan.items()}, plan))
    out = produce("self-refine", list(plan), generator(backend), MethodPrompts.load(), 4, selection=Selection("best"))
    for (_q, scores), p in zip(plan.items(), out):
        index = int(p.text.split()[1])
        seen = [s for s in scores if s is not None]
        if len(scores) == 1:
            assert index == 0 and not p.meta["selection_fallback"]
        elif seen:
            assert scores[index] == max(seen) and index == scores.index(max(seen))
        else:
            assert index == len(scores) - 1 and p.meta["selection_fallback"]


def test_self_refine_latest_is_unchanged_and_unscored():
    plan = {"QA": [0.1, 0.9, 0.2]}
    backend = Scripted(scripted_self_refine({"QA": 2}, plan))
    (p,) = produce("self-refine", ["QA"], generator(backend), MethodPrompts.load(), 4)
    assert "answer 2 to QA" in p.text and "score" not in backend.kinds() and "select" not in p.meta
    # the default leaves the settings (the resume fingerprint) and the prompt hash as they were
    prompts = MethodPrompts.load()
    latest = EvalConfig("m", ["gsm8k"], "o", method="self-refine")
    assert "select" not in latest.settings(prompts) and "max_score_tokens" not in latest.settings(prompts)
    assert latest.settings(prompts)["prompts"] == prompts.self_refine.version()
    best = EvalConfig("m", ["gsm8k"], "o", method="self-refine", select="best")
    assert best.settings(prompts)["select"] == "best" and best.settings(prompts)["max_score_tokens"] == 1500
    assert best.settings(prompts)["prompts"] != latest.settings(prompts)["prompts"]


def test_self_refine_select_best_run_records_and_summary(data_env, tmp_path):
    gold = golds(2)
    q1, q2 = gold

    def respond(kind, user, chat):
        q = q1 if q1 in user else q2
        if kind == "answer":
            return f"First try: \\boxed{{{gold[q]}}}"  # right first
        if kind == "feedback":
            return f"ok\n{NO_CHANGE}" if "Attempt 2:" in user else "check again"
        if kind == "refine":
            return "Second try: \\boxed{-1}"  # the refine breaks it: latest would be wrong
        return score_reply(0.9 if "First try" in user else (None if q == q2 else 0.1))

    summary = run_eval(
        cfg_for(tmp_path, method="self-refine", select="best", limit=2, max_score_tokens=48), backend=Scripted(respond)
    )
    d = summary["datasets"]["gsm8k"]
    assert d["accuracy"] == 1.0 and d["score_failures"] == 1 and d["selection_fallbacks"] == 0
    assert summary["select"] == "best"
    for r in records_of(tmp_path / "run"):
        assert r.variant == "self_refine:answer" and r.acc == 1.0
        assert r.response_tokens == sum(p["tokens"] for p in r.extra["passes"])
        assert [p["variant"] for p in r.extra["passes"]][-2:] == ["self_refine:score:0", "self_refine:score:1"]
    md = (tmp_path / "run" / "summary.md").read_text()
    assert "method self-refine (select best)" in md and "| score failures | fallbacks |" in md
    assert "| 1 | 0 |" in md and "every scoring reply" in md
    # rerun: nothing to do; --select latest is another run
    again = Scripted(respond)
    run_eval(cfg_for(tmp_path, method="self-refine", select="best", limit=2, max_score_tokens=48), backend=again)
    assert again.calls == []
    with pytest.raises(EvalError, match="select"):
        run_eval(cfg_for(tmp_path, method="self-refine", limit=2), backend=Scripted(respond))
