"""`pasr eval` choosing among candidates: Self-Refine ``--select best`` and best-of-n
(``--select majority|score``), with scripted generators (no model).

The scripted backend answers by prompt kind: a chat with a system prompt is an answer (the
plain prompt: Self-Refine's first answer, each best-of-n candidate), a user message with the
scoring template's "Proposed answer:" is a scoring pass, the rest are Self-Refine's feedback
and refine passes. Tokens are words, so every count can be checked by hand.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from data.records import iter_records
from eval.backends import Completion, GenParams
from eval.best_of_n import run_best_of_n
from eval.majority_vote import answer_key, vote
from eval.methods import MethodPrompts, Selection, produce
from eval.run import EvalConfig, EvalError, run_eval
from eval.self_refine import NO_CHANGE
from eval.self_score import ScorePrompt, pick_best, score_candidates

SCORE_MARK = "Proposed answer:"  # in prompts/templates/self_score.txt


class Scripted:
    """``respond(kind, question, chat)`` per chat, kind = answer | score | feedback | refine;
    records every call's chats and max_new_tokens."""

    name = "scripted"

    def __init__(self, respond):
        self.respond = respond
        self.calls: list[tuple[list, int]] = []

    def load(self) -> None:
        pass

    def generate(self, chats, params: GenParams, on_finished=None):
        self.calls.append(([list(c) for c in chats], params.max_new_tokens))
        out = []
        for chat in chats:
            text = self.respond(kind_of(chat), chat[-1]["content"], chat)
            out.append(Completion(text, len(text.split()), "stop"))
        return out

    def kinds(self) -> list[str]:
        """The kind of each call (all chats of a call are of one kind)."""
        return [kind_of(chats[0]) for chats, _ in self.calls]


def kind_of(chat) -> str:
    user = chat[-1]["content"]
    if chat[0]["role"] == "system":
        return "answer"
    if SCORE_MARK in user:
        return "score"
    return "feedback" if "Review the latest answer" in user else "refine"


def generator(backend: Scripted, default_limit: int = 1500):
    """What eval.run hands a method: chats in, completions out, a pass's own limit honoured."""

    def generate(chats, max_new_tokens: int | None = None):
        return backend.generate(chats, GenParams(max_new_tokens=max_new_tokens or default_limit))

    return generate


def candidate_of(user: str) -> str:
    """The candidate text a scoring prompt carries."""
    return user.split(SCORE_MARK, 1)[1].split("Check the proposed answer", 1)[0].strip()


def score_reply(score) -> str:
    return "I checked each step. No score today." if score is None else f"The steps hold.\nScore: {score}"


def records_of(out) -> list:
    return list(iter_records(Path(out) / "samples.jsonl", strict=True))


def cfg_for(tmp_path, **kw) -> EvalConfig:
    kw.setdefault("model", "scripted-model")
    kw.setdefault("datasets", ["gsm8k"])
    kw.setdefault("out", str(tmp_path / "run"))
    kw.setdefault("progress", False)
    return EvalConfig(**kw)


@pytest.fixture
def data_env(shared_data, monkeypatch):
    monkeypatch.setenv("PASR_DATA_DIR", str(shared_data))
    return shared_data


def golds(n: int) -> dict[str, str]:
    from data.loaders import load_examples

    return {ex.question: ex.answer for ex in load_examples("gsm8k", limit=n)}


# ----------------------------------------------------------------------------- choosing by score


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
    (rs, single) = score_candidates(["Q1", "Q2"], [["A", "B", "C", "D"], ["only"]], generator(backend), ScorePrompt.load(), 32)
    assert [r.score for r in rs] == [0.9, None, None, 0.8]  # no label, and 7 (outside 0-1), are failed scores
    assert [r.candidate for r in rs] == [0, 1, 2, 3] and rs[1].text == replies_for["B"]
    assert single == []  # one candidate: nothing to choose, not scored
    ((chats, limit),) = backend.calls
    assert len(chats) == 4 and limit == 32
    assert "Q1" in chats[0][-1]["content"] and chats[0][0]["role"] == "user"


# ----------------------------------------------------------------------------- self-refine --select best


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
    out = produce("self-refine", list(plan), generator(backend), MethodPrompts.load(), 4,
                  selection=Selection(select="best", score_tokens=64))  # fmt: skip
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
    plan = {f"Q{i:02d}": [rng.choice([None, 0.0, 0.3, 0.6, 0.6, 1.0]) for _ in range(rng.randint(1, 5))] for i in range(40)}
    backend = Scripted(scripted_self_refine({q: len(s) - 1 for q, s in plan.items()}, plan))
    out = produce("self-refine", list(plan), generator(backend), MethodPrompts.load(), 4, selection=Selection("best"))
    for (q, scores), p in zip(plan.items(), out):
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

    summary = run_eval(cfg_for(tmp_path, method="self-refine", select="best", limit=2, max_score_tokens=48),
                       backend=Scripted(respond))  # fmt: skip
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


# ----------------------------------------------------------------------------- best-of-n


def scripted_samples(samples: dict[str, list[str]], scores: dict[str, list] | None = None):
    """Question q's k-th candidate is samples[q][k] (tagged "#k" so scoring can tell them
    apart); its score, scores[q][k]."""
    seen: dict[str, int] = {}

    def respond(kind, user, chat):
        q = next(q for q in samples if q in user)
        if kind == "answer":
            k = seen.get(q, 0)
            seen[q] = k + 1
            return f"candidate #{k} says {samples[q][k]}"
        assert kind == "score", kind
        k = int(candidate_of(user).split("#", 1)[1].split()[0])
        return score_reply(scores[q][k])

    return respond


