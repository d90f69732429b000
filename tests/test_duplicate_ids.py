"""Two rows of one id are refused in one line naming the id and both lines, by the one check every
reader of data rows goes through (``data.row_shapes._parse_rows``): ``pasr data prepare``,
``pasr eval`` and ``pasr train``. Before, a MATH-500-shaped file with a repeated ``unique_id``
showed 4 questions as "1 question, 1/4 samples, Partial" in ``pasr eval`` (samples are keyed by
id), its rerun deleted 3 of the 4 samples, and ``pasr data prepare`` wrote the duplicates."""

from __future__ import annotations

import json

import pytest

from data.examples import DataFormatError
from data.loaders import load_examples


def _math_file(tmp_path, uids=("a/1.json", "b/2.json", "a/1.json", "c/3.json")):
    path = tmp_path / "math.jsonl"
    path.write_text(
        "".join(
            json.dumps({"problem": f"{i} + 1?", "answer": str(i + 1), "unique_id": uid}) + "\n"
            for i, uid in enumerate(uids)
        )
    )
    return path


def _assert_names_the_duplicate(err: str, path) -> None:
    assert f"{path}:3: duplicate id 'a/1.json', the id of {path}:1 too" in err, err
    assert "Traceback" not in err


def test_the_loader_refuses_a_repeated_id(tmp_path):
    path = _math_file(tmp_path)
    with pytest.raises(DataFormatError) as err:
        load_examples(str(path))
    _assert_names_the_duplicate(str(err.value), path)
    assert len(load_examples(str(path), limit=2)) == 2  # the rows read are what is checked
    generic = tmp_path / "qa.jsonl"  # ids from a mapped field too; row numbers (the default) never repeat
    generic.write_text('{"q": "1?", "a": "1", "k": "x"}\n{"q": "2?", "a": "2", "k": "x"}\n')
    with pytest.raises(DataFormatError, match=r"qa.jsonl:2: duplicate id 'x', the id of .*qa.jsonl:1 too"):
        load_examples(str(generic), question_field="q", answer_field="a", id_field="k")
    assert len(load_examples(str(generic), question_field="q", answer_field="a")) == 2


def test_pasr_data_prepare_refuses_a_repeated_id(tmp_path, run_cli):
    path = _math_file(tmp_path)
    rc, _, err = run_cli(["data", "prepare", "--dataset", str(path), "--out", str(tmp_path / "out")])
    assert rc == 2 and err.count("\n") == 1
    _assert_names_the_duplicate(err, path)
    assert not (tmp_path / "out").exists()


def test_pasr_eval_refuses_a_repeated_id(tmp_path, run_cli):
    path = _math_file(tmp_path)
    out = tmp_path / "o"
    rc, _, err = run_cli(["eval", "--model", "m", "--dataset", str(path), "--out", str(out), "--progress", "off"])
    assert rc == 2 and err.count("\n") == 1
    _assert_names_the_duplicate(err, path)
    assert not (out / "samples.jsonl").exists()


def test_pasr_train_refuses_a_repeated_id(tiny_model_dir, tmp_path, capsys):
    from pasr_cli import main

    path = _math_file(tmp_path, uids=[f"u{i}" for i in range(6)] + ["u2"])
    run_dir = tmp_path / "run"
    rc = main(
        [
            "train",
            "--run-dir",
            str(run_dir),
            f"model.path={tiny_model_dir}",
            "model.threads=1",
            f"data.source={path}",
            "rollout.queries_per_step=2",
            "data.train_size=12",
            "data.eval_size=2",
            "warmup.steps=0",
            "trainer.steps=1",
            "trainer.eval_at_start=false",
        ]
    )
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert rc == 2 and last.startswith("pasr train: error: "), err
    assert f"{path}:7: duplicate id 'u2', the id of {path}:3 too" in last and "Traceback" not in err
    assert not (run_dir / "config.yaml").exists() and not (run_dir / "checkpoints").exists()
