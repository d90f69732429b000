"""`pasr eval`'s command line: the parser (a run and `compare`), and each user error (unknown
data set or method, missing model, bad numbers, an unreadable data file, an --out under a file, no
vllm) as one line, exit 2, no traceback."""

from __future__ import annotations

import json
import sys

import pytest

from eval.run import EvalError, run_eval
from tests.scripted_eval import Scripted, cfg_for


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
    argv = [
        "eval",
        "--model",
        "m",
        "--dataset",
        "gsm8k",
        "--backend",
        "vllm",
        "--limit",
        "1",
        "--out",
        str(tmp_path / "o"),
    ]
    rc, _, err = run_cli(argv)
    assert rc == 2 and "vllm backend needs the vllm package" in err and err.count("\n") == 1


def test_out_under_a_file_names_the_file(data_env, tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(EvalError, match=r"cannot create --out .*: .*/f is a file, not a directory"):
        run_eval(
            cfg_for(tmp_path, method="plain", limit=1, out=str(tmp_path / "f" / "run")),
            backend=Scripted(lambda s, u: "x"),
        )


def test_dataset_file_errors_are_one_line(tmp_path, run_cli):
    latin1 = tmp_path / "latin1.jsonl"
    latin1.write_bytes(b'{"question": "caf\xe9?", "answer": "4"}\n')
    evol = tmp_path / "evol.jsonl"
    evol.write_text(json.dumps({"instruction": "2+2?", "output": "4"}) + "\n")
    for path, needle in ((latin1, "latin1.jsonl:1: not UTF-8 text"), (evol, "pasr data preview --dataset")):
        rc, _, err = run_cli(["eval", "--model", "m", "--dataset", str(path), "--out", str(tmp_path / "o")])
        assert rc == 2 and needle in err and err.count("\n") == 1 and "Traceback" not in err, err
        assert "map them with" not in err  # no eval flag that does not exist


def test_parser_takes_run_and_compare():
    from pasr_cli import build_parser

    p = build_parser()
    a = p.parse_args(
        ["eval", "--model", "m", "--dataset", "gsm8k", "math500", "aime24", "--method", "plain", "--out", "d"]
    )
    assert a.eval_command is None and a.datasets == ["gsm8k", "math500", "aime24"] and a.out == "d"
    b = p.parse_args(["eval", "compare", "d1", "d2", "--out", "x"])
    assert b.eval_command == "compare" and b.dirs == ["d1", "d2"] and b.compare_out == "x"
    help_text = p._subparsers._group_actions[0].choices["eval"].format_help()
    assert "pasr eval compare DIR" in help_text and "--samples" in help_text and "self-refine" in help_text


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