def test_best_of_n_majority_groups_answers_as_the_judge_compares_them():
    samples = {
        "QA": ["\\boxed{3}", "\\boxed{0.5}", "\\boxed{\\frac{1}{2}}", "\\boxed{3}", "<answer>1/2</answer>"],  # 1/2 wins 3 to 2
        "QB": ["\\boxed{7}", "\\boxed{8}", "\\boxed{8}", "\\boxed{7}"],  # a tie: the group that began first
        "QC": ["no answer", "\\boxed{1,000}", "<answer>\\$1000</answer>", "\\boxed{999}"],  # a None votes for nothing
        "QD": ["nothing", "still nothing", "no", "none"],  # no answer at all: the first, counted
    }
    backend = Scripted(scripted_samples(samples))
    out = produce("best-of-n", ["QA"], generator(backend), MethodPrompts.load(),
                  selection=Selection(candidates=5, judge_kind="rule"))  # fmt: skip (the default: majority)
    assert "#1" in out[0].text and out[0].meta["votes"] == 3 and out[0].meta["selected"] == 1
    backend4 = Scripted(scripted_samples(samples))
    rest = produce("best-of-n", ["QB", "QC", "QD"], generator(backend4), MethodPrompts.load(),
                   selection=Selection(select="majority", candidates=4))  # fmt: skip
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
    out = produce("best-of-n", list(samples), generator(backend), MethodPrompts.load(),
                  selection=Selection(select="score", candidates=4, score_tokens=20))  # fmt: skip
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
    (p,) = produce("best-of-n", ["QA"], generator(backend), MethodPrompts.load(), selection=Selection("score", candidates=1))
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
        assert r.response_tokens == sum(p["tokens"] for p in r.extra["passes"]) == sum(
            len(t.split()) for t in (p["text"] for p in r.extra["passes"])
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


# ----------------------------------------------------------------------------- CLI


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--method", "best-of-n", "--samples", "0"], "--samples must be >= 1, got 0"),
        (["--method", "plain", "--select", "best"], "--select applies to --method self-refine (latest|best) and "
                                                    "best-of-n (majority|score), not to plain"),
        (["--method", "pasr", "--select", "majority"], "not to pasr"),
        (["--method", "reflect-retry", "--select", "score"], "not to reflect-retry"),
        (["--method", "self-refine", "--select", "majority"],
         "--select majority is not a choice of --method self-refine: latest (the default) or best"),
        (["--method", "best-of-n", "--select", "best"],
         "--select best is not a choice of --method best-of-n: majority (the default) or score"),
        (["--method", "best-of-n", "--select", "latest"], "is not a choice of --method best-of-n"),
        (["--method", "best-of-n", "--max-score-tokens", "64"], "--max-score-tokens applies to --select best"),
        (["--method", "self-refine", "--score-prompt", "self_score"], "--score-prompt applies to --select best"),
        (["--method", "self-refine", "--select", "best", "--max-score-tokens", "0"], "--max-score-tokens must be >= 1"),
        (["--method", "self-refine", "--select", "best", "--score-prompt", "nosuch"], "unknown prompt 'nosuch'"),
    ],
)
def test_cli_selection_errors_are_one_line(tmp_path, run_cli, argv, needle):
    base = ["eval", "--model", "m", "--dataset", "gsm8k", "--limit", "1", "--out", str(tmp_path / "o"), "--progress", "off"]
    rc, _, err = run_cli([*base, *argv])
    assert rc == 2 and needle in err and err.count("\n") == 1 and "Traceback" not in err, err
    assert not (tmp_path / "o" / "run.json").exists()


def test_cli_passes_the_selection_flags(tmp_path, run_cli, monkeypatch):
    import eval.run

    seen = []

    def fake_run_eval(cfg):
        seen.append(cfg)
        raise EvalError("stop here")

    monkeypatch.setattr(eval.run, "run_eval", fake_run_eval)
    base = ["eval", "--model", "m", "--dataset", "gsm8k", "--out", str(tmp_path / "o")]
    run_cli([*base, "--method", "best-of-n", "--samples", "8", "--select", "score", "--max-score-tokens", "64",
             "--score-prompt", "self_score"])  # fmt: skip
    run_cli([*base, "--method", "self-refine"])
    a, b = seen
    assert (a.method, a.samples, a.select, a.max_score_tokens, a.score_prompt) == ("best-of-n", 8, "score", 64, "self_score")
    assert a.records_per_question == 1 and a.selection().candidates == 8
    assert (b.select, b.max_score_tokens, b.score_prompt) == (None, None, None)
    assert b.selection().resolved("self-refine") == "latest"


def test_help_explains_every_new_flag():
    from pasr_cli import build_parser

    help_text = build_parser()._subparsers._group_actions[0].choices["eval"].format_help()
    flat = " ".join(help_text.split())
    for needle in ("best-of-n", "--select {latest,best,majority,score}", "--max-score-tokens", "--score-prompt",
                   "self-refine: latest (default, Madaan et al.) or best", "best-of-n: majority (default",
                   "the earlier on a tie", "the earliest on a tie", "prompts/templates/self_score.txt",
                   "Tokens of scoring passes count", "best-of-n: the N candidates", "a failed score"):  # fmt: skip
        assert needle in flat, needle


def test_compare_names_the_selection(data_env, tmp_path, capsys):
    from eval.compare import comparison_table, load_runs

    gold = golds(1)
    (q,) = gold
    respond = scripted_samples({q: [f"<answer>\\boxed{{{gold[q]}}}</answer>"] * 2})
    run_eval(cfg_for(tmp_path, method="best-of-n", samples=2, limit=1, out=str(tmp_path / "bon")), backend=Scripted(respond))
    table = comparison_table(load_runs([str(tmp_path / "bon")]))
    assert "best-of-n (2 candidates, select majority)" in table
