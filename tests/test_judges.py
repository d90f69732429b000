"""Judges: Math-Verify rule judge on real rows, the OpenAI-compatible judge against the local
fake server (retries, failures, concurrency, cache), the hybrid router and ``build_judge``."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from benchmarks.fake_openai_server import FakeOpenAIServer
from prompts import load_prompt
from recipe.pasr_config import JudgeConfig
from rewards.extract import gsm8k_gold
from rewards.judges import (
    HybridJudge,
    JudgeItem,
    OpenAIJudge,
    RuleJudge,
    build_judge,
    gold_is_math,
    parse_score,
    score_sync,
)
from rewards.judges.hybrid import is_plain_words

SLOW_GOLD = "2^{2^{2^{2^{2^{10}}}}}"  # sympy cannot finish this within any alarm


def _rows(path, n):
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for _, line in zip(range(n), fh)]


# --- rule judge --------------------------------------------------------------------------------


def test_rule_judge_gsm8k_golds(shared_data):
    golds = [gsm8k_gold(r["answer"]) for r in _rows(shared_data / "gsm8k_test.jsonl", 4)]
    pairs, expected = [], []
    for gold in golds:
        for answer, score in ((gold, 1.0), (f"{gold}.0", 1.0), (f"\\boxed{{{gold}}}", 1.0), (str(int(gold) + 1), 0.0)):
            pairs.append((gold, answer))
            expected.append(score)
    pairs.append((golds[0], None))
    expected.append(0.0)
    results = RuleJudge(mode="inline").score_pairs(pairs)
    assert all(r.ok for r in results), results
    assert [r.score for r in results] == expected


def test_rule_judge_math500_latex(shared_data):
    rows = {}
    with (shared_data / "math500_test.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            rows[row["unique_id"]] = row["answer"]
    cases = [
        ("test/precalculus/807.json", "(3, \\pi/2)", 1.0),
        ("test/precalculus/807.json", "(3, \\pi)", 0.0),
        ("test/algebra/2584.json", "14/3", 1.0),
        ("test/algebra/2584.json", "\\dfrac{14}{3}", 1.0),
        ("test/algebra/2584.json", "3/14", 0.0),
        ("test/intermediate_algebra/1994.json", "-q + p", 1.0),
        ("test/intermediate_algebra/1994.json", "q - p", 0.0),
        ("test/algebra/2036.json", "\\sqrt{117}", 1.0),
        ("test/algebra/2036.json", "3\\sqrt{12}", 0.0),
        ("test/precalculus/927.json", "90", 1.0),
    ]
    results = RuleJudge(mode="inline").score_pairs([(rows[uid], ans) for uid, ans, _ in cases])
    assert all(r.ok for r in results), results
    assert [r.score for r in results] == [score for _, _, score in cases]


def test_rule_judge_timeout_inline_is_an_error():
    good, slow = RuleJudge(timeout_s=1, mode="inline").score_pairs([("42", "42"), (SLOW_GOLD, "3")])
    assert good.ok and good.score == 1.0
    assert not slow.ok and slow.score is None and slow.error == "timeout"


def test_rule_judge_off_main_thread_uses_pool_and_times_out():
    judge = RuleJudge(timeout_s=1)  # auto: a worker thread has no signal alarm -> process pool
    items = [JudgeItem("q", "18", "18.0"), JudgeItem("q", "18", "19"), JudgeItem("q", SLOW_GOLD, "3")]
    out: dict = {}

    def worker():
        try:
            out["results"] = score_sync(judge, items)
        except BaseException as exc:  # surfaced below
            out["error"] = exc

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join(60)
    judge.close()
    assert "error" not in out, out.get("error")
    ok1, ok0, slow = out["results"]
    assert (ok1.ok, ok1.score) == (True, 1.0)
    assert (ok0.ok, ok0.score) == (True, 0.0)
    assert (slow.ok, slow.error) == (False, "timeout")


# --- parse_score -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Score: 1", 1.0),
        ("Score: 0.75", 0.75),
        ("score:0", 0.0),
        ("**Score:** 0.5", 0.5),
        ("**Score**: 0.5", 0.5),
        ("Score: **1**", 1.0),
        ("Score: .25.", 0.25),
        ("Score: 1 (the answers agree)", 1.0),
        ("Step 1: compare 12 and 12. Score: 0.9", 0.9),  # Score: wins over other numbers
        ("Score: 1\nSo, once more: Score: 1", 1.0),  # the same score twice is one score
        ("Score: 1. 2 of the steps were checked.", 1.0),  # a full stop ends the verdict
        ("Score: 1, since 12 equals 12", 1.0),
        ("Score: 0.4\nThe reference is 15.", 0.4),  # numbers after the verdict are not read
        ("Score: 8/10", 0.8),
        ("Score: 7 out of 10", 0.7),
        ("Score: 80%", 0.8),
        ("<think>maybe 0.2, or 0.4</think>Score: 1", 1.0),
        ("reasoning about 3 and 4 ...</think>\nScore: 0", 0.0),
        # No score in the prompt's format: unparseable (retried, then a judge error), never a
        # guess. The old parser read the last number of each of these, clamped to [0, 1].
        ("The answer 12 does not match the reference 15.", None),
        ("Error 503: upstream overloaded", None),
        ("7 out of 10", None),
        ("7/10", None),
        ("0.6", None),
        ("I compared 3 things and give 1", None),
        ("The score is 0.3.", None),
        ("Subscore: 1", None),
        ("Score: <0 or 1>", None),  # the template echoed back
        ("Score: 1st try was wrong", None),
        ("Score: 7", None),  # outside [0, 1]: some other scale, not clamped to 1.0
        ("Score: -1", None),
        ("Score: 1.5", None),
        ("Score: 1e999", None),  # not finite
        ("Score: 1/0", None),
        ("<think>the answer looks like 0.7 but", None),  # cut off while thinking
        ("<think>Score: 1</think>", None),  # a score inside the reasoning is not the verdict
        ("I cannot grade this answer.", None),
        # Two scores: either one would be a guess (the parser before read the first of one
        # label's values, and the last label). Retried, then a judge error.
        ("Score: 0 or 1", None),
        ("Score: 1, 0", None),
        ("Score: 1 0", None),
        ("Score: **1** or **0**", None),
        ("Score: 0.2\nOn reflection... Score: 0.8", None),
        ("Score: 1\nScore: 7", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_score(text, expected):
    assert parse_score(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        # a range or two values after one label: either end would be a guess (the parser before
        # read the first of each of these but "0.7-0.8")
        "Score: 0.7 - 0.8",
        "Score: 0.7–0.8",  # an en dash
        "Score: 0.7 — 0.8",
        "Score: 0.6 to 0.9",
        "Score: 0.7 ~ 0.8",
        "Score: 0.7..0.8",
        "Score: 0.7 (0.6-0.8)",
        "Score: 0.7, or maybe 0.8",
        "Score: 0.7/0.8",  # not a fraction: 0.875 is stated nowhere
        "Score: 0.7\n0.8",  # a bare second number right below
        "Score: between 0.6 and 0.9",
        "Score: 70%-80%",
        # digits of other scripts whose separators the parser before stopped at: 0, 1 and 1
        "Score: ١٫٥",  # Arabic-Indic 1.5: outside [0, 1]
        "Score: ١٬٠",  # Arabic-Indic 1,0 (thousands separator): two values
        "Score: １．５",  # fullwidth 1.5
    ],
)
def test_parse_score_refuses_ranges_and_two_values(text):
    assert parse_score(text) is None


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Score: ٠٫٨", 0.8),  # Arabic-Indic digits, Arabic decimal separator (read as 0 before)
        ("Score: ٠.٨", 0.8),
        ("Score: ۰٫۸", 0.8),  # Persian digits
        ("Score: ０．５", 0.5),  # fullwidth digits and full stop (read as 0 before)
        ("Score: ０.５", 0.5),
        ("Score: ８０％", 0.8),  # fullwidth 80%
        ("Score: २/१०", 0.2),  # Devanagari 2/10
        ("Score: ०.८", 0.8),
        ("Score: 0.8/1.0", 0.8),  # a whole-number denominator written as a float
        ("Score: 1 - the answers agree", 1.0),  # a dash before words, not a range
        ("Score: 0.4\n\nThe reference is 15.", 0.4),
    ],
)
def test_parse_score_reads_other_scripts_and_keeps_one_score(text, expected):
    assert parse_score(text) == expected


def test_parse_score_is_linear_on_hostile_replies():
    import time

    replies = [
        "Score: 0." + "1" * 30000 + "x",
        "Score: 1" + " " * 30000 + "x",
        "score " * 10000,
        "Score:" + "*" * 30000,
        "Score: 1" + "." * 30000 + "x",
        "Score: 1" + " -" * 15000 + "x",
        "Score: 1 " + "or " * 10000 + "x",
    ]
    for reply in replies:
        t0 = time.perf_counter()
        parse_score(reply)
        assert time.perf_counter() - t0 < 0.5, reply[:20]


# --- OpenAI-compatible judge against the fake server ----------------------------------------------


def _judge(srv, **kw):
    kw.setdefault("timeout_s", 5.0)
    kw.setdefault("backoff_s", 0.01)
    return OpenAIJudge(srv.base_url, srv.model, **kw)


def test_openai_judge_scores_and_request_shape(monkeypatch):
    monkeypatch.setenv("MY_JUDGE_KEY", "sk-test")
    with FakeOpenAIServer() as srv:
        judge = _judge(srv, api_key_env="MY_JUDGE_KEY")
        q = "What is 6*3?"
        items = [JudgeItem(q, "18", "18"), JudgeItem(q, "18", "17"), JudgeItem(q, "1", None)]
        results = score_sync(judge, items)
        assert [(r.ok, r.score) for r in results] == [(True, 1.0), (True, 0.0), (True, 0.0)]
        assert srv.requests == 2  # no request for the missing answer
        assert srv.last_body["temperature"] == 0 and srv.last_body["model"] == srv.model
        assert srv.last_authorization == "Bearer sk-test"
        assert judge.stats.snapshot() == {
            "requests": 2,
            "retries": 0,
            "errors": 0,
            "cache_hits": 0,
            "coalesced": 0,
            "no_answer": 1,
        }


def test_openai_judge_dummy_key_when_env_unset(monkeypatch):
    monkeypatch.delenv("UNSET_JUDGE_KEY", raising=False)
    with FakeOpenAIServer() as srv:
        score_sync(_judge(srv, api_key_env="UNSET_JUDGE_KEY"), [JudgeItem("q", "1", "1")])
        assert srv.last_authorization == "Bearer EMPTY"


def test_openai_judge_retries_then_succeeds():
    faults = {"a": ["http500"], "b": ["timeout"], "c": ["garbage", "garbage"], "d": ["slow"]}
    with FakeOpenAIServer(faults=faults, hang_s=10, slow_s=0.05) as srv:
        judge = _judge(srv, timeout_s=1.0, retries=3)
        items = [JudgeItem("q", g, g) for g in ("a", "b", "c", "d", "e")]
        results = score_sync(judge, items)
        assert all(r.ok and r.score == 1.0 for r in results), results
        assert judge.stats.retries == 4  # a: 1, b: 1, c: 2
        assert judge.stats.requests == 9 == srv.requests
        assert judge.stats.errors == 0
        assert srv.by_answer == {"a": 2, "b": 2, "c": 3, "d": 1, "e": 1}


def test_openai_judge_fails_after_retries_and_counts_it():
    with FakeOpenAIServer(faults={"bad": ["http500"] * 3, "junk": ["garbage"] * 3}) as srv:
        judge = _judge(srv, retries=2)
        bad, junk, fine = score_sync(judge, [JudgeItem("q", a, a) for a in ("bad", "junk", "x")])
        assert not bad.ok and bad.score is None and "http_500" in bad.error and "3 attempts" in bad.error
        assert not junk.ok and junk.score is None and "unparsable_score" in junk.error
        assert fine.ok and fine.score == 1.0
        assert judge.stats.errors == 2 and judge.stats.retries == 4 and srv.requests == 7
        # failures are not cached: the next call asks again (and now succeeds)
        assert score_sync(judge, [JudgeItem("q", "bad", "bad")])[0].score == 1.0
        assert srv.requests == 8


@pytest.mark.parametrize(
    "reply", ["The answer 12 does not match the reference 15.", "Error 503: upstream overloaded", "7 out of 10"]
)
def test_openai_judge_reply_without_score_is_an_error_not_a_score(reply):
    with FakeOpenAIServer(reply=reply) as srv:
        judge = _judge(srv, retries=2)
        (result,) = score_sync(judge, [JudgeItem("q", "15", "12")])
        assert not result.ok and result.score is None and "unparsable_score" in result.error
        assert srv.requests == 3 and judge.stats.errors == 1 and len(judge.cache) == 0


@pytest.mark.parametrize(
    "content, kind", [(None, "null"), ([{"type": "text", "text": "Score: 1"}], "a list"), (0.8, "a number")]
)
def test_openai_judge_reply_whose_content_is_not_text_is_a_judge_error(content, kind):
    """A message content that is not a string is a bad reply (retried, then counted), never read
    through str() (0.8 would score) nor a crash that fails the whole batch (a list, a number)."""
    with FakeOpenAIServer(reply=content) as srv:
        judge = _judge(srv, retries=1)
        good, (bad,) = score_sync(judge, [JudgeItem("q", "1", "1")]), score_sync(judge, [JudgeItem("q", "2", "2")])
        for result in (*good, bad):
            assert not result.ok and result.score is None
            assert f"bad_response: the message content is {kind}, not text" in result.error, result.error
        assert srv.requests == 4 and judge.stats.errors == 2 and judge.stats.retries == 2 and len(judge.cache) == 0
        trial = asyncio.run(judge.trial("q", "1", "1"))  # pasr judge try and the ping
        assert trial.score is None and trial.reply is None and f"content is {kind}, not text" in trial.error
        assert f"content is {kind}, not text" in asyncio.run(judge.ping())
        # the train start's ping and pasr check's (rewards.judges.ping_judge): one line, not a traceback
        from rewards.judges import ping_judge

        why = ping_judge(JudgeConfig(kind="openai", base_url=srv.base_url, model=srv.model, retries=0))
        assert why and "did not score a test item: bad_response: the message content is" in why and "\n" not in why


def test_openai_judge_does_not_retry_client_errors():
    # A server built for another template answers 400: asking again cannot help.
    with FakeOpenAIServer(template=load_prompt("judge_binary")) as srv:
        judge = _judge(srv, template=load_prompt("judge_continuous"), retries=3)
        (result,) = score_sync(judge, [JudgeItem("q", "1", "1")])
        assert not result.ok and "http_400" in result.error
        assert srv.requests == 1 and judge.stats.retries == 0 and judge.stats.errors == 1


def test_openai_judge_timeout_exhausts_retries():
    with FakeOpenAIServer(faults={"t": ["timeout"] * 2}, hang_s=10) as srv:
        judge = _judge(srv, timeout_s=0.2, retries=1)
        (result,) = score_sync(judge, [JudgeItem("q", "t", "t")])
        assert not result.ok and "timeout" in result.error
        assert judge.stats.requests == 2 and judge.stats.errors == 1


def test_openai_judge_concurrency_bound():
    with FakeOpenAIServer(latency_s=0.05) as srv:
        judge = _judge(srv, concurrency=4)
        results = score_sync(judge, [JudgeItem("q", str(i), str(i)) for i in range(24)])
        assert all(r.ok for r in results)
        assert srv.requests == 24
        assert srv.max_inflight == 4


def test_openai_judge_cache_and_coalescing():
    with FakeOpenAIServer(latency_s=0.02) as srv:
        judge = _judge(srv)
        same = [JudgeItem("q", "5", "5")] * 3
        assert [r.score for r in score_sync(judge, same)] == [1.0] * 3
        assert srv.requests == 1 and judge.stats.coalesced == 2
        assert score_sync(judge, same[:1])[0].score == 1.0
        assert srv.requests == 1 and judge.stats.cache_hits == 1
        # a different question is a different key
        score_sync(judge, [JudgeItem("other q", "5", "5")])
        assert srv.requests == 2


def test_openai_judge_persisted_cache(tmp_path):
    path = tmp_path / "judge_cache.jsonl"
    items = [JudgeItem("q", "1", "1"), JudgeItem("q", "1", "2")]
    with FakeOpenAIServer() as srv:
        first = score_sync(_judge(srv, cache_path=path), items)
        assert srv.requests == 2
        with path.open("a", encoding="utf-8") as fh:
            fh.write('{"key": "torn')  # a torn last line must not break loading
        reloaded = _judge(srv, cache_path=path)
        assert reloaded.cache.loaded == 2
        again = score_sync(reloaded, items)
        assert [r.score for r in again] == [r.score for r in first] == [1.0, 0.0]
        assert srv.requests == 2 and reloaded.stats.cache_hits == 2
        # another judge prompt is another prompt version: no stale hits
        other = _judge(srv, cache_path=path, template=load_prompt("judge_continuous") + "\n")
        score_sync(other, items[:1])
        assert srv.requests == 3 and other.stats.cache_hits == 0


def test_openai_judge_usable_from_several_event_loops():
    with FakeOpenAIServer() as srv:
        judge = _judge(srv)
        for i in range(3):  # score_sync makes a new loop per call: nothing may leak across loops
            assert score_sync(judge, [JudgeItem("q", str(i), str(i))])[0].score == 1.0
        out = {}
        thread = threading.Thread(target=lambda: out.setdefault("r", score_sync(judge, [JudgeItem("q", "t", "t")])))
        thread.start()
        thread.join(30)
        assert out["r"][0].score == 1.0 and srv.requests == 4


def test_openai_judge_pickles_with_its_cache():
    import pickle

    with FakeOpenAIServer() as srv:
        judge = _judge(srv)
        score_sync(judge, [JudgeItem("q", "1", "1")])
        clone = pickle.loads(pickle.dumps(judge))
        assert score_sync(clone, [JudgeItem("q", "1", "1"), JudgeItem("q", "2", "2")])[1].score == 1.0
        assert clone.stats.cache_hits == 1 and srv.requests == 2


# --- hybrid and factory --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "gold, math",
    [
        ("42", True),
        ("\\frac{14}{3}", True),
        ("p - q", True),
        ("\\sqrt{x}", True),
        ("\\text{(C)}", True),
        ("10\\text{ inches}", True),
        ("\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", True),
        ("Paris", False),
        ("\\text{Evelyn}", False),
        ("blue whale", False),
        ("yes", False),
    ],
)
def test_gold_routing(gold, math):
    assert is_plain_words(gold) is not math
    assert gold_is_math(gold) is math


def test_hybrid_routes_and_keeps_order():
    with FakeOpenAIServer() as srv:
        judge = HybridJudge(rule=RuleJudge(mode="inline"), llm=_judge(srv))
        items = [
            JudgeItem("capital?", "Paris", "Paris"),  # llm: exact match -> 1
            JudgeItem("6*3?", "18", "18.0"),  # rule: equivalent (the fake server would say 0)
            JudgeItem("name?", "\\text{Evelyn}", "Bob"),  # llm -> 0
            JudgeItem("half?", "\\frac{1}{2}", "0.5"),  # rule -> 1
            JudgeItem("capital?", "Paris", None),  # llm, no answer -> 0 without a request
        ]
        results = score_sync(judge, items)
        assert [(r.ok, r.score) for r in results] == [(True, 1.0), (True, 1.0), (True, 0.0), (True, 1.0), (True, 0.0)]
        assert srv.requests == 2
        assert judge.routed == {"rule": 2, "llm": 3}


def test_build_judge(tmp_path):
    assert isinstance(build_judge(JudgeConfig(kind="rule", rule_timeout_s=2)), RuleJudge)
    assert build_judge(JudgeConfig(kind="rule", rule_timeout_s=2)).timeout_s == 2
    cfg = JudgeConfig(kind="openai", base_url="http://127.0.0.1:9/v1", model="m", concurrency=7, retries=1)
    judge = build_judge(cfg, "judge_binary")
    assert isinstance(judge, OpenAIJudge)
    assert judge.template == load_prompt("judge_binary") and judge.concurrency == 7 and judge.retries == 1
    custom = tmp_path / "my_judge.txt"
    custom.write_text("Q {question} G {gold} A {answer} -> Score:", encoding="utf-8")
    hybrid = build_judge(JudgeConfig(kind="hybrid", base_url="http://127.0.0.1:9/v1", model="m"), str(custom))
    assert isinstance(hybrid, HybridJudge) and hybrid.llm.template.startswith("Q {question}")
    with pytest.raises(ValueError):
        build_judge(JudgeConfig(kind="openai"))
    with pytest.raises(ValueError):
        build_judge(JudgeConfig(kind="magic"))


# --- a reply that is not UTF-8; the API key never in an error (issue 34) ----------------------------


def test_openai_judge_reply_that_is_not_utf8_is_a_retryable_bad_response():
    """A body that does not decode is a bad reply like any other: retried, then a judge error
    for that item alone, never an exception that fails the whole batch."""
    with FakeOpenAIServer(faults={"a": ["not_utf8"], "b": ["not_utf8"] * 3}) as srv:
        judge = _judge(srv, retries=2)
        a, b, c = score_sync(judge, [JudgeItem("q", x, x) for x in ("a", "b", "c")])
        assert a.ok and a.score == 1.0  # the retry got a good reply
        assert (
            not b.ok
            and b.score is None
            and "bad_response" in b.error
            and "UTF-8" in b.error
            and "3 attempts" in b.error
        )
        assert c.ok and c.score == 1.0
        assert srv.by_answer == {"a": 2, "b": 3, "c": 1} and judge.stats.errors == 1


def test_redact_secrets():
    from rewards.judges.redact import REDACTED, redact_secrets

    key = "tok_9QvX2LmW7bRk4TzN8yHc"
    assert redact_secrets(f"echo: {key}!", [key]) == f"echo: {REDACTED}!"
    assert redact_secrets("Authorization: Basic dXNlcjpwYXNz\nnext", []) == f"Authorization: {REDACTED}\nnext"
    assert (
        redact_secrets('{"authorization": "Bearer abc.def-ghi", "x": 1}')
        == f'{{"authorization": "{REDACTED}", "x": 1}}'
    )
    assert redact_secrets("bearer XYZ123/+=, retry") == f"bearer {REDACTED}, retry"
    assert redact_secrets("x-api-key: abc123 and api_key=def456") == f"x-api-key: {REDACTED} and api_key={REDACTED}"
    assert redact_secrets("used sk-abcdefghijklmnopqrst1234 here") == f"used {REDACTED} here"
    assert redact_secrets("sk-proj-Ab3_dE5-fGh7iJk9lMn0") == REDACTED
    for text in (
        'http_500: {"error": {"message": "injected fault"}}',
        "unparsable_score: 'Score: maybe'",
        "timeout",
        "risk-free task-based answer",
        "transport: ClientConnectorError: Cannot connect to host 127.0.0.1:9",
    ):
        assert redact_secrets(text, ["EMPTY"]) == text  # nothing secret: untouched
    assert redact_secrets(redact_secrets(f"Bearer {key}", [key]), [key]) == f"Bearer {REDACTED}"  # idempotent


@pytest.mark.parametrize("key", ["sk-proj-4fJ9xQ2mZ7tL1pV8rK3wB6nY0cD5hG", "tok_9QvX2LmW7bRk4TzN8yHcDe3"])
def test_openai_judge_error_never_holds_the_api_key(key, tmp_path):
    """A server whose HTTP 500 body echoes the request headers: the judge error that reaches the
    record (and the dump) says what failed, without the key or any part of it."""
    from data.records import write_records
    from recipe.scoring import Rollout, judge_and_record

    with FakeOpenAIServer(faults={"7": ["echo_headers"] * 2}) as srv:
        judge = _judge(srv, api_key=key, retries=1)
        rollout = Rollout("q1", "synthetic", "3+4?", "7", "refine", "<answer>7</answer>", 5)
        (record,) = judge_and_record([rollout], judge, run_id="r", step=1, engine="local")
        assert srv.last_authorization == f"Bearer {key}" and srv.actions["echo_headers"] == 2
    assert record.acc is None and "http_500" in record.judge_error
    write_records(tmp_path / "step.jsonl", [record])
    text = (tmp_path / "step.jsonl").read_text()
    leaked = [key[i : i + 8] for i in range(len(key) - 7) if key[i : i + 8] in text]
    assert not leaked, record.judge_error


# --- bounded replies; credentials in the URL (issue 51) --------------------------------------------


def test_openai_judge_reply_over_the_size_limit_is_a_judge_error():
    """A reply body over max_reply_bytes is a bad reply, retried and then a judge error, and is
    read no further: announced by its Content-Length, or streamed chunked (without one) until
    the client stops reading. Before, the whole body was read (four 50 MB replies held 868 MB)
    and the score at its start counted."""
    import tracemalloc

    padded = "Score: {score}" + " " * (2 << 20)  # a 2 MiB reply with a Content-Length
    with FakeOpenAIServer(reply=padded) as srv:
        judge = _judge(srv, retries=1)
        (result,) = score_sync(judge, [JudgeItem("q", "1", "1")])
        assert not result.ok and result.score is None and "over 1048576 bytes" in result.error
        assert srv.requests == 2 and judge.stats.errors == 1 and len(judge.cache) == 0

    with FakeOpenAIServer(faults={"a": ["oversize"] * 2, "b": ["oversize"]}, oversize_bytes=64 << 20) as srv:
        judge = _judge(srv, retries=1, max_reply_bytes=256 * 1024)
        tracemalloc.start()
        try:
            a, b, c = score_sync(judge, [JudgeItem("q", x, x) for x in ("a", "b", "c")])
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert not a.ok and "bad_response" in a.error and "over 262144 bytes" in a.error and "2 attempts" in a.error
        assert b.ok and b.score == 1.0 and c.ok and c.score == 1.0  # b's retry got a normal reply
        assert srv.actions["oversize"] == 3 and judge.stats.errors == 1
        assert srv.oversize_sent < 3 * 16 << 20  # each stream abandoned long before its 64 MiB
        assert peak < 16 << 20, peak  # three 64 MiB replies, never held


def test_openai_judge_url_with_credentials_authenticates_and_never_shows_them(tmp_path):
    """user:password@ in the URL is sent as Basic authentication (before, aiohttp refused the
    request beside the bearer header and the batch crashed) and appears in no repr, URL or
    error that reaches a record."""
    import base64

    from data.records import write_records
    from recipe.scoring import Rollout, judge_and_record

    password = "Tr0ub4dor-and-3"
    with FakeOpenAIServer(faults={"7": ["echo_headers"] * 2}) as srv:
        url = srv.base_url.replace("http://", f"http://alice:{password}@")
        judge = OpenAIJudge(url, srv.model, timeout_s=5.0, backoff_s=0.01, retries=1)
        (ok,) = score_sync(judge, [JudgeItem("q", "1", "1")])
        assert ok.ok and ok.score == 1.0
        assert srv.last_authorization == "Basic " + base64.b64encode(f"alice:{password}".encode()).decode()
        rollout = Rollout("q1", "synthetic", "3+4?", "7", "refine", "<answer>7</answer>", 5)
        (record,) = judge_and_record([rollout], judge, run_id="r", step=1, engine="local")
    assert record.acc is None and "http_500" in record.judge_error
    write_records(tmp_path / "step.jsonl", [record])
    for text in (repr(judge), judge.base_url, judge.url, (tmp_path / "step.jsonl").read_text()):
        assert password not in text and "alice" not in text


def test_a_judge_url_whose_credentials_were_redacted_is_refused():
    from rewards.judges.redact import redact_url

    saved = redact_url("http://alice:pw@judge:8000/v1")
    assert saved == "http://[REDACTED]@judge:8000/v1"
    with pytest.raises(ValueError, match="had its credentials removed"):
        OpenAIJudge(saved, "m")


def test_redact_url():
    from rewards.judges.redact import REDACTED, redact_secrets, redact_url

    assert redact_url("http://alice:p@ss@judge:8000/v1") == f"http://{REDACTED}@judge:8000/v1"  # an unescaped @ too
    assert redact_url("https://TOKEN@judge/v1") == f"https://{REDACTED}@judge/v1"
    for text in ("http://judge:8000/v1", "http://judge/v1?who=a@b", "mail a@b.c"):
        assert redact_url(text) == text
    assert redact_secrets("Cannot connect to http://u:pw@h:1/v1") == f"Cannot connect to http://{REDACTED}@h:1/v1"
