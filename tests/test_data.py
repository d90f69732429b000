"""Data: loaders (shared sets, files, hub via a mock), synthetic problems, verl parquet, `pasr data`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from data.examples import DataFormatError, DatasetError, Example
from data.loaders import DATASETS, describe_sources, get_dataset, load_examples
from data.synthetic import DIFFICULTIES, MAX_VALUE, apply_op, generate_problems, split_of, split_problems
from data.verl_parquet import COLUMNS, read_rl_parquet, write_rl_parquet
from pasr_cli import main as pasr_main
from prompts import load_prompt

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def local_data(shared_data, monkeypatch):
    monkeypatch.setenv("PASR_DATA_DIR", str(shared_data))
    return shared_data


def _write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


# ------------------------------------------------------------------ shared sets


def test_gsm8k_gold_and_ids(local_data):
    test = load_examples("gsm8k", split="test")
    assert len(test) == 1319
    first = test[0]
    assert first.id == "gsm8k:test:0" and first.data_source == "gsm8k"
    assert first.question.startswith("Janet’s ducks lay 16 eggs per day.")
    assert first.answer == "18"
    assert test[146].answer == "2125"  # "#### 2,125": commas removed
    assert len({ex.id for ex in test}) == len(test)
    train = load_examples("gsm8k", split="train", limit=2)
    assert [ex.answer for ex in train] == ["72", "10"]
    assert train[0].id == "gsm8k:train:0"


def test_math500_and_aime24(local_data):
    math = load_examples("math500", limit=2)
    assert len(math) == 2
    assert math[0].id == "math500:test/precalculus/807.json"
    assert math[0].answer == r"\left( 3, \frac{\pi}{2} \right)"
    assert math[0].question.startswith("Convert the point $(0,3)$")
    assert math[0].extra["level"] == 2 and math[1].answer == "p - q"
    aime = load_examples("aime24")
    assert len(aime) == 30
    assert (aime[0].id, aime[0].answer) == ("aime24:60", "204")
    assert all(ex.answer.isdigit() for ex in aime)


def test_limit_and_unknown_names(local_data):
    assert len(load_examples("gsm8k", limit=5)) == 5
    assert load_examples("aime24", limit=0) == []
    assert get_dataset("openai/gsm8k").name == "gsm8k"
    assert set(DATASETS) == {"gsm8k", "math500", "aime24", "math", "synthetic", "countdown"}
    with pytest.raises(
        DatasetError, match="unknown dataset 'gsm9k'.*gsm8k, math500, aime24, math, synthetic, countdown"
    ):
        load_examples("gsm9k")
    with pytest.raises(DatasetError, match="no split 'train'"):
        load_examples("math500", split="train")
    assert {row["name"] for row in describe_sources()} == set(DATASETS)


# ------------------------------------------------------------------ local files


def test_file_shape_detection(local_data, tmp_path):
    # the shared files, read as plain paths: same golds
    gsm = load_examples(str(local_data / "gsm8k_test.jsonl"), limit=1)[0]
    assert (gsm.answer, gsm.data_source, gsm.id) == ("18", "gsm8k_test", "gsm8k_test:0")
    aime = load_examples(str(local_data / "aime24.jsonl"), limit=1)[0]
    assert (aime.answer, aime.id) == ("204", "aime24:60")
    # MATH-500 hub shape (problem, not question), as a JSON array
    arr = tmp_path / "m.json"
    arr.write_text(json.dumps([{"problem": "1+1?", "answer": "2", "unique_id": "u/1"}], indent=2))
    [m] = load_examples(str(arr))
    assert (m.question, m.answer, m.id) == ("1+1?", "2", "m:u/1")
    # parquet with plain question/answer
    import pandas as pd

    pq_path = tmp_path / "qa.parquet"
    pd.DataFrame({"question": ["a?", "b?"], "answer": ["1", "2"]}).to_parquet(pq_path)
    assert [(e.id, e.answer) for e in load_examples(str(pq_path))] == [("qa:0", "1"), ("qa:1", "2")]


def test_generic_instruction_mapping(tmp_path):
    path = _write_jsonl(
        tmp_path / "evol.jsonl",
        [
            {"instruction": "Write a haiku.", "output": "Leaves fall..."},
            {"instruction": "Sum these:", "input": "2 and 3", "output": "5"},
        ],
    )
    with pytest.raises(DataFormatError, match=r"evol\.jsonl:1: cannot tell the data format"):
        load_examples(str(path))
    rows = load_examples(str(path), question_field="instruction", answer_field="output", input_field="input")
    assert [(e.id, e.question, e.answer) for e in rows] == [
        ("evol:0", "Write a haiku.", "Leaves fall..."),
        ("evol:1", "Sum these:\n\n2 and 3", "5"),
    ]
    named = load_examples(str(path), question_field="instruction", answer_field="output", data_source="evol_instruct")
    assert named[0].data_source == "evol_instruct" and named[0].id == "evol_instruct:0"


def test_malformed_rows_name_file_and_line(tmp_path):
    ok = {"question": "q", "answer": "a #### 1"}
    bad_json = _write_jsonl(tmp_path / "bad.jsonl", [ok, ok, '{"question": "q", "answer": '])
    with pytest.raises(DataFormatError, match=r"bad\.jsonl:3: bad JSON") as info:
        load_examples(str(bad_json))
    assert info.value.line == 3 and info.value.path.endswith("bad.jsonl")
    missing = _write_jsonl(tmp_path / "missing.jsonl", [ok, {"question": "q2"}])
    with pytest.raises(DataFormatError, match=r"missing\.jsonl:2: missing field 'answer'"):
        load_examples(str(missing))
    empty = _write_jsonl(tmp_path / "empty.jsonl", [ok, "", {"question": "  ", "answer": "x #### 2"}])
    with pytest.raises(DataFormatError, match=r"empty\.jsonl:3: empty question"):
        load_examples(str(empty))
    no_hash = _write_jsonl(tmp_path / "nohash.jsonl", [ok, {"question": "q", "answer": "no marker"}])
    with pytest.raises(DataFormatError, match=r"nohash\.jsonl:2: .*####"):
        load_examples(str(no_hash))
    arr = tmp_path / "arr.json"
    arr.write_text('[\n  {"question": "q", "answer": "1"},\n  {"question": "q"}\n]\n')
    with pytest.raises(DataFormatError, match=r"arr\.json:3: missing field 'answer'"):
        load_examples(str(arr))
    # the limit stops reading before a later bad row
    assert len(load_examples(str(bad_json), limit=2)) == 2
    with pytest.raises(DatasetError, match="data file not found"):
        load_examples(str(tmp_path / "absent.jsonl"))


# ------------------------------------------------------------------ hub (mocked)


def test_hub_loading_maps_fields(tmp_path, monkeypatch):
    import datasets

    calls = []
    fake = {
        ("openai/gsm8k", "main", "test"): [{"question": "2+2?", "answer": "2+2=4\n#### 4"}],
        ("HuggingFaceH4/MATH-500", None, "test"): [
            {
                "problem": "x?",
                "solution": "...",
                "answer": "\\frac12",
                "subject": "Algebra",
                "level": 1,
                "unique_id": "test/a/1.json",
            }
        ],
        ("HuggingFaceH4/aime_2024", None, "train"): [
            {"id": 60, "problem": "p1", "solution": "", "answer": "033", "url": "u", "year": "2024"},
            {"id": 61, "problem": "p2", "solution": "", "answer": 7, "url": "u", "year": "2024"},
        ],
    }

    def load_dataset(path, name=None, split=None, **kw):
        calls.append((path, name, split))
        return list(fake[(path, name, split)])

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    monkeypatch.setenv("PASR_DATA_DIR", str(tmp_path))  # no local copies: go to the hub
    [g] = load_examples("gsm8k", split="test")
    assert (g.id, g.answer, g.question) == ("gsm8k:test:0", "4", "2+2?")
    [m] = load_examples("math500")
    assert (m.id, m.answer, m.question) == ("math500:test/a/1.json", "\\frac12", "x?")
    aime = load_examples("aime24", limit=5)
    assert [(e.id, e.answer) for e in aime] == [("aime24:60", "33"), ("aime24:61", "7")]
    assert calls == [
        ("openai/gsm8k", "main", "test"),
        ("HuggingFaceH4/MATH-500", None, "test"),
        ("HuggingFaceH4/aime_2024", None, "train"),
    ]

    fake[("HuggingFaceH4/aime_2024", None, "train")] = [{"id": 1, "problem": "p", "answer": "n/a"}]
    with pytest.raises(DataFormatError, match=r"hub:HuggingFaceH4/aime_2024\[train\]:row 1: .*integer"):
        load_examples("aime24")

    def offline(*a, **kw):
        raise ConnectionError("no internet\nsecond line")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(DatasetError, match="could not load openai/gsm8k") as info:
        load_examples("gsm8k")
    assert "\n" not in str(info.value)


# ------------------------------------------------------------------ synthetic


def test_synthetic_deterministic_and_correct():
    for difficulty in DIFFICULTIES:
        a = generate_problems(40, seed=7, difficulty=difficulty)
        assert a == generate_problems(40, seed=7, difficulty=difficulty)
        assert a != generate_problems(40, seed=8, difficulty=difficulty)
        assert len({p.question for p in a}) == 40
        for p in a:
            assert len(p.steps) == difficulty
            value = p.steps[0].a
            assert str(value) in p.question
            for step in p.steps:
                assert step.a == value
                value = apply_op(step.op, step.a, step.b)
                assert step.result == value and step.text == f"{step.a} {step.op} {step.b} = {value}"
                assert 0 <= value <= MAX_VALUE and 0 < step.b <= MAX_VALUE
                if step.op != "*":
                    assert str(step.b) in p.question
            assert p.answer == str(value)
            assert p.question.rstrip().endswith("?")
    level3 = generate_problems(60, seed=1, difficulty=3)
    mixed = [p for p in level3 if {"+", "-"} <= {s.op for s in p.steps}]
    assert len(mixed) >= 0.9 * len(level3)  # level 3 mixes + and - (rare clamps at 0/199 aside)
    assert any(s.op == "*" for p in level3 for s in p.steps)
    ex = level3[0].as_example()
    assert isinstance(ex, Example) and ex.data_source == "synthetic" and ex.answer == level3[0].answer
    with pytest.raises(ValueError, match="difficulty"):
        generate_problems(1, difficulty=4)


def test_synthetic_train_heldout_disjoint():
    train, held = split_problems(300, 80, seed=0, difficulty=1)
    assert len(train) == 300 and len(held) == 80
    assert not {p.question for p in train} & {p.question for p in held}
    # disjoint whatever the seeds: membership follows the question text
    other_train = generate_problems(300, seed=123, difficulty=1, split="train")
    assert not {p.question for p in other_train} & {p.question for p in held}
    assert all(split_of(p.question) == "test" for p in held)
    via_loader = load_examples("synthetic", split="test", limit=5, seed=0, difficulty=1)
    assert [e.question for e in via_loader] == [p.question for p in held[:5]]
    assert via_loader[0].extra["split"] == "test"


# ------------------------------------------------------------------ verl parquet


def _sample_examples() -> list[Example]:
    return [
        Example("gsm8k:test:0", "gsm8k", "Janet has 3 ducks. How many?", "3", {"split": "test"}),
        Example(
            "synthetic:d1:s0:train:0",
            "synthetic",
            "Mia has 4 marbles. She finds 2 more. How many?",
            "6",
            {"split": "train"},
        ),
    ]


def test_parquet_round_trip(tmp_path):
    import pandas as pd

    system = load_prompt("refine_system")
    path = write_rl_parquet(_sample_examples(), tmp_path / "sub" / "train.parquet", system)
    df = pd.read_parquet(path)
    assert tuple(df.columns) == COLUMNS
    assert list(df["data_source"]) == ["gsm8k", "synthetic"]
    assert list(df["ability"]) == ["math", "math"]
    rows = read_rl_parquet(path)
    for i, (row, ex) in enumerate(zip(rows, _sample_examples())):
        assert row["prompt"] == [{"role": "system", "content": system}, {"role": "user", "content": ex.question}]
        assert row["reward_model"] == {"style": "rule", "ground_truth": ex.answer}
        assert row["extra_info"] == {"index": i, "id": ex.id, "question": ex.question, "split": ex.extra["split"]}
    no_system = read_rl_parquet(write_rl_parquet(_sample_examples()[:1], tmp_path / "p.parquet", None, split="val"))
    assert no_system[0]["prompt"] == [{"role": "user", "content": "Janet has 3 ducks. How many?"}]
    assert no_system[0]["extra_info"]["split"] == "val"
    assert [p.name for p in tmp_path.rglob("*.tmp")] == []


def test_parquet_follows_the_umask(tmp_path):
    """Like every other file the recipe writes: a data set meant for a shared cluster must be
    readable by the other users the umask lets read it (not 0600 from a temp-file helper)."""
    import os

    old = os.umask(0o022)
    try:
        path = write_rl_parquet(_sample_examples(), tmp_path / "shared.parquet", None)
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o644


def test_verl_rlhf_dataset_reads_our_parquet(tmp_path, monkeypatch):
    """verl 0.9.1's RLHFDataset: tokenises every prompt with the chat template to filter long
    ones (a prompt that fails to tokenise is dropped, so the row count checks it), and hands
    the chat to the rollout as raw_prompt (the agent loop builds input_ids from it)."""
    pytest.importorskip("verl")
    import datasets
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    from runtime.model_loading import resolve_model_path

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf_cache"))
    system = load_prompt("refine_system")
    path = write_rl_parquet(_sample_examples(), tmp_path / "train.parquet", system)
    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path("smollm2"))
    config = OmegaConf.create({"max_prompt_length": 1024, "filter_overlong_prompts_workers": 1})
    ds = RLHFDataset(str(path), tokenizer, config)
    assert len(ds) == 2
    row = ds[1]
    assert row["raw_prompt"] == [
        {"role": "system", "content": system},
        {"role": "user", "content": _sample_examples()[1].question},
    ]
    assert row["index"] == 1 and row["extra_info"]["id"] == "synthetic:d1:s0:train:0"
    assert row["reward_model"]["ground_truth"] == "6" and row["data_source"] == "synthetic"
    enc = tokenizer.apply_chat_template(row["raw_prompt"], add_generation_prompt=True, tokenize=True)
    input_ids = enc["input_ids"] if hasattr(enc, "keys") else enc
    assert len(input_ids) > 50 and tokenizer.decode(input_ids).count("Mia has 4 marbles") == 1
    batch = collate_fn([ds[0], ds[1]])
    assert batch["dummy_tensor"].shape[0] == 2 and list(batch["index"]) == [0, 1]
    # the length filter really tokenised the prompts: a tiny limit drops both rows
    short = RLHFDataset(
        str(path), tokenizer, OmegaConf.create({"max_prompt_length": 16, "filter_overlong_prompts_workers": 1})
    )
    assert len(short) == 0


# ------------------------------------------------------------------ CLI


@pytest.mark.parametrize(
    "dataset, extra, n, source",
    [
        ("gsm8k", ["--split", "train", "--limit", "3"], 3, "gsm8k"),
        ("math500", ["--limit", "2"], 2, "math500"),
        ("aime24", ["--limit", "2"], 2, "aime24"),
        ("synthetic", ["--n", "5", "--seed", "1", "--difficulty", "2"], 5, "synthetic"),
        ("countdown", ["--n", "5", "--seed", "1", "--difficulty", "2"], 5, "countdown"),
    ],
)
def test_cli_prepare_writes_parquet(local_data, tmp_path, capsys, dataset, extra, n, source):
    split = extra[extra.index("--split") + 1] if "--split" in extra else DATASETS[dataset].default_split
    out = tmp_path / "out" / f"{dataset}_{split}.parquet"  # --out DIR: DIR/<dataset>_<split>.parquet
    assert pasr_main(["data", "prepare", "--dataset", dataset, *extra, "--out", str(out.parent)]) == 0
    assert f"wrote {n} rows ({source}) to {out}" in capsys.readouterr().out
    rows = read_rl_parquet(out)
    assert len(rows) == n and {r["data_source"] for r in rows} == {source}
    assert rows[0]["prompt"][0] == {"role": "system", "content": load_prompt("refine_system")}


def test_cli_prepare_passes_the_generator_options_to_countdown(tmp_path, capsys):
    """--n/--seed/--difficulty/--split reach the Countdown generator as they reach the synthetic
    one: difficulty is how many numbers a problem gives (data.countdown.LEVELS), the seed picks
    the problems, and the test split is held out (no problem shared with train)."""
    from data.countdown import LEVELS

    def prepare(*args: str) -> list[dict]:
        split = args[args.index("--split") + 1] if "--split" in args else "train"
        out = tmp_path / f"countdown_{split}.parquet"
        assert pasr_main(["data", "prepare", "--dataset", "countdown", *args, "--out", str(tmp_path)]) == 0
        capsys.readouterr()
        return read_rl_parquet(out)

    def problems(rows: list[dict]) -> set[str]:  # ground truth "n1, n2, ... -> target"
        return {r["reward_model"]["ground_truth"] for r in rows}

    for difficulty, level in LEVELS.items():
        rows = prepare("--n", "20", "--seed", "0", "--difficulty", str(difficulty))
        assert len(rows) == 20 and {r["extra_info"]["split"] for r in rows} == {"train"}  # train by default
        assert {len(p.split(" -> ")[0].split(", ")) for p in problems(rows)} == {level.count}
    train = prepare("--n", "200", "--seed", "0", "--difficulty", "2")
    assert problems(prepare("--n", "200", "--seed", "0", "--difficulty", "2")) == problems(train)  # deterministic
    assert problems(prepare("--n", "200", "--seed", "1", "--difficulty", "2")) != problems(train)
    held_out = prepare("--split", "test", "--n", "50", "--seed", "0", "--difficulty", "2")
    assert {r["extra_info"]["split"] for r in held_out} == {"test"} and not problems(held_out) & problems(train)
    assert len(prepare("--limit", "7", "--seed", "3")) == 7  # --n defaults to --limit


def test_cli_preview_and_list(local_data, capsys):
    assert pasr_main(["data", "preview", "--dataset", "gsm8k", "--limit", "2"]) == 0
    out = capsys.readouterr().out
    assert "--- gsm8k:test:0  [gsm8k]" in out and "gold: 18" in out and "gsm8k:test:2" not in out
    assert pasr_main(["data", "preview", "--dataset", "aime24", "--limit", "1", "--jsonl"]) == 0
    assert json.loads(capsys.readouterr().out)["answer"] == "204"
    assert pasr_main(["data", "list"]) == 0
    assert "synthetic" in capsys.readouterr().out


def test_cli_errors_are_one_line(tmp_path, capsys):
    bad = _write_jsonl(tmp_path / "bad.jsonl", [{"question": "q", "answer": "#### 1"}, "{oops"])
    cases = [
        (["--dataset", "gsm9k"], "unknown dataset 'gsm9k'"),
        (["--dataset", str(tmp_path / "absent.jsonl")], "data file not found"),
        (["--dataset", str(bad)], "bad.jsonl:2: bad JSON"),
        (["--dataset", "gsm8k", "--seed", "1"], "--seed: only for --dataset synthetic or countdown"),
        (
            ["--dataset", "math500", "--n", "5", "--difficulty", "2"],
            "--n/--difficulty: only for --dataset synthetic or countdown",
        ),
        (
            ["--dataset", "countdown", "--question-field", "q"],
            "--question-field: only for a data file given as --dataset FILE",
        ),
        (["--dataset", "synthetic", "--system-prompt", "no_such_prompt"], "unknown prompt 'no_such_prompt'"),
    ]
    latin1 = tmp_path / "latin1.jsonl"
    latin1.write_bytes(b'{"question": "2+2", "answer": "4"}\n{"question": "caf\xe9 au lait?", "answer": "4"}\n')
    latin1_json = tmp_path / "latin1.json"
    latin1_json.write_bytes(b'[\n {"question": "caf\xe9?", "answer": "4"}\n]')
    evol = _write_jsonl(tmp_path / "evol.jsonl", [{"instruction": "2+2", "output": "4"}])
    cases += [
        (["--dataset", str(latin1)], "latin1.jsonl:2: not UTF-8 text (byte 0xe9 at column 18)"),
        (["--dataset", str(latin1_json)], "latin1.json:2: not UTF-8 text (byte 0xe9"),
        (["--dataset", str(evol)], "map the fields with --question-field/--answer-field"),
    ]
    for args, message in cases:
        assert pasr_main(["data", "prepare", *args, "--out", str(tmp_path / "o")]) == 2
        err = capsys.readouterr().err
        assert err.startswith("pasr data: error: ") and message in err and err.count("\n") == 1, err
    assert not (tmp_path / "o").exists()
    (tmp_path / "a_file").write_text("x")
    assert (
        pasr_main(["data", "prepare", "--dataset", "synthetic", "--n", "2", "--out", str(tmp_path / "a_file" / "o")])
        == 2
    )
    err = capsys.readouterr().err
    assert f"{tmp_path / 'a_file'} is a file, not a directory" in err and "File exists" not in err
    proc = subprocess.run(
        [sys.executable, "-m", "recipe", "data", "preview", "--dataset", "gsm9k"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    "name, text, message",
    [
        ("eof.jsonl", '{"question": "q', "eof.jsonl:1: bad JSON (Unterminated string starting at column 14)"),
        ("eol.jsonl", '{"question": "q\n', "eol.jsonl:1: bad JSON (Invalid control character at column 16)"),
        ("eof.json", '[\n  {"question": "q', "eof.json:2: bad JSON (Unterminated string starting at column 16)"),
        ("eol.json", '[\n  {"question": "q\n]\n', "eol.json:2: bad JSON (Invalid control character at column 18)"),
    ],
)
def test_bad_json_message_has_no_doubled_word(tmp_path, name, text, message):
    """json's messages "Unterminated string starting at" and "Invalid control character at"
    already end in "at": the column follows without a second one (they read "at at column"),
    in JSONL and in a JSON array alike."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DataFormatError) as info:
        load_examples(str(path))
    assert str(info.value) == f"{tmp_path}/{message}"


