"""`pasr eval`: scoring real rows, Self-Refine, resume, error paths, compare, the vllm path.

Generation is scripted (a tiny backend object) so these run in seconds; the one test that
loads the real model is marked slow.
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

from data.records import iter_records
from eval.backends import BackendError, Completion, GenParams, VLLMBackend, build_backend
from eval.run import EvalConfig, EvalError, run_eval
from eval.self_refine import NO_CHANGE, SelfRefinePrompts, run_self_refine
from rewards.judges.base import JudgeResult


# ----------------------------------------------------------------------------- helpers


class Scripted:
    """A backend that answers each chat with ``respond(system, user)``; tokens = words."""

    name = "scripted"

    def __init__(self, respond, interrupt_on_call: int | None = None, fail_if=None):
        self.respond = respond
        self.interrupt_on_call = interrupt_on_call
        self.fail_if = fail_if
        self.calls: list[list] = []

    def load(self) -> None:
        pass

    def generate(self, chats, params: GenParams, on_finished=None):
        self.calls.append([list(c) for c in chats])
        if self.interrupt_on_call == len(self.calls):
            raise KeyboardInterrupt
        out = []
        for chat in chats:
            system = chat[0]["content"] if chat[0]["role"] == "system" else None
            user = chat[-1]["content"]
            if self.fail_if is not None and self.fail_if(user):
                raise ValueError("prompt too long for the context window")
            text = self.respond(system, user)
            out.append(Completion(text, len(text.split()), "stop"))
        return out


@pytest.fixture
def data_env(shared_data, monkeypatch):
    monkeypatch.setenv("PASR_DATA_DIR", str(shared_data))
    return shared_data


def cfg_for(tmp_path, **kw) -> EvalConfig:
    kw.setdefault("model", "scripted-model")
    kw.setdefault("datasets", ["gsm8k"])
    kw.setdefault("out", str(tmp_path / "run"))
    kw.setdefault("progress", False)
    return EvalConfig(**kw)


def records_of(out) -> list:
    return list(iter_records(Path(out) / "samples.jsonl", strict=True))


def golds(shared_data: Path, name: str, n: int) -> dict[str, str]:
    from data.loaders import load_examples

    return {ex.question: ex.answer for ex in load_examples(name, limit=n)}


def pasr_text(answer: str) -> str:
    return (
        "<think> First attempt: compute it. <refine> The first step was off; redo it carefully. "
        f"</refine> So the result is {answer}. </think> <answer> \\boxed{{{answer}}} </answer>"
    )


def plain_text(answer: str) -> str:
    return f"Step by step we find the result. The final answer is <answer>\\boxed{{{answer}}}</answer>"


WRONG = {"gsm8k": "-12345", "math500": "\\frac{7}{13}", "aime24": "1000"}


# ----------------------------------------------------------------------------- scoring real rows


@pytest.mark.parametrize("dataset", ["gsm8k", "math500", "aime24"])
@pytest.mark.parametrize("method", ["pasr", "plain"])
def test_scoring_on_real_rows(data_env, tmp_path, dataset, method):
    gold = golds(data_env, dataset, 4)
    questions = list(gold)
    right = set(questions[::2])  # alternate correct / incorrect responses
    style = pasr_text if method == "pasr" else plain_text

    def respond(system, user):
        return style(gold[user] if user in right else WRONG[dataset])

    summary = run_eval(cfg_for(tmp_path, datasets=[dataset], method=method, limit=4), backend=Scripted(respond))
    recs = records_of(tmp_path / "run")
    assert len(recs) == 4
    for r in recs:
        assert r.engine == "eval" and r.dataset == dataset and r.step is None
        assert r.gold == gold[r.prompt]
        assert r.acc == (1.0 if r.prompt in right else 0.0), (r.extracted_answer, r.gold)
        assert r.extracted_answer == (gold[r.prompt] if r.prompt in right else WRONG[dataset])
        assert r.variant == ("refine" if method == "pasr" else "plain")
        assert r.format_ok is (method == "pasr")
        assert r.n_refine == (1 if method == "pasr" else 0)
        assert r.response_tokens == len(r.response.split())
    d = summary["datasets"][dataset]
    assert d["accuracy"] == 0.5 and d["n_samples"] == 4 and d["errors"] == 0
    assert d["refine_rate"] == (1.0 if method == "pasr" else 0.0)
    md = (tmp_path / "run" / "summary.md").read_text()
    assert f"| {dataset} | 4 | 4 | 50.0% |" in md


def test_mean_at_k_and_sampling_defaults(data_env, tmp_path):
    assert EvalConfig("m", ["gsm8k"], "o").gen_params().temperature == 0.0
    gp = EvalConfig("m", ["gsm8k"], "o", samples=4).gen_params()
    assert (gp.temperature, gp.top_p) == (0.6, 0.95)
    gold = golds(data_env, "gsm8k", 3)
    seen: dict[str, int] = {}

    def respond(system, user):  # each question: right on its first sample only
        seen[user] = seen.get(user, 0) + 1
        return plain_text(gold[user] if seen[user] == 1 else "0")

    summary = run_eval(cfg_for(tmp_path, method="plain", limit=3, samples=4), backend=Scripted(respond))
    d = summary["datasets"]["gsm8k"]
    assert d["n_samples"] == 12 and d["n_questions"] == 3 and d["accuracy"] == 0.25
    assert sorted({r.sample_index for r in records_of(tmp_path / "run")}) == [0, 1, 2, 3]
    assert "mean@4" in (tmp_path / "run" / "summary.md").read_text()


# ----------------------------------------------------------------------------- self-refine


def scripted_self_refine(no_change_at: dict[str, int | None]):
    """Answers are numbered per question; feedback says NO CHANGE NEEDED at the given round."""
    rounds: dict[str, int] = {}

    def respond(system, user):
        q = next(q for q in no_change_at if q in user)
        if system is not None:  # first answer (plain system prompt)
            return f"first answer to {q} is \\boxed{{1}}"
        if "Review the latest answer" in user:
            rounds[q] = rounds.get(q, 0) + 1
            if no_change_at[q] == rounds[q]:
                return f"All steps check out.\n{NO_CHANGE}"
            return f"step two of {q} is wrong; recompute"
        return f"improved answer {rounds[q]} to {q} is \\boxed{{{rounds[q] + 1}}}"

    return respond


def test_self_refine_stops_and_counts_tokens():
    prompts = SelfRefinePrompts.load()
    plan = {"QA": 1, "QB": None, "QC": 2}
    backend = Scripted(scripted_self_refine(plan))
    traces = run_self_refine(list(plan), lambda chats: backend.generate(chats, GenParams()), prompts)
    a, b, c = traces
    assert [p.name for p in a.passes] == ["answer", "feedback:1"] and a.stop == "no_change"
    assert a.final.name == "answer" and "\\boxed{1}" in a.final.text
    assert [p.name for p in c.passes] == ["answer", "feedback:1", "refine:1", "feedback:2"] and c.stop == "no_change"
    assert c.final.name == "refine:1"
    assert len(b.passes) == 1 + 2 * 4 and b.stop == "max_rounds" and b.rounds == 4
    assert b.final.name == "refine:4" and "\\boxed{5}" in b.final.text
    for t in traces:
        assert t.total_tokens == sum(len(p.text.split()) for p in t.passes)
    # batched across questions: one call per pass kind per round, active questions only
    assert [len(call) for call in backend.calls] == [3, 3, 2, 2, 1, 1, 1, 1, 1]
    # the history of earlier answers and feedback is in the prompt; template braces survive
    fb2 = next(ch[-1]["content"] for ch in backend.calls[3] if "QB" in ch[-1]["content"])
    for part in ("Attempt 1:", "first answer to QB", "Feedback on attempt 1:", "Attempt 2:", "improved answer 1"):
        assert part in fb2
    refine_prompt = backend.calls[2][0][-1]["content"]
    assert "\\boxed{}" in refine_prompt and "Feedback on attempt 1:" in refine_prompt
    assert all(ch[0]["role"] == "user" for call in backend.calls[1:] for ch in call)


def test_self_refine_zero_rounds_is_the_plain_answer():
    backend = Scripted(scripted_self_refine({"QA": None}))
    (t,) = run_self_refine(["QA"], lambda chats: backend.generate(chats, GenParams()), SelfRefinePrompts.load(), 0)
    assert [p.name for p in t.passes] == ["answer"] and len(backend.calls) == 1


def test_self_refine_method_records(data_env, tmp_path):
    gold = golds(data_env, "gsm8k", 2)
    q1, q2 = list(gold)

    def respond(system, user):
        q = q1 if q1 in user else q2
        if system is not None:
            return "I think it is \\boxed{0}"
        if "Review the latest answer" in user:
            return f"Fine.\n{NO_CHANGE}" if ("Attempt 2:" in user or q == q1) else "Wrong total."
        return f"Corrected: \\boxed{{{gold[q]}}}"

    summary = run_eval(cfg_for(tmp_path, method="self-refine", limit=2), backend=Scripted(respond))
    recs = {r.prompt: r for r in records_of(tmp_path / "run")}
    r1, r2 = recs[q1], recs[q2]
    assert r1.variant == "self_refine:answer" and r1.acc == 0.0 and r1.extra["stop"] == "no_change"
    assert r2.variant == "self_refine:refine:1" and r2.acc == 1.0 and r2.extra["rounds"] == 2
    assert [p["variant"] for p in r2.extra["passes"]] == [
        "self_refine:answer", "self_refine:feedback:1", "self_refine:refine:1", "self_refine:feedback:2",
    ]  # fmt: skip
    assert r2.response_tokens == sum(p["tokens"] for p in r2.extra["passes"]) > r2.extra["final_tokens"]
    assert summary["datasets"]["gsm8k"]["accuracy"] == 0.5


# ----------------------------------------------------------------------------- resume


def test_resume_after_interrupt(data_env, tmp_path):
    gold = golds(data_env, "gsm8k", 5)

    def respond(system, user):
        return plain_text(gold[user])

    cfg = cfg_for(tmp_path, method="plain", limit=5, samples=2, temperature=0.7, chunk_size=4)
    with pytest.raises(KeyboardInterrupt):
        run_eval(cfg, backend=Scripted(respond, interrupt_on_call=2))
    first = records_of(cfg.out)
    assert len(first) == 4  # the first chunk was written before the interrupt
    partial = json.loads((Path(cfg.out) / "summary.json").read_text())
    assert partial["complete"] is False and "Partial" in (Path(cfg.out) / "summary.md").read_text()
    # a half-written line from a kill mid-write is dropped, not glued to the next record
    with (Path(cfg.out) / "samples.jsonl").open("a") as fh:
        fh.write('{"run_id": "eval-run", "query_id": "gs')

    again = Scripted(respond)
    summary = run_eval(cfg, backend=again)
    assert sum(len(c) for c in again.calls) == 10 - 4  # only the missing samples
    recs = records_of(cfg.out)
    keys = [(r.dataset, r.query_id, r.sample_index) for r in recs]
    assert len(keys) == len(set(keys)) == 10
    assert {(q, k) for _, q, k in keys} == {(f"gsm8k:test:{i}", k) for i in range(5) for k in range(2)}
    assert summary["complete"] is True and summary["datasets"]["gsm8k"]["accuracy"] == 1.0

    # done: a third run generates nothing; a larger --limit extends the run
    third = Scripted(respond)
    run_eval(cfg, backend=third)
    assert third.calls == []
    cfg.limit = 6
    gold.update(golds(data_env, "gsm8k", 6))
    fourth = Scripted(respond)
    assert run_eval(cfg, backend=fourth)["datasets"]["gsm8k"]["n_samples"] == 12
    assert sum(len(c) for c in fourth.calls) == 2


def test_resume_refuses_other_settings(data_env, tmp_path):
    gold = golds(data_env, "gsm8k", 2)
    cfg = cfg_for(tmp_path, method="plain", limit=2)
    run_eval(cfg, backend=Scripted(lambda s, u: plain_text(gold[u])))
    cfg.method, cfg.max_new_tokens = "pasr", 64
    with pytest.raises(EvalError) as err:
        run_eval(cfg, backend=Scripted(lambda s, u: pasr_text(gold[u])))
    msg = str(err.value)
    assert "other settings" in msg and "method" in msg and "max_new_tokens" in msg and "\n" not in msg


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--model", "m", "--dataset", "nosuchset"], "unknown dataset 'nosuchset'"),
        (["--model", "m", "--dataset", "gsm8k", "--method", "magic"], "unknown method 'magic'"),
        (["--model", "m", "--dataset", "missing/file.jsonl"], "data file not found"),
        (["--model", "./no/such/model", "--dataset", "gsm8k", "--backend", "hf"], "model path does not exist"),
        (["--model", "ckpts/run1/step_10", "--dataset", "gsm8k", "--backend", "hf"], "model path does not exist"),
        (["--dataset", "gsm8k"], "--model is required"),
        (["--model", "m", "--dataset", "gsm8k", "--judge", "openai"], "needs --judge-base-url and --judge-model"),
    ],
)
def test_cli_errors_are_one_line(data_env, tmp_path, run_cli, argv, needle):
    rc, out, err = run_cli(["eval", *argv, "--limit", "1", "--out", str(tmp_path / "o"), "--progress", "off"])
    assert rc == 2
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "o" / "run.json").exists()


def test_vllm_missing_is_one_line(data_env, tmp_path, run_cli, monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm -> ImportError
    argv = ["eval", "--model", "m", "--dataset", "gsm8k", "--backend", "vllm", "--limit", "1", "--out", str(tmp_path / "o")]
    rc, _, err = run_cli(argv)
    assert rc == 2 and "vllm backend needs the vllm package" in err and err.count("\n") == 1


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

    summary = run_eval(cfg_for(tmp_path, method="plain", limit=2), backend=Scripted(lambda s, u: plain_text(gold[u])), judge=Broken())
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
    summary = run_eval(cfg_for(tmp_path, method="plain", limit=3, retry_errors=retry_errors), backend=again, judge=judge)
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
    rc, _, err = run_cli(["eval", "--model", "m", "--dataset", "gsm8k", "--judge-timeout", "2.5", "--out", str(tmp_path / "o")])
    assert rc == 2 and seen == {"timeout_s": 2.5}
    monkeypatch.undo()
    rc, _, err = run_cli(["eval", "--model", "m", "--dataset", "gsm8k", "--judge-timeout", "0", "--out", str(tmp_path / "o")])
    assert rc == 2 and "--judge-timeout must be > 0" in err and err.count("\n") == 1


def test_second_run_into_the_same_out_is_refused(data_env, tmp_path):
    """Two runs appending to one samples.jsonl would each write every sample: the directory is
    locked for the length of a run, and a killed holder leaves no stale lock behind."""
    import subprocess

    gold = golds(data_env, "gsm8k", 2)
    out = tmp_path / "run"
    out.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from eval.resume import RunDir; RunDir(sys.argv[1]).lock(); "
         "print('locked', flush=True); time.sleep(120)", str(out)],
        cwd=Path(__file__).resolve().parents[1], stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(EvalError) as err:
            run_eval(cfg_for(tmp_path, method="plain", limit=2), backend=Scripted(lambda s, u: plain_text(gold[u])))
        assert f"in use by another pasr eval (pid {holder.pid})" in str(err.value) and "\n" not in str(err.value)
        assert not (out / "samples.jsonl").exists()
    finally:
        holder.kill()
        holder.wait()
    run_eval(cfg_for(tmp_path, method="plain", limit=2), backend=Scripted(lambda s, u: plain_text(gold[u])))
    assert len(records_of(out)) == 2


def test_out_under_a_file_names_the_file(data_env, tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(EvalError, match=r"cannot create --out .*: .*/f is a file, not a directory"):
        run_eval(cfg_for(tmp_path, method="plain", limit=1, out=str(tmp_path / "f" / "run")), backend=Scripted(lambda s, u: "x"))


def test_dataset_file_errors_are_one_line(tmp_path, run_cli):
    latin1 = tmp_path / "latin1.jsonl"
    latin1.write_bytes(b'{"question": "caf\xe9?", "answer": "4"}\n')
    evol = tmp_path / "evol.jsonl"
    evol.write_text(json.dumps({"instruction": "2+2?", "output": "4"}) + "\n")
    for path, needle in ((latin1, "latin1.jsonl:1: not UTF-8 text"), (evol, "pasr data preview --dataset")):
        rc, _, err = run_cli(["eval", "--model", "m", "--dataset", str(path), "--out", str(tmp_path / "o")])
        assert rc == 2 and needle in err and err.count("\n") == 1 and "Traceback" not in err, err
        assert "map them with" not in err  # no eval flag that does not exist


# ----------------------------------------------------------------------------- compare


def test_compare_table_and_png(data_env, tmp_path, run_cli):
    gold = golds(data_env, "gsm8k", 2)
    gold.update(golds(data_env, "aime24", 2))
    dirs = []
    for method, style in (("plain", plain_text), ("pasr", pasr_text)):
        out = tmp_path / method
        run_eval(
            cfg_for(tmp_path, method=method, datasets=["gsm8k", "aime24"], limit=2, out=str(out)),
            backend=Scripted(lambda s, u, style=style: style(gold[u])),
        )
        dirs.append(str(out))
    png = tmp_path / "cmp" / "eval_compare.png"
    rc, out, err = run_cli(["eval", "compare", *dirs, "--out", str(tmp_path / "cmp")])
    assert rc == 0 and err == "", err
    lines = [ln for ln in out.splitlines() if ln.startswith("|")]
    assert "gsm8k acc %" in lines[0] and "aime24 tokens" in lines[0]
    assert any("| plain " in ln and "100.0" in ln for ln in lines) and any("| pasr " in ln for ln in lines)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000


def test_compare_missing_dir(tmp_path, run_cli):
    rc, _, err = run_cli(["eval", "compare", str(tmp_path / "nope")])
    assert rc == 2 and "no summary.json" in err and err.count("\n") == 1


def test_parser_takes_run_and_compare():
    from pasr_cli import build_parser

    p = build_parser()
    a = p.parse_args(["eval", "--model", "m", "--dataset", "gsm8k", "math500", "aime24", "--method", "plain", "--out", "d"])
    assert a.eval_command is None and a.datasets == ["gsm8k", "math500", "aime24"] and a.out == "d"
    b = p.parse_args(["eval", "compare", "d1", "d2", "--out", "x"])
    assert b.eval_command == "compare" and b.dirs == ["d1", "d2"] and b.compare_out == "x"
    help_text = p._subparsers._group_actions[0].choices["eval"].format_help()
    assert "pasr eval compare DIR" in help_text and "--samples" in help_text and "self-refine" in help_text


# ----------------------------------------------------------------------------- backends


def fake_vllm(monkeypatch, outputs_for):
    mod = types.ModuleType("vllm")
    created = {}

    class SamplingParams:
        def __init__(self, **kw):
            self.kw = kw

    class LLM:
        def __init__(self, **kw):
            created.update(kw)
            self.calls = []

        def chat(self, messages, sampling_params, use_tqdm=True):
            self.calls.append((messages, sampling_params.kw))
            return [
                types.SimpleNamespace(outputs=[types.SimpleNamespace(text=t, token_ids=ids, finish_reason=fr)])
                for t, ids, fr in (outputs_for(m) for m in messages)
            ]

    mod.LLM, mod.SamplingParams = LLM, SamplingParams
    monkeypatch.setitem(sys.modules, "vllm", mod)
    return created


def test_vllm_backend_with_fake_engine(data_env, tmp_path, monkeypatch):
    model_dir = tmp_path / "ckpt"
    model_dir.mkdir()
    (model_dir / "config.json").write_text("{}")
    gold = golds(data_env, "gsm8k", 3)
    created = fake_vllm(monkeypatch, lambda m: (pasr_text(gold[m[-1]["content"]]), [5] * 17 + [2], "stop"))
    backend = build_backend("vllm", str(model_dir), seed=3, max_model_len=4096, batch_size=99)
    assert isinstance(backend, VLLMBackend)
    summary = run_eval(
        cfg_for(tmp_path, model=str(model_dir), method="pasr", backend="vllm", limit=3, max_new_tokens=99), backend=backend
    )
    assert created["model"] == str(model_dir) and created["seed"] == 3 and created["max_model_len"] == 4096
    (messages, sp), = backend.llm.calls
    assert len(messages) == 3 and messages[0][0]["role"] == "system" and "<refine>" in messages[0][0]["content"]
    assert sp == {"n": 1, "max_tokens": 99, "temperature": 0.0, "top_p": 1.0}
    recs = records_of(tmp_path / "run")
    assert all(r.response_tokens == 18 and r.finish_reason == "stop" and r.acc == 1.0 for r in recs)
    assert summary["datasets"]["gsm8k"]["mean_tokens"] == 18.0

    sampled = backend.sampling_params(GenParams(max_new_tokens=10, temperature=0.6, top_p=0.95))
    assert sampled.kw == {"n": 1, "max_tokens": 10, "temperature": 0.6, "top_p": 0.95}


@pytest.mark.parametrize("weights_mb, asked, eager", [(270, None, True), (2100, None, False), (270, False, False),
                                                      (2100, True, True), (0, None, False)])
def test_vllm_eager_for_small_models_unless_asked(tmp_path, monkeypatch, weights_mb, asked, eager):
    """auto (None) skips CUDA graphs and torch.compile for weights under 2 GiB; on/off is obeyed;
    a folder with no weight file to size keeps vLLM's default."""
    model_dir = tmp_path / "m"
    model_dir.mkdir()
    (model_dir / "config.json").write_text("{}")
    if weights_mb:
        with open(model_dir / "model.safetensors", "wb") as f:
            f.truncate(weights_mb * 1024 * 1024)  # sparse: sized, not written
    created = fake_vllm(monkeypatch, lambda m: ("", [], "stop"))
    build_backend("vllm", str(model_dir), enforce_eager=asked).load()
    assert created["enforce_eager"] is eager


