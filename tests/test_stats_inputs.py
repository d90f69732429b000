"""`pasr stats` on bad input: corrupt, oversize and unknown-version lines (counted, a bounded sample
named; --strict stops at the first), files and paths with no record, an --out under a file.
The records are tests/stats_records.py's; the ``dumps`` fixture is in tests/conftest.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pasr_cli import main
from tests.stats_records import train_records, write


def test_strict_mode_stops_at_first_corrupt_line(dumps, tmp_path, capsys):
    rc = main(["stats", str(dumps / "runA"), "--out", str(tmp_path / "o"), "--strict"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.count("\n") == 0
    assert "step_000001.jsonl:2" in err and "Traceback" not in err
    assert not (tmp_path / "o" / "stats.json").exists()


def test_missing_path_and_empty_input(tmp_path, capsys):
    assert main(["stats", str(tmp_path / "nope"), "--out", str(tmp_path / "o")]) == 2
    assert "no such file" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["stats", str(tmp_path / "empty"), "--out", str(tmp_path / "o")]) == 2
    assert "no rollout record files" in capsys.readouterr().err


@pytest.mark.parametrize("content", [b"", b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe binary\n\x00\x01"])
def test_input_without_a_record_is_an_error(tmp_path, capsys, content):
    path = tmp_path / "dump.jsonl"
    path.write_bytes(content)
    assert main(["stats", str(path), "--out", str(tmp_path / "o"), "--no-plots"]) == 2
    err = capsys.readouterr().err
    assert "no rollout records in 1 file(s)" in err and err.count("\n") == 1 and "Traceback" not in err
    assert ("empty" if not content else "corrupt line(s)") in err
    assert not (tmp_path / "o" / "stats.json").exists()


def test_out_under_a_file_names_the_file(dumps, tmp_path, capsys):
    (tmp_path / "f").write_text("x")
    assert main(["stats", str(dumps / "runA"), "--out", str(tmp_path / "f" / "o"), "--no-plots"]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'f'} is a file, not a directory" in err and err.count("\n") == 1


def test_non_utf8_line_is_reported_not_fatal(tmp_path):
    step0, _ = train_records()
    path = tmp_path / "d" / "rollouts.jsonl"
    path.parent.mkdir()
    path.write_bytes(step0[0].to_json().encode() + b"\n\xff\xfe{bad}\n" + step0[2].to_json().encode() + b"\n")
    assert main(["stats", str(path), "--out", str(tmp_path / "o"), "--no-plots"]) == 0
    s = json.loads((tmp_path / "o" / "stats.json").read_text())
    assert s["inputs"]["n_records"] == 2 and s["corrupt_lines"]["first"][0]["line"] == 2


def test_wrong_field_types_are_corrupt_lines(tmp_path):
    step0, _ = train_records()
    good = json.loads(step0[0].to_json())
    bad = [
        dict(good, acc="high"),
        dict(good, step="3"),
        dict(good, variant=["refine"]),
        dict(good, response=None),
        dict(good, n_refine=True),
        dict(good, refine_outcome={"x": 1}),
    ]
    path = tmp_path / "rollouts.jsonl"
    path.write_text("\n".join(json.dumps(o) for o in [good] + bad) + "\n")
    assert main(["stats", str(path), "--out", str(tmp_path / "o"), "--no-plots"]) == 0
    s = json.loads((tmp_path / "o" / "stats.json").read_text())
    assert s["inputs"]["n_records"] == 1 and s["corrupt_lines"]["count"] == 6
    assert [e["line"] for e in s["corrupt_lines"]["first"]] == [2, 3, 4, 5, 6, 7]
    assert "'acc'" in s["corrupt_lines"]["first"][0]["reason"]


def test_unknown_schema_version_is_refused_strict_and_warned_otherwise(tmp_path, capsys):
    """Records of a schema version this pasr does not know are not read as if they were the
    current one: --strict stops on the first (exit 2, file:line), otherwise they are skipped,
    counted apart from corrupt lines and named in a warning."""
    from data.records import RECORD_VERSION

    step0, _ = train_records()
    newer = json.loads(step0[1].to_json()) | {"version": RECORD_VERSION + 1}
    path = tmp_path / "rollouts.jsonl"
    write(path, [step0[0], json.dumps(newer), "{not json", step0[2]])
    capsys.readouterr()
    assert main(["stats", str(path), "--out", str(tmp_path / "s"), "--no-plots", "--strict"]) == 2
    err = capsys.readouterr().err
    assert f"{path}:2: " in err and f"schema version {RECORD_VERSION + 1}" in err and err.count("\n") == 1
    assert main(["stats", str(path), "--out", str(tmp_path / "o"), "--no-plots"]) == 0
    captured = capsys.readouterr()
    assert "warning: 1 record(s) of an unknown schema version" in captured.err and f"{path}:2" in captured.err
    s = json.loads((tmp_path / "o" / "stats.json").read_text())
    assert s["inputs"]["n_records"] == 2
    assert s["corrupt_lines"]["count"] == 2 and s["corrupt_lines"]["unknown_version"] == 1
    assert "unknown schema version" in (tmp_path / "o" / "report.md").read_text()


def test_corrupt_lines_are_kept_as_a_bounded_sample(tmp_path, monkeypatch):
    """However much of the input is corrupt, `pasr stats` holds the first MAX_CORRUPT_LISTED
    errors and a count, not one object per bad line (a 200 MB random blob was ~0.5 GB of them)."""
    import argparse

    from eval.stats import cli

    monkeypatch.setattr(cli, "MAX_CORRUPT_LISTED", 7)
    step0, _ = train_records()
    path = tmp_path / "rollouts.jsonl"
    write(path, [step0[0]] + ["{not json"] * 500)
    args = argparse.Namespace(
        paths=[str(path)], top_k=1, examples=1, correct_at=None, seed=0, strict=False, progress="off"
    )
    _, col, errors, _, _ = cli._collect(args)
    assert col.n_records == 1 and errors.count == 500 and len(errors.first) == 7
    assert main(["stats", str(path), "--out", str(tmp_path / "o"), "--no-plots"]) == 0
    c = json.loads((tmp_path / "o" / "stats.json").read_text())["corrupt_lines"]
    assert c["count"] == 500 and [e["line"] for e in c["first"]] == list(range(2, 9))


def test_lines_too_long_for_a_record_are_corrupt_lines_everywhere(tmp_path, monkeypatch):
    """A line over MAX_LINE_BYTES is never read whole, wherever `pasr stats` meets it: first in a
    dump found in a directory (the file is still read as a dump), or in a metrics.jsonl."""
    import data.records as records

    monkeypatch.setattr(records, "MAX_LINE_BYTES", 2000)
    step0, _ = train_records()
    run = tmp_path / "run"
    write(run / "rollouts" / "step_000000.jsonl", ['{"response": "' + "x" * 5000 + '"}', step0[0]])
    (run / "metrics.jsonl").write_text('{"step": 0, "a": 1}\n{"step": 1, "pad": "' + "y" * 5000 + '"}\n')
    assert main(["stats", str(run), "--out", str(tmp_path / "o"), "--no-plots"]) == 0
    s = json.loads((tmp_path / "o" / "stats.json").read_text())
    assert s["inputs"]["n_records"] == 1 and s["corrupt_lines"]["count"] == 2
    assert [(Path(e["file"]).name, e["line"], e["reason"]) for e in s["corrupt_lines"]["first"]] == [
        ("step_000000.jsonl", 1, "line longer than 2000 bytes: not a rollout record"),
        ("metrics.jsonl", 2, "corrupt metrics line (line longer than 2000 bytes)"),
    ]