def test_text_no_utf8_can_hold_is_named_by_file_and_line(tmp_path, capsys):
    """A lone surrogate escape ("\\ud800") is valid JSON, but no UTF-8 can hold the text: `pasr
    data preview/prepare` crashed printing or writing it. Named by file, line and field in the
    loader (JSONL and a JSON array alike); an escaped pair (an emoji) is an ordinary character."""
    pair = _write_jsonl(tmp_path / "pair.jsonl", ['{"question": "smile \\ud83d\\ude00", "answer": "x #### 1"}'])
    assert load_examples(str(pair))[0].question == "smile \U0001f600"
    lone = _write_jsonl(
        tmp_path / "lone.jsonl",
        [
            {"question": "q", "answer": "#### 1"},
            '{"question": "q", "answer": "#### 1", "meta": {"note": ["ok", "bad \\uDFFF"]}}',
        ],
    )
    with pytest.raises(
        DataFormatError, match=r"lone\.jsonl:2: field 'meta\.note\.1' holds a lone UTF-16 surrogate \(\\udfff\)"
    ):
        load_examples(str(lone))
    arr = tmp_path / "arr.json"
    arr.write_text(
        '[\n  {"question": "q", "answer": "1"},\n  {"question": "\\ud800?", "answer": "2"}\n]\n', encoding="utf-8"
    )
    with pytest.raises(DataFormatError, match=r"arr\.json:3: field 'question' holds a lone UTF-16 surrogate"):
        load_examples(str(arr))
    for command in (["preview"], ["prepare", "--out", str(tmp_path / "o")]):
        assert pasr_main(["data", *command, "--dataset", str(lone)]) == 2
        err = capsys.readouterr().err
        assert (
            err.startswith("pasr data: error: ") and "lone.jsonl:2: field 'meta.note.1'" in err and err.count("\n") == 1
        ), err
    assert not (tmp_path / "o").exists()
