"""Extending a finished local run (``pasr train --resume RUN trainer.steps=MORE``) evaluates the new
end; the earlier end's per-sample evaluation used to be replaced without a word. It is kept beside
it as ``eval/final_step_NNNNNN.jsonl`` (docs/local_engine.md); the same end evaluated again (a
final evaluation cut off and redone) still replaces it. The whole extension runs in
tests/test_local_resume.py (slow)."""

from __future__ import annotations

import json

from data.records import RolloutRecord
from recipe.local_engine.run_io import dump_eval


def _records(step: int, answer: str) -> list[RolloutRecord]:
    return [
        RolloutRecord("r", f"q{i}", "synthetic", "refine", "q", answer, 3, True, "ok", 1, answer, "5", 1.0, step=step)
        for i in range(2)
    ]


def _steps(path) -> set[int]:
    return {json.loads(line)["step"] for line in path.read_text().splitlines()}


def test_the_earlier_end_is_kept_with_its_step(tmp_path, capsys):
    dump_eval(tmp_path, "final", _records(7, "old"))
    dump_eval(tmp_path, "final", _records(9, "new"))
    kept = tmp_path / "eval" / "final_step_000007.jsonl"
    assert _steps(kept) == {7} and '"response": "old"' in kept.read_text()
    assert _steps(tmp_path / "eval" / "final.jsonl") == {9}
    assert f"kept as {kept}" in capsys.readouterr().err
    dump_eval(tmp_path, "final", _records(9, "again"))  # the same end: replaced, nothing more kept
    assert sorted(p.name for p in (tmp_path / "eval").iterdir()) == ["final.jsonl", "final_step_000007.jsonl"]
    assert '"again"' in (tmp_path / "eval" / "final.jsonl").read_text()


def test_other_evaluations_are_replaced_as_before(tmp_path):
    dump_eval(tmp_path, "warmup", _records(2, "old"))
    dump_eval(tmp_path, "warmup", _records(4, "new"))
    assert [p.name for p in (tmp_path / "eval").iterdir()] == ["warmup.jsonl"]
