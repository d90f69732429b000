"""Math RL training data (issue 52): the common training layouts through ``pasr data prepare``
(MATH's problem/solution with the gold from the last \\boxed{}, DeepScaleR's problem/answer,
prompt/answer, verl's own RL layout), the gold the rule judge then scores, ``pasr data list``'s
training and evaluation sections, and the run script's field mapping and prepared-file inputs.
The MATH-style fixture is made here, in MATH's own fields (level, problem, solution, type)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from data.loaders import load_file
from data.verl_parquet import parquet_rows, read_rl_parquet, rl_file_problem
from pasr_cli import main as pasr_main
from rewards.extract import extract_answer
from rewards.judges.rule import RuleJudge

REPO = Path(__file__).resolve().parents[1]

# MATH train rows as the MATH set writes them: no answer field, the answer boxed in the solution
# (the last box counts; braces nest; \fbox too)
MATH_ROWS = [
    {
        "problem": "What is $\\frac{1}{4}+\\frac{1}{4}$?",
        "level": "Level 1",
        "type": "Prealgebra",
        "solution": "We add: $\\frac{1}{4}+\\frac{1}{4}=\\frac{2}{4}=\\boxed{\\frac{1}{2}}$.",
    },
    {
        "problem": "Simplify $\\sqrt{12}$.",
        "level": "Level 2",
        "type": "Algebra",
        "solution": "First $\\boxed{12}=4\\cdot 3$ is not the answer; $\\sqrt{12}=\\boxed{2\\sqrt{3}}$.",
    },
    {"problem": "Solve $x+3=10$.", "level": "Level 1", "type": "Algebra", "solution": "Subtract 3: $x = \\fbox{7}$."},
    {
        "problem": "What percent of 50 is 20?",
        "level": "Level 2",
        "type": "Prealgebra",
        "solution": "$20/50 = 0.4$, so the answer is $\\boxed{40\\%}$.",
    },
]
GOLDS = ["\\frac{1}{2}", "2\\sqrt{3}", "7", "40\\%"]


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_a_math_style_file_is_prepared_with_the_boxed_answer_as_gold(tmp_path, capsys):
    src = _write_jsonl(tmp_path / "math_style.jsonl", MATH_ROWS)
    assert (
        pasr_main(["data", "prepare", "--dataset", str(src), "--split", "train", "--out", str(tmp_path / "out")]) == 0
    )
    out = capsys.readouterr().out
    parquet = tmp_path / "out" / "math_style_train.parquet"
    assert f"wrote 4 rows (math_style) to {parquet}" in out and "layout: MATH training: problem + solution" in out
    rows = read_rl_parquet(parquet)
    assert [r["reward_model"]["ground_truth"] for r in rows] == GOLDS
    assert [r["prompt"][-1]["content"] for r in rows] == [r["problem"] for r in MATH_ROWS]
    assert {r["extra_info"]["split"] for r in rows} == {"train"}
    # the file is one verl trains on, and it reads back through the loaders as the same questions
    assert rl_file_problem(parquet) is None and parquet_rows(parquet) == 4
    back = load_file(parquet)
    assert [(e.question, e.answer) for e in back] == [(r["problem"], g) for r, g in zip(MATH_ROWS, GOLDS)]


def test_the_rule_judge_scores_the_boxed_gold_of_a_math_solution():
    """What the trainer does with such a row: the answer cut out of a PASR response, judged
    against the extracted gold by Math-Verify. Equal values in other written forms score 1, a
    wrong value 0; the box's content is the gold, not the first box of the solution."""
    from data.row_shapes import _math_solution_row

    golds = [_math_solution_row("m")(row, i, "train").answer for i, row in enumerate(MATH_ROWS)]
    assert golds == GOLDS

    def response(answer: str) -> str:
        return f"<think>work<refine>checked</refine></think><answer>{answer}</answer>"

    right = ["\\boxed{0.5}", "1/2", "\\boxed{\\sqrt{12}}", "7", "40%"]
    wrong = ["\\boxed{\\frac{1}{3}}", "12", "3\\sqrt{2}", "x = 8", "0.4%"]
    gold_of = [GOLDS[0], GOLDS[0], GOLDS[1], GOLDS[2], GOLDS[3]]
    with RuleJudge(mode="inline") as judge:
        scores = judge.score_pairs([(g, extract_answer(response(a))) for g, a in zip(gold_of + gold_of, right + wrong)])
    assert [s.score for s in scores] == [1.0] * 5 + [0.0] * 5, [s.score for s in scores]
    assert not any(s.error for s in scores)