def test_eval_cli_enforce_eager_flag():
    import argparse

    from eval.cli import build_parser

    parser = argparse.ArgumentParser()
    build_parser(parser)
    assert parser.parse_args(["--model", "m", "--dataset", "gsm8k"]).enforce_eager == "auto"
    assert parser.parse_args(["--model", "m", "--dataset", "gsm8k", "--enforce-eager", "on"]).enforce_eager == "on"


def test_vllm_backend_missing_model(tmp_path, monkeypatch):
    fake_vllm(monkeypatch, lambda m: ("", [], "stop"))
    with pytest.raises(BackendError, match="model path does not exist"):
        VLLMBackend(str(tmp_path / "nope")).load()


def test_build_backend_rejects_unknown():
    with pytest.raises(BackendError, match="unknown backend"):
        build_backend("tpu", "m")


@pytest.mark.parametrize("broken", ["no_weights", "bad_config", "truncated_weights"])
def test_hf_backend_unloadable_model_is_one_line(broken_model_dirs, broken):
    """A truncated weights file raised safetensors' own error type, past the OSError handler."""
    from eval.backends import HFBackend

    path = broken_model_dirs[broken]
    with pytest.raises(BackendError, match=f"^cannot load model '{path}': ") as exc:
        HFBackend(str(path), dtype="float32", device="cpu", threads=1).load()
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--temperature", "nan"], "argument --temperature: not a finite number: 'nan'"),
        (["--temperature", "inf"], "argument --temperature: not a finite number: 'inf'"),
        (["--top-p", "nan"], "argument --top-p: not a finite number: 'nan'"),
        (["--judge-timeout", "inf"], "argument --judge-timeout: not a finite number: 'inf'"),
        (["--gpu-memory-utilization=-inf"], "argument --gpu-memory-utilization: not a finite number: '-inf'"),
        (["--threads", "-1"], "argument --threads: must be >= 0 (0: torch's choice), got -1"),
    ],
)
def test_cli_bad_numbers_are_usage_errors(tmp_path, capsys, monkeypatch, argv, needle, run_cli):
    """--temperature nan ran to the end and wrote NaN into summary.json; --threads -1 died in
    torch.set_num_threads with a traceback. Both are argparse errors now, before any work."""
    import eval.run

    seen = []

    def fake_run_eval(cfg):
        seen.append(cfg)
        raise EvalError("stop here")

    monkeypatch.setattr(eval.run, "run_eval", fake_run_eval)
    base = ["eval", "--model", "m", "--dataset", "gsm8k", "--out", str(tmp_path / "o")]
    with pytest.raises(SystemExit) as exc:
        run_cli([*base, *argv])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and needle in err and "Traceback" not in err, err
    assert not seen
    rc, _, _ = run_cli([*base, "--temperature", "0.7", "--threads", "0"])  # finite, and 0 threads: accepted
    assert rc == 2 and seen[0].temperature == 0.7 and seen[0].threads == 0


