"""``pasr data prepare`` refuses what would silently spoil training data (issue 63, classes 4 and 5):
a second source of the same stem replacing the first in one ``--out``, an evaluation set written
as a training split, and gold answers no rollout can be scored right against (empty, not math
Math-Verify reads, undefined, NaN), each naming the file and line; a number in e-notation or too
large for a float is written as the number it is, not ``inf``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from data.gold_check import from_e_notation, gold_problem
from data.verl_parquet import read_rl_parquet

pytest.importorskip("pyarrow")


def _rows(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _prepare(run_cli, *argv: str):
    return run_cli(["data", "prepare", *argv])


def _one_line_error(rc: int, err: str) -> None:
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err, err


# ------------------------------------------------------------------ the same stem into one --out


def test_a_second_source_of_the_same_stem_is_refused_naming_both(tmp_path, run_cli):
    a = _rows(tmp_path / "a" / "train.jsonl", [{"question": "1+1?", "answer": "2"}])
    b = _rows(tmp_path / "b" / "train.jsonl", [{"question": "2+2?", "answer": "4"}])
    out = tmp_path / "out"
    assert _prepare(run_cli, "--dataset", str(a), "--out", str(out))[0] == 0
    rc, _, err = _prepare(run_cli, "--dataset", str(b), "--out", str(out))
    _one_line_error(rc, err)
    assert str(a.resolve()) in err and str(b.resolve()) in err and "train.parquet" in err
    assert [r["reward_model"]["ground_truth"] for r in read_rl_parquet(out / "train.parquet")] == ["2"]  # kept
    # the same source again is a rerun: replaced (a job prepares its data on every submission)
    a.write_text(json.dumps({"question": "1+1?", "answer": "2"}) + "\n" + json.dumps({"question": "3?", "answer": "3"}))
    assert _prepare(run_cli, "--dataset", str(a), "--out", str(out))[0] == 0
    assert len(read_rl_parquet(out / "train.parquet")) == 2


def test_keep_existing_keeps_the_same_sources_file_and_nothing_else(tmp_path, run_cli):
    """``--keep-existing`` (what a resubmitted ``pasr submit`` job runs): the file a first run
    prepared from the same source is kept without reading the source; none there is prepared;
    another source of the same stem is refused as without the flag."""
    a = _rows(tmp_path / "a" / "train.jsonl", [{"question": "1+1?", "answer": "2"}])
    out = tmp_path / "out"
    rc, stdout, err = _prepare(run_cli, "--dataset", str(a), "--keep-existing", "--out", str(out))
    assert rc == 0 and "wrote 1 rows" in stdout, err  # nothing to keep yet
    a.write_text('{"question": "3+3?", "answer": "6"}\n')  # changed: a rerun would see it; a kept file does not
    rc, stdout, err = _prepare(run_cli, "--dataset", str(a), "--keep-existing", "--out", str(out))
    assert rc == 0 and f"kept {out / 'train.parquet'}: prepared from {a} before" in stdout, err
    assert read_rl_parquet(out / "train.parquet")[0]["reward_model"]["ground_truth"] == "2"
    a.unlink()
    assert _prepare(run_cli, "--dataset", str(a), "--keep-existing", "--out", str(out))[0] == 0
    b = _rows(tmp_path / "b" / "train.jsonl", [{"question": "2+2?", "answer": "4"}])
    rc, _, err = _prepare(run_cli, "--dataset", str(b), "--keep-existing", "--out", str(out))
    _one_line_error(rc, err)
    assert str(a) in err and str(b) in err


def test_a_known_set_and_a_file_of_its_name_collide_too(tmp_path, run_cli):
    out = tmp_path / "out"
    assert _prepare(run_cli, "--dataset", "synthetic", "--n", "3", "--out", str(out))[0] == 0
    same_name = _rows(tmp_path / "mine" / "synthetic.jsonl", [{"question": "1+1?", "answer": "2"}])
    rc, _, err = _prepare(run_cli, "--dataset", str(same_name), "--split", "train", "--out", str(out))
    _one_line_error(rc, err)
    assert "holds the rows of synthetic" in err and str(same_name.resolve()) in err


# ------------------------------------------------------------------ an evaluation set as training data


@pytest.mark.parametrize(
    "name, rows, reason",
    [
        ("gsm8k_test.jsonl", [{"question": "1+1?", "answer": "#### 2"}], "its name says 'test'"),
        ("math500.jsonl", [{"question": "1+1?", "answer": "2"}], "'math500', an evaluation-only set"),
        ("mine.jsonl", [{"question": "1+1?", "answer": "2", "split": "validation"}], "split 'validation' (line 1)"),
        (
            "mine.jsonl",
            [{"problem": "1+1?", "answer": "2", "unique_id": "test/algebra/1.json"}],
            "MATH's test split, as MATH-500",
        ),
        (
            "prepared.jsonl",
            [
                {
                    "prompt": [{"role": "user", "content": "1+1?"}],
                    "reward_model": {"ground_truth": "2"},
                    "extra_info": {"split": "test"},
                }
            ],
            "split 'test'",
        ),
    ],
)
def test_an_evaluation_set_is_not_written_as_training_data(tmp_path, run_cli, name, rows, reason):
    src = _rows(tmp_path / name, rows)
    rc, _, err = _prepare(run_cli, "--dataset", str(src), "--split", "train", "--out", str(tmp_path / "out"))
    _one_line_error(rc, err)
    assert "looks like an evaluation set" in err and reason in err and "--allow-eval-as-train" in err
    assert not (tmp_path / "out").exists()
    # as validation data it is what it is
    assert _prepare(run_cli, "--dataset", str(src), "--split", "test", "--out", str(tmp_path / "out"))[0] == 0


def test_a_renamed_copy_of_gsm8k_test_is_found_by_its_questions(data_env, tmp_path, run_cli):
    lines = (data_env / "gsm8k_test.jsonl").read_text().splitlines()[:5]
    src = tmp_path / "my_train_rows.jsonl"
    src.write_text("\n".join(lines) + "\n")
    rc, _, err = _prepare(run_cli, "--dataset", str(src), "--split", "train", "--out", str(tmp_path / "out"))
    _one_line_error(rc, err)
    assert "5 of its 5 questions are in gsm8k test" in err
    rc, out, err = _prepare(
        run_cli, "--dataset", str(src), "--split", "train", "--allow-eval-as-train", "--out", str(tmp_path / "out")
    )
    assert rc == 0 and "warning:" in err and "--allow-eval-as-train" in err
    assert len(read_rl_parquet(tmp_path / "out" / "my_train_rows_train.parquet")) == 5


def test_training_data_is_not_mistaken_for_an_evaluation_set(data_env, tmp_path, run_cli):
    lines = (data_env / "gsm8k_train.jsonl").read_text().splitlines()[:3]
    src = tmp_path / "interval_latest.jsonl"  # words that only contain 'val' / 'test'
    src.write_text("\n".join(lines) + "\n")
    rc, _, err = _prepare(run_cli, "--dataset", str(src), "--split", "train", "--out", str(tmp_path / "out"))
    assert rc == 0 and err == "", err


# ------------------------------------------------------------------ gold answers


@pytest.mark.parametrize(
    "gold, needle",
    [
        (".", "is empty once the judge takes its wrapping off"),
        ("\\boxed{}", "is empty once the judge takes its wrapping off"),
        ("$$", "gives a judge error for every rollout"),
        ("**", "Math-Verify reads no math"),
        ("\\frac{", "Math-Verify reads no math"),
        ("\\frac{1}{0}", "every rollout would be a judge error"),
    ],
)
def test_a_gold_no_answer_can_match_is_refused_naming_its_line(tmp_path, run_cli, gold, needle):
    rows = [{"question": "1+1?", "answer": "2"}, {"question": "odd", "answer": gold}]
    src = tmp_path / "golds.jsonl"
    src.write_text(json.dumps(rows[0]) + "\n\n" + json.dumps(rows[1]) + "\n")  # a blank line: line 3, row 2
    rc, _, err = _prepare(run_cli, "--dataset", str(src), "--out", str(tmp_path / "out"))
    _one_line_error(rc, err)
    assert f"{src}:3: " in err and needle in err and "(id golds:1)" in err
    assert not (tmp_path / "out").exists()


def test_the_rule_judge_really_fails_on_the_refused_golds():
    """What gold_problem refuses is what the rule judge cannot pay: an error, or no right answer."""
    from rewards.judges.rule import verify_one

    for gold in (".", "$$", "\\frac{1}{0}"):
        assert gold_problem(gold) is not None
        assert verify_one(gold, "2", 5)[1] is not None or verify_one(gold, "2", 5)[0] == 0.0
    for gold in ("72", "\\frac{1}{2}", "2\\sqrt{3}", "40\\%", "(1,2)", "\\infty", "x = 5", "Paris", "\\text{(C)}"):
        assert gold_problem(gold) is None, gold


def test_json_numbers_keep_their_value_and_e_notation_is_written_out(tmp_path, run_cli):
    src = tmp_path / "numbers.jsonl"
    src.write_text(
        '{"question": "big?", "answer": 1e400}\n{"question": "small?", "answer": 2.5e-400}\n'
        '{"question": "milli?", "answer": "1.5E-3"}\n{"question": "plain?", "answer": 18.0}\n'
    )
    rc, out, err = _prepare(run_cli, "--dataset", str(src), "--out", str(tmp_path / "out"))
    assert rc == 0, err
    golds = [r["reward_model"]["ground_truth"] for r in read_rl_parquet(tmp_path / "out" / "numbers.parquet")]
    assert golds == ["10^{400}", "2.5\\times 10^{-400}", "0.0015", "18.0"]  # was "inf", "0.0", "1.5E-3"
    assert "gold 1e400 written as 10^{400}" in out
    from rewards.judges.rule import verify_one

    assert verify_one(golds[0], "10^{400}", 5) == (1.0, None) and verify_one(golds[2], "0.0015", 5) == (1.0, None)
    assert verify_one(golds[0], "\\infty", 5) == (0.0, None)


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity"])
def test_a_json_nan_or_infinity_gold_is_refused(tmp_path, run_cli, value):
    src = tmp_path / "nan.jsonl"
    src.write_text('{"question": "a?", "answer": "1"}\n{"question": "b?", "answer": ' + value + "}\n")
    rc, _, err = _prepare(run_cli, "--dataset", str(src), "--out", str(tmp_path / "out"))
    _one_line_error(rc, err)
    assert f"{src}:2: field 'answer' is" in err and "write it as text" in err


def test_e_notation_forms():
    assert from_e_notation("1e+20") == "100000000000000000000"
    assert from_e_notation("-3e50") == "-3\\times 10^{50}"
    assert from_e_notation("1.0e2") == "100"
    assert from_e_notation("1e400") == "10^{400}"
    assert from_e_notation("e2") == "e2" and from_e_notation("12") == "12" and from_e_notation("2e") == "2e"