def test_a_math_row_without_a_boxed_answer_names_its_line(tmp_path, capsys):
    rows = [MATH_ROWS[0], {"problem": "Find x.", "solution": "x is 3.", "level": "Level 1", "type": "Algebra"}]
    src = _write_jsonl(tmp_path / "nobox.jsonl", rows)
    assert pasr_main(["data", "prepare", "--dataset", str(src), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nobox.jsonl:2: field 'solution' has no \\boxed{...} answer" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "name, row, question, gold, layout",
    [
        (
            "deepscaler",
            {"problem": "1+1?", "answer": "2", "solution": "It is \\boxed{3}."},
            "1+1?",
            "2",
            "DeepScaleR style",
        ),
        ("prompt_answer", {"prompt": "2+2?", "answer": "4"}, "2+2?", "4", "prompt + answer"),
        (
            "dapo",
            {
                "data_source": "math_dapo",
                "ability": "MATH",
                "extra_info": {"index": "a-1"},
                "prompt": [{"role": "user", "content": "3+3?"}],
                "reward_model": {"ground_truth": "6", "style": "rule-lighteval/MATH_v2"},
            },
            "3+3?",
            "6",
            "verl RL parquet",
        ),
    ],
)
def test_training_layouts_are_detected(tmp_path, capsys, name, row, question, gold, layout):
    src = _write_jsonl(tmp_path / f"{name}.jsonl", [row])
    assert pasr_main(["data", "prepare", "--dataset", str(src), "--split", "train", "--out", str(tmp_path)]) == 0
    assert f"layout: {layout}" in capsys.readouterr().out
    [written] = read_rl_parquet(tmp_path / f"{name}_train.parquet")
    assert (written["prompt"][-1]["content"], written["reward_model"]["ground_truth"]) == (question, gold)


def test_a_field_mapping_still_reads_any_file(tmp_path, capsys):
    src = _write_jsonl(tmp_path / "evol.jsonl", [{"instruction": "Name a prime.", "output": "2"}])
    assert (
        pasr_main(
            [
                "data",
                "prepare",
                "--dataset",
                str(src),
                "--question-field",
                "instruction",
                "--answer-field",
                "output",
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    assert "layout: question + answer, or any fields mapped" in capsys.readouterr().out
    assert read_rl_parquet(tmp_path / "evol.parquet")[0]["reward_model"]["ground_truth"] == "2"


def test_a_question_answer_parquet_is_not_a_verl_training_file(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    plain = tmp_path / "plain.parquet"
    pq.write_table(pa.Table.from_pylist([{"question": "q", "answer": "1"}]), plain)
    assert "no column prompt, reward_model, data_source" in rl_file_problem(plain)
    text = tmp_path / "text_prompt.parquet"
    pq.write_table(
        pa.Table.from_pylist([{"prompt": "q", "reward_model": {"ground_truth": "1"}, "data_source": "d"}]), text
    )
    assert "row 1: prompt is not a list of chat messages" in rl_file_problem(text)


def test_data_list_separates_training_from_evaluation_sets(shared_data, monkeypatch, capsys):
    monkeypatch.setenv("PASR_DATA_DIR", str(shared_data))
    assert pasr_main(["data", "list"]) == 0
    out = capsys.readouterr().out
    train, rest = out.split("Evaluation sets")
    evaluation, files = rest.split("Data files")
    assert train.startswith("Training sets")
    train_rows = {tuple(line.split()[:2]) for line in train.splitlines()[1:]}
    eval_rows = {tuple(line.split()[:2]) for line in evaluation.splitlines()[1:]}
    assert {("gsm8k", "train"), ("math", "train"), ("synthetic", "train")} <= train_rows
    assert {("gsm8k", "test"), ("math500", "test"), ("aime24", "test"), ("math", "test")} <= eval_rows
    assert all(split == "train" for _, split in train_rows) and all(split != "train" for _, split in eval_rows)
    assert f"gsm8k      train  {shared_data / 'gsm8k_train.jsonl'}" in train
    assert "MATH training: problem + solution" in files


def test_gsm8k_train_split_is_prepared_from_the_local_copy(shared_data, monkeypatch, tmp_path, capsys):
    if not (shared_data / "gsm8k_train.jsonl").is_file():
        pytest.skip("gsm8k_train.jsonl not in the shared data")
    monkeypatch.setenv("PASR_DATA_DIR", str(shared_data))
    assert (
        pasr_main(["data", "prepare", "--dataset", "gsm8k", "--split", "train", "--limit", "3", "--out", str(tmp_path)])
        == 0
    )
    rows = read_rl_parquet(tmp_path / "gsm8k_train.parquet")
    assert [r["reward_model"]["ground_truth"] for r in rows] == ["72", "10", "5"]
    assert rows[0]["extra_info"]["id"] == "gsm8k:train:0"


def _script_data_step(tmp_path: Path, env: dict[str, str]) -> list[list[str]]:
    """Run run_pasr_node.sh up to its training command with python3 and nvidia-smi stubbed:
    the commands it ran, one argv a line."""
    import os

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    log = tmp_path / "calls.log"
    (bin_dir / "python3").write_text(f'#!/bin/sh\nprintf "%s\\037" "$@" >> {log}\necho >> {log}\n')
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\nfor i in 0 1 2 3 4 5 6 7; do echo GPU $i; done\n")
    for tool in ("python3", "nvidia-smi"):
        (bin_dir / tool).chmod(0o755)
    full = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "MODEL_PATH": "/m",
        "EXP_NAME": "e",
        "DATA_DIR": str(tmp_path / "data"),
        "CKPT_DIR": str(tmp_path / "ckpt"),
        **env,
    }
    proc = subprocess.run(
        ["bash", str(REPO / "recipe" / "scripts" / "run_pasr_node.sh")],
        env=full,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return [line.split("\037")[:-1] for line in log.read_text().splitlines() if line]


def test_the_run_script_takes_a_field_mapping_and_a_prepared_file(tmp_path):
    calls = _script_data_step(
        tmp_path,
        {"TRAIN_DATASET": "/d/evol.jsonl", "TRAIN_QUESTION_FIELD": "instruction", "TRAIN_ANSWER_FIELD": "output"},
    )
    prepare = [c for c in calls if c[:4] == ["-m", "recipe", "data", "prepare"]]
    assert prepare[0][4:] == [
        "--dataset",
        "/d/evol.jsonl",
        "--split",
        "train",
        "--out",
        str(tmp_path / "data"),
        "--question-field",
        "instruction",
        "--answer-field",
        "output",
    ]
    train = next(c for c in calls if c[:2] == ["-m", "recipe.main_pasr"])
    assert f"data.train_files={tmp_path / 'data' / 'evol_train.parquet'}" in train
    # a prepared parquet is trained on as is: no preparation of it
    calls = _script_data_step(tmp_path / "b", {"TRAIN_FILE": "/shared/math_train.parquet"})
    assert not [c for c in calls if c[:4] == ["-m", "recipe", "data", "prepare"] and "train" in c]
    train = next(c for c in calls if c[:2] == ["-m", "recipe.main_pasr"])
    assert "data.train_files=/shared/math_train.parquet" in train


def test_pasr_submit_prepares_the_data_in_the_job_with_the_same_mapping(tmp_path):
    """``pasr submit --train-dataset FILE --question-field/--answer-field --data-dir DIR``: the job
    runs pasr data prepare first and trains on what it writes. The preparation steps of the
    entrypoint, run here as the job runs them, write the files the overrides name."""
    import argparse
    import shlex

    from recipe.submit import build_parser, job_additions, recipe_entrypoint

    src = _write_jsonl(tmp_path / "evol.jsonl", [{"instruction": "Name a prime.", "output": "2"}])
    parser = argparse.ArgumentParser()
    build_parser(parser)
    args = parser.parse_args(
        [
            "--address",
            "http://h:8265",
            "--train-dataset",
            str(src),
            "--val-dataset",
            "math500",
            "--question-field",
            "instruction",
            "--answer-field",
            "output",
            "--data-dir",
            str(tmp_path / "d"),
            "--",
            "trainer.default_local_dir=/ck",
        ]
    )
    overrides, prepare, checked = job_additions(args, args.overrides[1:])
    assert overrides[:2] == [
        f"data.train_files={tmp_path / 'd' / 'evol_train.parquet'}",
        f"data.val_files={tmp_path / 'd' / 'math500_test.parquet'}",
    ]
    assert checked == overrides and prepare[1][-2:] == ["--out", str(tmp_path / "d")]  # no mapping for a named set
    steps = recipe_entrypoint(overrides, prepare).split(" && ")
    assert steps[-1].startswith("python3 -m recipe.main_pasr data.train_files=")
    result = subprocess.run(
        ["bash", "-c", steps[0].replace("python3", shlex.quote(sys.executable), 1)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert read_rl_parquet(tmp_path / "d" / "evol_train.parquet")[0]["reward_model"]["ground_truth"] == "2"
    # a resubmission (after a preemption) keeps what the first job prepared: the source is not read again
    src.unlink()
    again = subprocess.run(
        ["bash", "-c", steps[0].replace("python3", shlex.quote(sys.executable), 1)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0, again.stderr
    assert f"kept {tmp_path / 'd' / 'evol_train.parquet'}: prepared from {src} before" in again.stdout


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--train-dataset", "math", "--data-dir", "data"], "need --data-dir /ABSOLUTE/DIR"),
        (["--question-field", "q"], "--question-field: only with --train-dataset/--val-dataset"),
        (
            ["--train-dataset", "math", "--data-dir", "/d", "--", "data.train_files=/x.parquet"],
            "data.train_files is set by --train-dataset",
        ),
        (["--engine", "local", "--train-dataset", "math"], "only for the verl engine's own entrypoint"),
    ],
)
def test_pasr_submit_data_flags_are_refused_in_one_line_before_connecting(argv, message, capsys):
    rc = pasr_main(["submit", "--address", "http://127.0.0.1:9", "--timeout", "1", *argv])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and err.count("\n") == 1, err