@pytest.mark.slow
def test_hf_backend_smollm2_end_to_end(data_env, tmp_path, run_cli):
    out = tmp_path / "smol"
    argv = ["eval", "--model", "smollm2", "--dataset", "gsm8k", "--method", "pasr", "--backend", "hf",
            "--limit", "2", "--max-new-tokens", "16", "--threads", "1", "--progress", "off", "--out", str(out)]  # fmt: skip
    rc, stdout, err = run_cli(argv)
    assert rc == 0, err
    recs = records_of(out)
    assert len(recs) == 2 and all(0 < r.response_tokens <= 16 and r.acc is not None for r in recs)
    assert "| gsm8k | 2 | 2 |" in stdout


@pytest.mark.parametrize("q_len", [1, 5])
def test_grouped_attention_matches_sdpa(q_len):
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from runtime.gqa_attention import grouped_sdpa_forward

    torch.manual_seed(0)
    b, kv_heads, n_rep, length, d = 3, 2, 3, 9, 8
    module = types.SimpleNamespace(num_key_value_groups=n_rep, is_causal=True)
    query = torch.randn(b, kv_heads * n_rep, q_len, d)
    key, value = torch.randn(b, kv_heads, length, d), torch.randn(b, kv_heads, length, d)
    # left padding (row 1 has 3 pad slots, row 2 has 1) plus causality over the last q_len positions
    pad = torch.tensor([0, 3, 1])
    kv_pos = torch.arange(length)
    q_pos = torch.arange(length - q_len, length)
    mask = (kv_pos[None, None, :] >= pad[:, None, None]) & (kv_pos[None, None, :] <= q_pos[None, :, None])
    mask = mask[:, None]  # [b, 1, q, length]
    ref, _ = sdpa_attention_forward(module, query, key, value, mask, scaling=d**-0.5)
    out, _ = grouped_sdpa_forward(module, query, key, value, mask, scaling=d**-0.5)
    assert out.shape == ref.shape == (b, q_len, kv_heads * n_rep, d)
    assert torch.allclose(out, ref, atol=1e-5)
    # no mask: the standard path
    ref, _ = sdpa_attention_forward(module, query, key, value, None, scaling=d**-0.5)
    out, _ = grouped_sdpa_forward(module, query, key, value, None, scaling=d**-0.5)
    assert torch.allclose(out, ref, atol=1e-6)


