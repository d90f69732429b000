"""`pasr eval --method reflect-retry` (issue 14): the Reflect, Retry, Reward evaluation.

A failed first attempt gets exactly one reflection and one retry, and the retry is scored; a
success or an attempt the judge could not score gets neither. Generation is scripted (no
model) and judged by the real Countdown verifier, or the rule judge on GSM8K; the one test that
loads the real model is marked slow.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from data.loaders import load_examples
from data.records import ATTEMPT, REFLECTION, RETRY
from eval.backends import Completion, GenParams
from eval.reflect_retry import RrrPass, run_reflect_retry, undecided
from eval.run import EvalConfig, EvalError, load_datasets, run_eval
from recipe.rrr_config import RrrConfig
from rewards.judges.base import JudgeResult
from tests import scripted_eval
from tests.scripted_eval import records_of

PROMPTS = RrrConfig().load_prompts()
N = 4  # Countdown questions in most tests


# ----------------------------------------------------------------------------- helpers


class Scripted:
    """A backend answering each chat with ``respond(pass, question, chat)``; tokens = words.
    Records every call with the pass kinds and the max_new_tokens it was given."""

    name = "scripted"

    def __init__(self, respond, interrupt_on_call: int | None = None):
        self.respond = respond
        self.interrupt_on_call = interrupt_on_call
        self.calls: list[tuple[list[str], int]] = []
        self.chats: list[list[dict]] = []

    def load(self) -> None:
        pass

    def generate(self, chats, params: GenParams, on_finished=None):
        kinds = [pass_of(c) for c in chats]
        self.calls.append((kinds, params.max_new_tokens))
        self.chats += [list(c) for c in chats]
        if self.interrupt_on_call == len(self.calls):
            raise KeyboardInterrupt
        out = []
        for chat, kind in zip(chats, kinds):
            text = self.respond(kind, question_of(chat), chat)
            out.append(Completion(text, len(text.split()), "stop"))
        return out

    def kinds(self) -> list[str]:
        return [k for ks, _ in self.calls for k in ks]


def pass_of(chat) -> str:
    user = chat[-1]["content"]
    if chat[0]["role"] != "system":
        return REFLECTION
    return RETRY if "Your reflection:" in user else ATTEMPT


def question_of(chat) -> str:
    user = chat[-1]["content"]
    if "Problem:\n" in user:
        return user.split("Problem:\n", 1)[1].split("\n\nYour attempt:", 1)[0]
    return user


def countdown(n: int = N) -> dict[str, object]:
    """The held-out Countdown problems ``pasr eval --dataset countdown`` evaluates, by question."""
    return {ex.question: ex for ex in load_datasets(["countdown"], n)["countdown"]}


def answer(eq: str) -> str:
    return f"Let me combine the numbers. <answer>{eq}</answer>"


def cfg_for(tmp_path, **kw) -> EvalConfig:
    """The shared scripted-eval config, on Countdown with the reflect-retry method."""
    return scripted_eval.cfg_for(tmp_path, **{"datasets": ["countdown"], "method": "reflect-retry", **kw})


def script(right_first: set[str], right_retry: set[str], n: int = N):
    """Attempts right for ``right_first``; retries right for ``right_retry``; else a wrong sum."""
    problems = countdown(n)

    def respond(kind, question, chat):
        ex = problems[question]
        if kind == REFLECTION:
            return "I added the wrong numbers. Next time I will check the target."
        right = question in (right_first if kind == ATTEMPT else right_retry)
        return answer(ex.extra["solution"] if right else "1 + 1")

    return respond


class Counting:
    """The Countdown verifier, counting what it is asked; fails on answers in ``fail``."""

    name = "counting"

    def __init__(self, fail: set[str] = frozenset()):
        from rewards.judges.countdown_judge import CountdownJudge

        self.inner, self.fail, self.items = CountdownJudge(), set(fail), []

    async def score_many(self, items):
        self.items += items
        return [
            JudgeResult.failed("judge timeout") if i.answer in self.fail else self.inner.score_one(i.gold, i.answer)
            for i in items
        ]


# ----------------------------------------------------------------------------- the exchange


class Out:
    def __init__(self, text: str, n: int):
        self.text, self.n_tokens, self.finish_reason = text, n, "stop"


def test_failures_get_one_reflection_and_retry_successes_none():
    """Batched: one call for the attempts, one verifier call, one for the failures' reflections
    (with their own token limit) and one for their retries; tokens summed over passes."""
    calls = []

    def generate(chats, max_new_tokens=None):
        kinds = [pass_of(c) for c in chats]
        calls.append((kinds, max_new_tokens))
        texts = {ATTEMPT: "a1 a2 a3", REFLECTION: "r1 r2", RETRY: "t1 t2 t3 t4"}
        return [Out(texts[k], len(texts[k].split())) for k in kinds]

    verdicts = {"q0": (1.0, None), "q1": (0.0, None), "q2": (None, "judge timeout"), "q3": (0.0, None)}
    verified = []

    def verify(indices, texts):
        verified.append(list(indices))
        return [verdicts[f"q{i}"] for i in indices]

    traces = run_reflect_retry(["q0", "q1", "q2", "q3"], generate, verify, PROMPTS, reflection_tokens=7)
    assert calls == [([ATTEMPT] * 4, None), ([REFLECTION] * 2, 7), ([RETRY] * 2, None)]
    assert verified == [[0, 1, 2, 3]]
    by_q = {t.question: t for t in traces}
    assert (
        [p.variant for p in by_q["q1"].passes] == [ATTEMPT, REFLECTION, RETRY] == [p.variant for p in by_q["q3"].passes]
    )
    assert (
        by_q["q1"].final.variant == RETRY and by_q["q1"].total_tokens == 3 + 2 + 4 and by_q["q1"].final_verdict is None
    )
    for q in ("q0", "q2"):  # a success, and an attempt the judge could not score: no retry
        assert [p.variant for p in by_q[q].passes] == [ATTEMPT] and by_q[q].total_tokens == 3
        assert by_q[q].final_verdict == verdicts[q]
    assert by_q["q0"].meta() == {"retried": False, "first_acc": 1.0, "first_correct": True, "final_tokens": 3}
    assert by_q["q2"].meta()["first_acc"] is None and by_q["q2"].meta()["first_correct"] is None
    assert by_q["q1"].meta() == {"retried": True, "first_acc": 0.0, "first_correct": False, "final_tokens": 4}


def test_retry_chat_carries_the_attempt_feedback_and_reflection():
    seen = {}

    def generate(chats, max_new_tokens=None):
        for c in chats:
            seen[pass_of(c)] = c
        texts = {ATTEMPT: "<answer>1 + 1</answer>", REFLECTION: "Use the big number.", RETRY: "x"}
        return [Out(texts[pass_of(c)], 1) for c in chats]

    run_reflect_retry(["Reach 46 with 4, 8, 14."], generate, lambda i, t: [(0.0, None)], PROMPTS)
    assert seen[ATTEMPT] == PROMPTS.attempt_chat("Reach 46 with 4, 8, 14.")
    assert seen[REFLECTION] == PROMPTS.reflection_chat("Reach 46 with 4, 8, 14.", "<answer>1 + 1</answer>")
    assert seen[RETRY] == PROMPTS.retry_chat("Reach 46 with 4, 8, 14.", "<answer>1 + 1</answer>", "Use the big number.")
    assert PROMPTS.feedback in seen[REFLECTION][-1]["content"]


def test_kept_attempts_are_not_generated_again():
    calls = []

    def generate(chats, max_new_tokens=None):
        calls.append([pass_of(c) for c in chats])
        return [Out("y", 1) for _ in chats]

    kept = RrrPass(ATTEMPT, "<answer>1 + 1</answer>", 5)
    traces = run_reflect_retry(
        ["q0", "q1"], generate, lambda i, t: [(0.0, None)] * len(t), PROMPTS, attempts=[kept, None]
    )
    assert calls == [[ATTEMPT], [REFLECTION, REFLECTION], [RETRY, RETRY]]
    assert traces[0].attempt == kept and traces[0].total_tokens == 5 + 1 + 1


# ----------------------------------------------------------------------------- pasr eval on Countdown


def test_countdown_run_records_and_summary(tmp_path):
    problems = list(countdown())
    right_first, right_retry = {problems[0]}, {problems[1], problems[2]}  # problems[3] stays wrong
    backend, judge = Scripted(script(right_first, right_retry)), Counting()
    summary = run_eval(cfg_for(tmp_path, limit=N, max_reflection_tokens=9), backend=backend, judge=judge)

    assert [ks for ks, _ in backend.calls] == [[ATTEMPT] * 4, [REFLECTION] * 3, [RETRY] * 3]  # batched per pass
    assert [n for _, n in backend.calls] == [1500, 9, 1500]
    assert len(judge.items) == 4 + 3  # each attempt once, each retry once: a final attempt is not judged again
    recs = {r.prompt: r for r in records_of(tmp_path / "run")}
    first = recs[problems[0]]
    assert (first.variant, first.acc, first.extra["retried"], first.extra["first_correct"]) == (
        ATTEMPT,
        1.0,
        False,
        True,
    )
    assert [p["variant"] for p in first.extra["passes"]] == [ATTEMPT]
    for q, acc in ((problems[1], 1.0), (problems[2], 1.0), (problems[3], 0.0)):
        r = recs[q]
        assert (r.variant, r.acc, r.extra["retried"], r.extra["first_acc"]) == (RETRY, acc, True, 0.0)
        assert [p["variant"] for p in r.extra["passes"]] == [ATTEMPT, REFLECTION, RETRY]
        assert r.response_tokens == sum(p["tokens"] for p in r.extra["passes"]) > r.extra["final_tokens"]
        assert r.extra["method"] == "reflect-retry" and r.gold == countdown()[q].answer
    d = summary["datasets"]["countdown"]
    assert d["accuracy"] == 0.75 and d["first_attempt_accuracy"] == 0.25
    assert (d["retry_rate"], d["n_retried"], d["n_recovered"], d["recovered_rate"]) == (0.75, 3, 2, 2 / 3)
    assert summary["settings"]["judge"]["kind"] == "countdown"  # --judge auto picked the verifier
    assert summary["settings"]["max_reflection_tokens"] == 9
    assert summary["settings"]["prompts"] == PROMPTS.version()
    md = (tmp_path / "run" / "summary.md").read_text()
    assert "| accuracy | first-attempt accuracy | retried | recovered |" in md
    assert "| countdown | 4 | 4 | 75.0% | 25.0% | 75.0% | 66.7% |" in md
    assert "summed over the attempt, reflection and retry" in md


def test_gsm8k_with_the_rule_judge(shared_data, monkeypatch, tmp_path):
    monkeypatch.setenv("PASR_DATA_DIR", str(shared_data))
    gold = {ex.question: ex.answer for ex in load_examples("gsm8k", limit=2)}
    q0, q1 = list(gold)

    def respond(kind, question, chat):
        if kind == REFLECTION:
            return "I misread the question."
        return f"<answer>\\boxed{{{gold[question] if (question == q0 or kind == RETRY) else '-12345'}}}</answer>"

    summary = run_eval(cfg_for(tmp_path, datasets=["gsm8k"], limit=2), backend=Scripted(respond))
    assert summary["settings"]["judge"]["kind"] == "rule"
    d = summary["datasets"]["gsm8k"]
    assert (d["accuracy"], d["first_attempt_accuracy"], d["n_retried"], d["n_recovered"]) == (1.0, 0.5, 1, 1)


def test_judge_error_on_the_first_attempt_is_not_retried_and_not_a_zero(tmp_path):
    problems = countdown()
    q = list(problems)
    bad = problems[q[1]].extra["solution"]  # the judge fails on this answer (an LLM judge timing out, say)
    backend = Scripted(script({q[0], q[1]}, set()))
    summary = run_eval(cfg_for(tmp_path, limit=N), backend=backend, judge=Counting(fail={bad}))
    recs = {r.prompt: r for r in records_of(tmp_path / "run")}
    err = recs[q[1]]
    assert (err.variant, err.acc, err.judge_error, err.extra["retried"]) == (ATTEMPT, None, "judge timeout", False)
    assert [p["variant"] for p in err.extra["passes"]] == [ATTEMPT] and undecided(err)
    assert backend.kinds().count(REFLECTION) == 2  # q2 and q3 only
    d = summary["datasets"]["countdown"]
    assert (d["judge_errors"], d["n_scored"], d["accuracy"]) == (1, 3, 1 / 3)
    assert d["first_attempt_accuracy"] == 1 / 3 and d["retry_rate"] == 2 / 3  # over the 3 scored first attempts

    # the judge is back and says the kept attempt was right: nothing is generated
    again, judge = Scripted(script(set(), set())), Counting()
    summary = run_eval(cfg_for(tmp_path, limit=N), backend=again, judge=judge)
    assert again.calls == [] and [i.answer for i in judge.items] == [bad]
    recs = records_of(tmp_path / "run")
    assert len(recs) == N  # one record per sample again
    assert summary["datasets"]["countdown"]["judge_errors"] == 0
    assert summary["datasets"]["countdown"]["first_attempt_accuracy"] == 0.5


def test_rerun_finishes_an_undecided_sample_from_its_kept_attempt(tmp_path):
    """The first attempt's judge failed; on the rerun it is judged a failure, so it gets its
    reflection and retry now, from the attempt already generated (never a 0 without a retry)."""
    problems = countdown(2)
    q = list(problems)
    wrong = "1 + 1"
    run_eval(cfg_for(tmp_path, limit=2), backend=Scripted(script({q[0]}, set())), judge=Counting(fail={wrong}))
    assert {r.prompt: r for r in records_of(tmp_path / "run")}[q[1]].judge_error == "judge timeout"

    again = Scripted(script(set(), {q[1]}))
    summary = run_eval(cfg_for(tmp_path, limit=2), backend=again, judge=Counting())
    assert [ks for ks, _ in again.calls] == [[REFLECTION], [RETRY]]  # no attempt generated again
    recs = {r.prompt: r for r in records_of(tmp_path / "run")}
    assert len(recs) == 2 and len(records_of(tmp_path / "run")) == 2
    r = recs[q[1]]
    assert (r.variant, r.acc, r.extra["retried"], r.extra["first_acc"]) == (RETRY, 1.0, True, 0.0)
    assert [p["variant"] for p in r.extra["passes"]] == [ATTEMPT, REFLECTION, RETRY]
    assert summary["datasets"]["countdown"]["accuracy"] == 1.0


def test_judge_error_on_the_retry_is_rejudged_without_generating(tmp_path):
    problems = countdown(2)
    q = list(problems)
    retry_answer = problems[q[1]].extra["solution"]
    run_eval(cfg_for(tmp_path, limit=2), backend=Scripted(script({q[0]}, {q[1]})), judge=Counting(fail={retry_answer}))
    r = {r.prompt: r for r in records_of(tmp_path / "run")}[q[1]]
    assert (r.variant, r.acc, r.extra["retried"]) == (RETRY, None, True) and not undecided(r)
    again, judge = Scripted(script(set(), set())), Counting()
    summary = run_eval(cfg_for(tmp_path, limit=2), backend=again, judge=judge)
    assert again.calls == [] and [i.answer for i in judge.items] == [retry_answer]
    assert summary["datasets"]["countdown"]["accuracy"] == 1.0 and summary["datasets"]["countdown"]["judge_errors"] == 0


def test_resume_after_interrupt(tmp_path):
    problems = list(countdown(6))
    respond = script(set(problems[::2]), set(problems), n=6)
    cfg = cfg_for(tmp_path, limit=6, chunk_size=3)
    first = Scripted(respond, interrupt_on_call=5)
    with pytest.raises(KeyboardInterrupt):
        run_eval(cfg, backend=first)
    assert first.calls[-1][0][0] == REFLECTION  # the second chunk was interrupted in its reflections
    assert len(records_of(cfg.out)) == 3
    assert json.loads((Path(cfg.out) / "summary.json").read_text())["complete"] is False

    again = Scripted(respond)
    summary = run_eval(cfg, backend=again)
    assert again.kinds().count(ATTEMPT) == 3  # only the missing chunk
    recs = records_of(cfg.out)
    assert len({(r.query_id, r.sample_index) for r in recs}) == len(recs) == 6
    d = summary["datasets"]["countdown"]
    assert summary["complete"] and d["accuracy"] == 1.0 and d["first_attempt_accuracy"] == 0.5 and d["n_retried"] == 3
    third = Scripted(respond)
    run_eval(cfg, backend=third)
    assert third.calls == []


def test_settings_of_the_method_are_the_resume_fingerprint(tmp_path):
    run_eval(cfg_for(tmp_path, limit=1), backend=Scripted(script(set(), set())))
    with pytest.raises(EvalError, match="max_reflection_tokens"):
        run_eval(cfg_for(tmp_path, limit=1, max_reflection_tokens=32), backend=Scripted(script(set(), set())))


def test_prompt_overrides(tmp_path):
    from recipe.rrr_config import RrrPromptsConfig

    feedback = tmp_path / "feedback.txt"
    feedback.write_text("Wrong: the equation does not reach the target.")
    backend = Scripted(script(set(), set()))
    summary = run_eval(
        cfg_for(tmp_path, limit=1, rrr_prompts=RrrPromptsConfig(feedback=str(feedback))), backend=backend
    )
    assert summary["settings"]["prompts"] != PROMPTS.version()
    assert records_of(tmp_path / "run")[0].extra["retried"] is True
    reflection = next(c for c in backend.chats if pass_of(c) == REFLECTION)
    assert "Wrong: the equation does not reach the target." in reflection[-1]["content"]
    assert PROMPTS.feedback not in reflection[-1]["content"]


# ----------------------------------------------------------------------------- judge choice


@pytest.mark.parametrize(
    "datasets, kind, needle",
    [
        (["countdown"], "rule", "dataset 'countdown' is Countdown: it needs --judge countdown"),
        (["countdown", "gsm8k"], "auto", "evaluate them in separate runs"),
        (["gsm8k"], "countdown", "dataset 'gsm8k' needs --judge rule"),
    ],
)
def test_a_judge_that_cannot_score_the_data_is_refused(shared_data, monkeypatch, tmp_path, datasets, kind, needle):
    from recipe.pasr_config import JudgeConfig

    monkeypatch.setenv("PASR_DATA_DIR", str(shared_data))
    with pytest.raises(EvalError) as err:
        cfg = cfg_for(tmp_path, datasets=datasets, limit=1, judge=JudgeConfig(kind=kind))
        run_eval(cfg, backend=Scripted(script(set(), set())))
    assert needle in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "run" / "run.json").exists()


def test_other_methods_summaries_have_no_retry_keys(tmp_path):
    problems = countdown(2)
    summary = run_eval(
        cfg_for(tmp_path, method="plain", limit=2),
        backend=Scripted(lambda k, q, c: answer(problems[q].extra["solution"])),
    )
    d = summary["datasets"]["countdown"]
    assert d["accuracy"] == 1.0 and "first_attempt_accuracy" not in d and "retry_rate" not in d
    assert "first-attempt" not in (tmp_path / "run" / "summary.md").read_text()


# ----------------------------------------------------------------------------- CLI and compare


def test_cli_runs_reflect_retry_on_countdown(tmp_path, run_cli, monkeypatch):
    import eval.run

    problems = list(countdown(2))
    backend = Scripted(script({problems[0]}, {problems[1]}))
    monkeypatch.setattr(eval.run, "build_backend", lambda *a, **k: backend)
    out = tmp_path / "rr"
    argv = [
        "eval",
        "--model",
        "m",
        "--dataset",
        "countdown",
        "--method",
        "reflect-retry",
        "--backend",
        "hf",
        "--limit",
        "2",
        "--max-reflection-tokens",
        "12",
        "--progress",
        "off",
        "--out",
        str(out),
    ]
    rc, stdout, err = run_cli(argv)
    assert rc == 0, err
    assert "| countdown | 2 | 2 | 100.0% | 50.0% | 50.0% | 100.0% |" in stdout
    assert [n for _, n in backend.calls] == [1500, 12, 1500]
    assert json.loads((out / "summary.json").read_text())["settings"]["judge"]["kind"] == "countdown"


def test_cli_countdown_difficulty_reaches_the_loader(tmp_path, run_cli, monkeypatch):
    import eval.run

    hard = {ex.question: ex for ex in load_datasets(["countdown"], 2, countdown_difficulty=3)["countdown"]}
    assert all(len(ex.extra["numbers"]) == 5 for ex in hard.values())
    backend = Scripted(lambda k, q, c: answer(hard[q].extra["solution"]))  # a KeyError if level 1 were asked
    monkeypatch.setattr(eval.run, "build_backend", lambda *a, **k: backend)
    out = tmp_path / "d3"
    argv = [
        "eval",
        "--model",
        "m",
        "--dataset",
        "countdown",
        "--difficulty",
        "3",
        "--method",
        "plain",
        "--backend",
        "hf",
        "--limit",
        "2",
        "--progress",
        "off",
        "--out",
        str(out),
    ]
    rc, stdout, err = run_cli(argv)
    assert rc == 0, err
    assert "| countdown | 2 | 2 | 100.0% |" in stdout
    assert json.loads((out / "summary.json").read_text())["settings"]["countdown_difficulty"] == 3
    assert all(":d3:" in r.query_id for r in records_of(out))
    # the default keeps the loader's level 1 and leaves the settings (resume fingerprint) as before
    from eval.methods import MethodPrompts

    default = cfg_for(tmp_path)
    assert default.countdown_difficulty == 1 and "countdown_difficulty" not in default.settings(MethodPrompts.load())


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--dataset", "countdown", "--difficulty", "4"], "--difficulty must be one of 1, 2, 3"),
        (["--dataset", "gsm8k", "--difficulty", "2"], "applies to --dataset countdown only"),
    ],
)
def test_cli_bad_countdown_difficulty_is_one_line(tmp_path, run_cli, argv, needle):
    rc, _, err = run_cli(["eval", "--model", "m", *argv, "--limit", "1", "--out", str(tmp_path / "o")])
    assert rc == 2 and needle in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_cli_judge_mismatch_is_one_line(tmp_path, run_cli):
    argv = [
        "eval",
        "--model",
        "m",
        "--dataset",
        "countdown",
        "--judge",
        "rule",
        "--method",
        "reflect-retry",
        "--limit",
        "1",
        "--out",
        str(tmp_path / "o"),
    ]
    rc, _, err = run_cli(argv)
    assert rc == 2 and "needs --judge countdown" in err and err.count("\n") == 1 and "Traceback" not in err


def test_help_explains_the_method():
    from pasr_cli import build_parser

    p = build_parser()
    help_text = p._subparsers._group_actions[0].choices["eval"].format_help()
    assert "reflect-retry (Reflect, Retry, Reward" in help_text and "--max-reflection-tokens" in help_text
    assert "countdown" in help_text and "--rrr-feedback-prompt" in help_text
    args = p.parse_args(["eval", "--model", "m", "--dataset", "countdown", "--method", "reflect-retry"])
    assert args.method == "reflect-retry" and args.datasets == ["countdown"] and args.judge == "auto"


def test_compare_shows_first_attempt_accuracy_for_reflect_retry_rows(tmp_path, run_cli):
    problems = countdown()
    q = list(problems)
    run_eval(cfg_for(tmp_path, limit=N, out=str(tmp_path / "rr")), backend=Scripted(script({q[0]}, {q[1]})))
    run_eval(
        cfg_for(tmp_path, method="plain", limit=N, out=str(tmp_path / "plain")),
        backend=Scripted(lambda k, q_, c: answer(problems[q_].extra["solution"])),
    )
    argv = ["eval", "compare", str(tmp_path / "rr"), str(tmp_path / "plain"), "--out", str(tmp_path / "c.png")]
    rc, out, err = run_cli(argv)
    assert rc == 0, err
    lines = [ln for ln in out.splitlines() if ln.startswith("|")]
    assert "countdown 1st acc %" in lines[0] and "countdown retried %" in lines[0]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    assert head[2:] == [
        "countdown questions",
        "countdown acc %",
        "countdown tokens",
        "countdown 1st acc %",
        "countdown retried %",
    ]
    rr, plain = ([c.strip() for c in ln.strip("|").split("|")] for ln in lines[2:4])
    assert rr[1] == "reflect-retry" and (rr[2], rr[3], rr[5], rr[6]) == (str(N), "50.0", "25.0", "75.0")
    assert plain[1] == "plain" and (plain[2], plain[3], plain[5], plain[6]) == (str(N), "100.0", "-", "-")


# ----------------------------------------------------------------------------- the real model


@pytest.mark.slow
def test_hf_backend_smollm2_countdown(tmp_path, run_cli):
    out = tmp_path / "smol"
    argv = [
        "eval",
        "--model",
        "smollm2",
        "--dataset",
        "countdown",
        "--method",
        "reflect-retry",
        "--backend",
        "hf",
        "--limit",
        "2",
        "--max-new-tokens",
        "16",
        "--max-reflection-tokens",
        "8",
        "--threads",
        "1",
        "--progress",
        "off",
        "--out",
        str(out),
    ]
    rc, stdout, err = run_cli(argv)
    assert rc == 0, err
    recs = records_of(out)
    assert len(recs) == 2 and all(r.acc is not None and r.extra["method"] == "reflect-retry" for r in recs)
    for r in recs:
        passes = r.extra["passes"]
        assert [p["variant"] for p in passes] == ([ATTEMPT, REFLECTION, RETRY] if r.extra["retried"] else [ATTEMPT])
        assert r.response_tokens == sum(p["tokens"] for p in passes)
        assert all(0 < p["tokens"] <= (8 if p["variant"] == REFLECTION else 16) for p in passes)
    assert "| countdown | 2 | 2 |" in stdout
