"""The local trainer's held-out set shares no question with its training pool, for every data
source, and the run says how it split them (issue 51, item 1).

A data file used to give both from its first rows: with 40 rows, data.train_size=40 and
data.eval_size=10, every held-out row was in the pool.
"""

from __future__ import annotations

import json
import random

import pytest

from data.examples import DatasetError
from data.heldout_split import question_key, split_train_heldout
from recipe.local_engine.config import load_config
from recipe.local_engine.trainer import LocalPasrTrainer


def _rows(n: int) -> list[dict]:
    return [{"question": f"What is {i} + {i + 1}?", "answer": str(2 * i + 1)} for i in range(n)]


def _write(path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _trainer_data(tmp_path, *overrides):
    """The training pool and held-out set the trainer takes for these overrides."""
    trainer = LocalPasrTrainer(load_config(overrides=list(overrides)), tmp_path / "run")
    trainer._load_data()
    return trainer


def _questions(examples) -> set[str]:
    return {question_key(e.question) for e in examples}


def test_a_data_file_holds_out_rows_it_does_not_train_on(tmp_path):
    source = _write(tmp_path / "qa.jsonl", _rows(40))
    t = _trainer_data(tmp_path, f"data.source={source}", "data.train_size=40", "data.eval_size=10")
    assert len(t.heldout) == 10 and not _questions(t.heldout) & _questions(t.train)
    assert len(t.train) == 30  # the other rows, all of them trained on
    assert t.data_split["method"] == "hash" and (t.data_split["train"], t.data_split["heldout"]) == (30, 10)


def test_the_split_follows_content_not_position(tmp_path):
    rows = _rows(40)
    first = split_train_heldout(_write(tmp_path / "a.jsonl", rows), train_size=40, eval_size=10)
    random.Random(0).shuffle(rows)
    shuffled = split_train_heldout(_write(tmp_path / "b.jsonl", rows), train_size=40, eval_size=10)
    assert _questions(first.heldout) == _questions(shuffled.heldout)
    assert first.record["heldout_questions_sha256"] == shuffled.record["heldout_questions_sha256"]


def test_a_copy_of_a_held_out_question_is_not_trained_on(tmp_path):
    rows = _rows(20)
    held = split_train_heldout(_write(tmp_path / "a.jsonl", rows), train_size=40, eval_size=3).heldout
    copy = {
        "question": "  " + held[0].question.upper().replace(" ", "\n ") + " ",
        "answer": "0",
    }  # same question, other layout
    split = split_train_heldout(_write(tmp_path / "b.jsonl", rows + [copy]), train_size=40, eval_size=3)
    assert _questions(split.heldout) == _questions(held) and not _questions(split.heldout) & _questions(split.train)
    assert split.record["dropped_from_train"] == 1 and split.record["dropped_ids"] == ["b:20"]


def test_a_file_too_small_to_hold_out_and_train_is_refused_in_one_line(tmp_path):
    source = _write(tmp_path / "qa.jsonl", _rows(5) + _rows(5))  # 5 distinct questions
    with pytest.raises(DatasetError) as err:
        _trainer_data(tmp_path, f"data.source={source}", "data.eval_size=5")
    assert str(err.value) == (
        f"data.source: {source} holds 5 distinct questions, and data.eval_size=5 would hold out all of them, "
        "leaving none to train on (the held-out set shares no question with the training pool); lower "
        "data.eval_size or add rows"
    )


def test_a_named_set_trained_on_its_test_split_is_split_by_content(shared_data):
    split = split_train_heldout("math500", train_size=500, eval_size=50, split="test")
    assert len(split.heldout) == 50 and len(split.train) == 450
    assert not _questions(split.heldout) & _questions(split.train) and split.record["method"] == "hash"


def test_a_training_split_loses_the_rows_its_test_split_holds(tmp_path, monkeypatch):
    """GSM8K's train and test files: a training row whose question is a test question (here
    with other spacing) is dropped from the pool; the held-out rows stay what they were."""
    test = [{"question": f"Tom has {i} apples. How many?", "answer": f"so #### {i}"} for i in range(4)]
    train = [{"question": f"Ann has {i} pears. How many?", "answer": f"so #### {i}"} for i in range(6)]
    train.insert(2, {"question": "Tom  has 1 apples.\nHow many?", "answer": "#### 1"})
    _write(tmp_path / "gsm8k_test.jsonl", test)
    _write(tmp_path / "gsm8k_train.jsonl", train)
    monkeypatch.setenv("PASR_DATA_DIR", str(tmp_path))
    t = _trainer_data(tmp_path, "data.source=gsm8k", "data.eval_size=4", "rollout.queries_per_step=2")
    assert [e.question for e in t.heldout] == [r["question"] for r in test]
    assert len(t.train) == 6 and not _questions(t.heldout) & _questions(t.train)
    assert t.data_split["dropped_from_train"] == 1 and t.data_split["dropped_ids"] == ["gsm8k:train:2"]


@pytest.mark.parametrize("source, judge", [("synthetic", "rule"), ("countdown", "countdown")])
def test_generated_sets_keep_their_held_out_problems(tmp_path, source, judge):
    """The generators' held-out sets are the problems the published figures were scored on
    (split test of data.seed + 1); the training pool shares none of them."""
    from data.generated_sets import heldout_seed
    from data.loaders import load_examples

    t = _trainer_data(
        tmp_path, f"data.source={source}", f"pasr.judge.kind={judge}", "data.train_size=2000", "data.eval_size=300"
    )
    cfg = t.cfg.data
    assert t.heldout == load_examples(
        source, split="test", limit=300, seed=heldout_seed(cfg.seed), difficulty=cfg.difficulty
    )
    assert len(t.train) == 2000 and not _questions(t.heldout) & _questions(t.train)
    assert t.data_split["method"] == "splits" and t.data_split["dropped_from_train"] == 0


def test_a_generated_training_problem_that_is_held_out_is_dropped(tmp_path, monkeypatch):
    """Were a generator's two splits ever to share a question, the training copy goes."""
    import data.heldout_split as heldout_split

    real = heldout_split.load_examples

    def overlapping(source, split=None, limit=None, **options):
        rows = real(source, split=split, limit=limit, **options)
        return rows if split == "test" else [real(source, split="test", limit=1, seed=options["seed"] + 1)[0], *rows]

    monkeypatch.setattr(heldout_split, "load_examples", overlapping)
    split = split_train_heldout("synthetic", train_size=20, eval_size=5, seed=3)
    assert len(split.train) == 20 and not _questions(split.heldout) & _questions(split.train)
    assert split.record["dropped_from_train"] == 1