@pytest.mark.slow
def test_hf_grouped_attention_same_greedy_text(data_env):
    from data.loaders import load_examples
    from eval.backends import HFBackend
    from prompts import PromptSet

    chats = [PromptSet.load().plain_chat(ex.question) for ex in load_examples("gsm8k", limit=3)]
    params = GenParams(max_new_tokens=12, temperature=0.0)
    grouped = HFBackend("smollm2", batch_size=3, threads=1)
    grouped.load()
    assert grouped.model.config._attn_implementation == "pasr_sdpa_grouped"
    stock = HFBackend("smollm2", batch_size=3, threads=1, attention="sdpa")
    stock.load()
    a, b = grouped.generate(chats, params), stock.generate(chats, params)
    assert [(x.text, x.n_tokens) for x in a] == [(y.text, y.n_tokens) for y in b]


def test_fallback_last_number(data_env, tmp_path):
    gold = golds(data_env, "gsm8k", 2)

    def respond(system, user):
        return f"So the total is {gold[user]} dollars."

    s0 = run_eval(cfg_for(tmp_path, method="plain", limit=2, out=str(tmp_path / "a")), backend=Scripted(respond))
    s1 = run_eval(
        cfg_for(tmp_path, method="plain", limit=2, out=str(tmp_path / "b"), fallback_last_number=True),
        backend=Scripted(respond),
    )
    assert s0["datasets"]["gsm8k"]["accuracy"] == 0.0 and s1["datasets"]["gsm8k"]["accuracy"] == 1.0
    assert s1["settings"]["fallback_last_number"] is True


def test_progress_moves_as_sequences_finish_and_never_runs_ahead_of_the_chunk():
    """pasr eval's bar ticks per finished sequence inside a chunk, holds one short of the
    chunk's end until the chunk is recorded, then lands on it exactly."""
    import io

    from tqdm import tqdm

    from eval.run import _ChunkTicks

    bar = tqdm(total=10, file=io.StringIO())
    ticks = _ChunkTicks(bar)
    ticks.start(4)
    ticks.tick(1)
    ticks.tick(2)
    assert bar.n == 3
    ticks.tick(5)  # a later pass (self-refine) finishing more sequences than the chunk has samples
    assert bar.n == 3
    ticks.finish()
    assert bar.n == 4
    ticks.start(6)
    ticks.finish()  # a backend that never ticks
    assert bar.n == 10
