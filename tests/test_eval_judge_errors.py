"""`pasr eval` when the judge or the generation fails: each error recorded on its sample and
counted, a rerun judges again (and with --retry-errors generates again) only what failed, and
--judge-timeout bounds a hanging LLM judge."""

from __future__ import annotations

import pytest

from eval.run import EvalError, run_eval
from rewards.judges.base import JudgeResult
from tests.scripted_eval import Scripted, cfg_for, golds, plain_text, records_of


class FlakyJudge:
    """Fails on one answer; returns 1.0 otherwise."""

    name = "flaky"

    async def score_many(self, items):
        return [JudgeResult.failed("judge timeout") if i.answer == "7" else JudgeResult(1.0) for i in items]


def test_judge_and_generation_errors_are_recorded_and_counted(data_env, tmp_path):
    gold = golds(data_env, "gsm8k", 4)
    q = list(gold)

    def respond(system, user):
        return plain_text("7" if user == q[1] else gold[user])

    backend = Scripted(respond, fail_if=lambda user: user == q[2])
    summary = run_eval(cfg_for(tmp_path, method="plain", limit=4, chunk_size=4), backend=backend, judge=FlakyJudge())
    recs = {r.prompt: r for r in records_of(tmp_path / "run")}
    assert len(recs) == 4  # nothing dropped
    assert recs[q[1]].acc is None and recs[q[1]].judge_error == "judge timeout"
    bad = recs[q[2]]
    assert bad.acc is None and "prompt too long" in bad.extra["error"] and bad.format_reason == "generation_error"
    assert recs[q[0]].acc == 1.0 and recs[q[3]].acc == 1.0  # the rest of the batch survived
    d = summary["datasets"]["gsm8k"]
    assert (d["judge_errors"], d["generation_errors"], d["errors"], d["n_scored"]) == (1, 1, 2, 2)
    assert d["accuracy"] == 1.0
    assert "| gsm8k | 4 | 4 | 100.0% |" in (tmp_path / "run" / "summary.md").read_text()

    # --retry-errors redoes the failed generation on resume (and only that)
    cfg = cfg_for(tmp_path, method="plain", limit=4, chunk_size=4, retry_errors=True)
    again = Scripted(respond)
    summary = run_eval(cfg, backend=again, judge=FlakyJudge())
    assert [len(c) for c in again.calls] == [1] and summary["datasets"]["gsm8k"]["generation_errors"] == 0
    assert len(records_of(tmp_path / "run")) == 4


def test_broken_judge_marks_the_chunk(data_env, tmp_path):
    gold = golds(data_env, "gsm8k", 2)

    class Broken:
        name = "broken"

        async def score_many(self, items):
            raise ConnectionError("judge server down")

    summary = run_eval(
        cfg_for(tmp_path, method="plain", limit=2), backend=Scripted(lambda s, u: plain_text(gold[u])), judge=Broken()
    )
    assert all("judge server down" in r.judge_error for r in records_of(tmp_path / "run"))
    assert summary["datasets"]["gsm8k"]["judge_errors"] == 2 and summary["datasets"]["gsm8k"]["accuracy"] is None


@pytest.mark.parametrize("retry_errors", [False, True])
def test_rerun_rejudges_judge_errors(data_env, tmp_path, retry_errors):
    """The judge was down for the first run; the rerun (plain, or --retry-errors) judges those
    samples again, without generating them again, and leaves one record per sample."""
    gold = golds(data_env, "gsm8k", 3)

    class Broken:
        async def score_many(self, items):
            raise ConnectionError("judge server down")

    class Counting:
        def __init__(self):
            self.items = []

        async def score_many(self, items):
            self.items += items
            return [JudgeResult(1.0) for _ in items]

    def respond(system, user):
        return plain_text(gold[user])

    first = run_eval(cfg_for(tmp_path, method="plain", limit=3), backend=Scripted(respond), judge=Broken())
    assert first["datasets"]["gsm8k"]["judge_errors"] == 3
    again, judge = Scripted(respond), Counting()
    summary = run_eval(
        cfg_for(tmp_path, method="plain", limit=3, retry_errors=retry_errors), backend=again, judge=judge
    )
    assert again.calls == []  # nothing regenerated
    assert sorted(i.answer for i in judge.items) == sorted(gold.values())  # every errored sample re-judged
    d = summary["datasets"]["gsm8k"]
    assert (d["judge_errors"], d["n_scored"], d["accuracy"]) == (0, 3, 1.0)
    recs = records_of(tmp_path / "run")
    assert len(recs) == 3 and all(r.acc == 1.0 and r.judge_error is None for r in recs)
    third = Counting()
    run_eval(cfg_for(tmp_path, method="plain", limit=3), backend=Scripted(respond), judge=third)
    assert third.items == []  # judged samples are not judged again


def test_judge_timeout_bounds_a_hanging_judge_and_the_rerun_rejudges(data_env, tmp_path):
    """An LLM judge that hangs: --judge-timeout turns each request into a judge error quickly,
    and the rerun, with the judge back, scores those samples."""
    import time

    from benchmarks.fake_openai_server import FakeOpenAIServer
    from prompts import load_prompt
    from recipe.pasr_config import JudgeConfig

    gold = golds(data_env, "gsm8k", 2)
    hang_first = {answer: ["timeout"] for answer in gold.values()}  # the first request per answer hangs
    with FakeOpenAIServer(template=load_prompt("judge_binary"), faults=hang_first, hang_s=20) as srv:
        judge_cfg = JudgeConfig(kind="openai", base_url=srv.base_url, model=srv.model, timeout_s=0.5, retries=0)
        cfg = cfg_for(tmp_path, method="plain", limit=2, judge=judge_cfg)
        t0 = time.monotonic()
        first = run_eval(cfg, backend=Scripted(lambda s, u: plain_text(gold[u])))
        assert time.monotonic() - t0 < 10
        assert first["datasets"]["gsm8k"]["judge_errors"] == 2
        assert all("timeout" in r.judge_error for r in records_of(cfg.out))
        again = Scripted(lambda s, u: plain_text(gold[u]))
        second = run_eval(cfg, backend=again)
        assert again.calls == [] and srv.requests == 4
        assert second["datasets"]["gsm8k"]["judge_errors"] == 0 and second["datasets"]["gsm8k"]["accuracy"] == 1.0


def test_cli_judge_timeout_flag(data_env, tmp_path, run_cli, monkeypatch):
    import eval.run

    seen = {}

    def fake_run_eval(cfg):
        seen["timeout_s"] = cfg.judge.timeout_s
        raise EvalError("stop here")

    monkeypatch.setattr(eval.run, "run_eval", fake_run_eval)
    rc, _, err = run_cli(
        ["eval", "--model", "m", "--dataset", "gsm8k", "--judge-timeout", "2.5", "--out", str(tmp_path / "o")]
    )
    assert rc == 2 and seen == {"timeout_s": 2.5}
    monkeypatch.undo()
    rc, _, err = run_cli(
        ["eval", "--model", "m", "--dataset", "gsm8k", "--judge-timeout", "0", "--out", str(tmp_path / "o")]
    )
    assert rc == 2 and "--judge-timeout must be > 0" in err and err.count("\n") == 1
