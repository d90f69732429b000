"""``pasr judge try`` (issue 52 item 5): a judge prompt rendered for a few rows of a made
MATH-style file and sent by training's judge client to a fake OpenAI-compatible server
(benchmarks/fake_openai_server.py): prompt, reply and score per row; ``--dry-run`` sends nothing;
a reply without a score is shown and makes the exit status 1; bad flags and templates are one line."""

from __future__ import annotations

import pytest

from benchmarks.fake_openai_server import GARBAGE_REPLY, FakeOpenAIServer
from pasr_cli import main as pasr_main
from tests.test_math_training_data import GOLDS, MATH_ROWS, _write_jsonl

TEMPLATE = "Grade it.\nQ: {question}\nReference: {gold}\nCandidate: {answer}\nReply as Score: <x>"


@pytest.fixture
def math_file(tmp_path):
    return _write_jsonl(tmp_path / "math_train.jsonl", MATH_ROWS)


@pytest.fixture
def my_prompt(tmp_path):
    path = tmp_path / "my_judge.txt"
    path.write_text(TEMPLATE, encoding="utf-8")
    return path


def _try(capsys, *argv) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = pasr_main(["judge", "try", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_each_row_is_sent_and_its_prompt_reply_and_score_printed(math_file, my_prompt, capsys):
    with FakeOpenAIServer(template=TEMPLATE) as srv:
        rc, out, _ = _try(
            capsys,
            "--dataset",
            str(math_file),
            "--limit",
            "3",
            "--judge-prompt",
            str(my_prompt),
            "--judge-base-url",
            srv.base_url,
            "--judge-model",
            srv.model,
        )
        assert srv.requests == 3  # one request a row, as training sends it (the server reads it back with the template)
    assert rc == 0
    for row, gold in zip(MATH_ROWS[:3], GOLDS):
        assert f"Q: {row['problem']}\nReference: {gold}\nCandidate: {gold}\n" in out  # the gold is the answer judged
    assert out.count("--- reply ---\nScore: 1.0\n--- score: 1.0 ---") == 3
    assert f"fake-judge at {srv.base_url}" in out and "3 of 3 row(s) scored (mean 1.000)" in out
    with FakeOpenAIServer(template=TEMPLATE) as srv:  # another answer for every row
        rc, out, _ = _try(
            capsys,
            "--dataset",
            str(math_file),
            "--limit",
            "2",
            "--judge-prompt",
            str(my_prompt),
            "--answer",
            "7",
            "--judge-base-url",
            srv.base_url,
            "--judge-model",
            srv.model,
        )
    assert rc == 0 and out.count("--- score: 0.0 ---") == 2 and "answer judged: 7" in out


def test_a_reply_without_a_score_is_shown_and_the_exit_status_is_1(math_file, capsys):
    with FakeOpenAIServer(script=["garbage"]) as srv:  # the built-in judge_continuous on the server's side too
        rc, out, _ = _try(
            capsys,
            "--dataset",
            str(math_file),
            "--limit",
            "1",
            "--judge-base-url",
            srv.base_url,
            "--judge-model",
            srv.model,
        )
        assert srv.requests == 1  # no retry: the reply that came back is the one shown
    assert rc == 1
    assert f"--- reply ---\n{GARBAGE_REPLY}\n--- no score: unparsable_score: " in out
    assert "0 of 1 row(s) scored" in out


def test_dry_run_prints_the_prompts_and_sends_nothing(math_file, capsys):
    from prompts import load_prompt
    from rewards.judges.openai_judge import fill_template

    rc, out, err = _try(capsys, "--dataset", str(math_file), "--limit", "2", "--dry-run")
    assert rc == 0 and err == ""
    assert "judge prompt judge_continuous (version " in out and "dry run, nothing sent" in out
    for row, gold in zip(MATH_ROWS[:2], GOLDS):
        assert fill_template(load_prompt("judge_continuous"), row["problem"], gold, gold) in out
    assert "--- reply ---" not in out and out.count("=== row ") == 2
    # a math gold: hybrid would send the row to Math-Verify, not to this prompt
    assert out.count("with pasr.judge.kind=hybrid this row goes to Math-Verify") == 2


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--judge-prompt", "MISSING", "--dry-run"], "--judge-prompt TMP/nope.txt: prompt template file not found"),
        (["--judge-prompt", "judge_nope", "--dry-run"], "--judge-prompt judge_nope: unknown prompt 'judge_nope'"),
        (["--judge-prompt", "NO_ANSWER", "--dry-run"], "judge template has no {answer} placeholder"),
        ([], "--judge-base-url and --judge-model required to send the prompts (or --dry-run to print them)"),
        (["--judge-base-url", "http://127.0.0.1:9/v1"], "--judge-model required"),
        (
            ["--judge-base-url", "http://h/v1", "--judge-model", "m", "--judge-timeout", "0"],
            "--judge-timeout must be a number of seconds > 0",
        ),
        (["--judge-base-url", "not a url", "--judge-model", "m"], "the judge URL not a url is not an http(s) URL"),
        (["--judge-base-url", "judge:8000/v1", "--judge-model", "m"], "e.g. http://judge-host:8000/v1"),
        (["--judge-base-url", "ftp://judge/v1", "--judge-model", "m"], "is not an http(s) URL with a host"),
    ],
)
def test_bad_flags_and_templates_are_one_line(math_file, tmp_path, capsys, argv, message):
    no_answer = tmp_path / "no_answer.txt"
    no_answer.write_text("Q: {question} Reference: {gold}", encoding="utf-8")
    argv = [{"MISSING": str(tmp_path / "nope.txt"), "NO_ANSWER": str(no_answer)}.get(a, a) for a in argv]
    rc, out, err = _try(capsys, "--dataset", str(math_file), *argv)
    assert rc == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("pasr judge: error: ") and message.replace("TMP", str(tmp_path)) in err, err


@pytest.mark.parametrize("content, kind", [(None, "null"), (["Score: 1"], "a list"), (1, "a number")])
def test_a_reply_whose_content_is_not_text_is_a_no_score_line(math_file, capsys, content, kind):
    """A server whose message content is null, a list or a number: the row says so and the exit
    status is 1 (a list or a number was a traceback before; 1 could have been read as a score)."""
    with FakeOpenAIServer(reply=content) as srv:
        rc, out, err = _try(
            capsys,
            "--dataset",
            str(math_file),
            "--limit",
            "1",
            "--judge-base-url",
            srv.base_url,
            "--judge-model",
            srv.model,
        )
    assert rc == 1 and "Traceback" not in err, err
    assert f"--- reply ---\n(none)\n--- no score: bad_response: the message content is {kind}, not text" in out
    assert "0 of 1 row(s) scored" in out


def test_an_empty_answer_is_not_sent(math_file, capsys):
    """A run scores an empty answer 0.0 without asking the judge: judge try says so and asks
    nothing (before, it sent the empty answer and showed the judge's score for it)."""
    with FakeOpenAIServer() as srv:
        for answer in ("", "  "):
            rc, out, err = _try(
                capsys,
                "--dataset",
                str(math_file),
                "--answer",
                answer,
                "--judge-base-url",
                srv.base_url,
                "--judge-model",
                srv.model,
            )
            assert rc == 2 and out == "" and err.count("\n") == 1, err
            assert f"--answer {answer!r}: a run scores an empty answer 0.0 without asking the judge" in err
        assert srv.requests == 0
