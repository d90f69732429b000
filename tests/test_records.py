"""The rollout record format: round trip, unknown fields kept, corrupt lines (bad JSON, missing fields,
wrong types) named by file:line."""

import json

import pytest

from data.records import (
    RecordFormatError,
    RolloutRecord,
    iter_record_dicts,
    iter_records,
    validate_record,
    write_records,
)


def _rec(i: int) -> RolloutRecord:
    return RolloutRecord(
        "run",
        f"q{i}",
        "synthetic",
        "refine",
        "1+1?",
        "<think>2</think><answer>2</answer>",
        9,
        True,
        "ok",
        0,
        "2",
        "2",
        1.0,
        step=3,
    )


def test_round_trip_and_unknown_fields(tmp_path):
    path = tmp_path / "r.jsonl"
    assert write_records(path, [_rec(0), _rec(1)]) == 2
    with path.open("a") as fh:
        fh.write(
            '{"run_id": "run", "query_id": "q2", "data_source": "s", "variant": "plain", "prompt": "p", '
            '"response": "r", "response_tokens": 1, "format_ok": false, "format_reason": "missing_think", '
            '"n_refine": 0, "extracted_answer": null, "gold": "2", "acc": null, "new_field": 7}\n'
        )
    recs = list(iter_records(path, strict=True))
    assert [r.query_id for r in recs] == ["q0", "q1", "q2"]
    assert recs[0] == _rec(0) and recs[2].acc is None and recs[2].extra["new_field"] == 7


def test_corrupt_lines_are_reported_with_file_and_line(tmp_path):
    path = tmp_path / "r.jsonl"
    write_records(path, [_rec(0)])
    with path.open("ab") as fh:
        fh.write(b"{not json\n")
        fh.write(b"\xff\xfe\n")
        fh.write(b'{"run_id": "x"}\n')
    write_records(path, [_rec(4)])
    errors = []
    assert [r.query_id for r in iter_records(path, errors=errors)] == ["q0", "q4"]
    assert [e.line_no for e in errors] == [2, 3, 4] and all(str(path) in str(e) for e in errors)
    with pytest.raises(RecordFormatError, match=r"r.jsonl:2"):
        list(iter_records(path, strict=True))


def test_wrong_field_types_are_corrupt_lines(tmp_path):
    """A field read as a number or a counter key with the wrong type is a corrupt line, named."""
    good = _rec(0).to_json()
    bad = [
        '"acc": "high"',
        '"step": "3"',
        '"n_refine": true',
        '"variant": ["refine"]',
        '"response": null',
        '"sample_index": 1.5',
        '"refine_outcome": {"x": 1}',
    ]
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join([good] + [good[:-1] + ", " + b + "}" for b in bad]) + "\n")
    errors = []
    assert [r.query_id for r in iter_records(path, errors=errors)] == ["q0"]
    assert [e.line_no for e in errors] == [2, 3, 4, 5, 6, 7, 8]
    assert [e.reason.split("(", 1)[1] for e in errors[:3]] == [
        "field 'acc' is not a number or null)",
        "field 'step' is not an integer or null)",
        "field 'n_refine' is not an integer)",
    ]
    with pytest.raises(TypeError, match="missing field"):
        validate_record({"run_id": "x"})
    assert validate_record(json.loads(good)) == json.loads(good)


def test_record_dicts_stream_validated_dicts_and_count_bytes(tmp_path):
    path = tmp_path / "r.jsonl"
    write_records(path, [_rec(0), _rec(1)])
    with path.open("a") as fh:
        fh.write("\n[1, 2]\n")
    seen, errors = [], []
    dicts = list(iter_record_dicts(path, errors=errors, on_bytes=seen.append))
    assert [d["query_id"] for d in dicts] == ["q0", "q1"] and isinstance(dicts[0], dict)
    assert [e.line_no for e in errors] == [4] and "not a JSON object" in errors[0].reason
    assert sum(seen) == path.stat().st_size
    with pytest.raises(RecordFormatError, match=r"r.jsonl:4"):
        list(iter_record_dicts(path, strict=True))


def test_unknown_schema_version_is_refused_strict_and_counted_otherwise(tmp_path):
    """A record of a schema version this reader does not know may mean other things by the same
    field names: --strict refuses it, otherwise it is skipped and counted apart from corrupt
    lines. A record without ``version`` is the current one (the dataclass default)."""
    from data.records import RECORD_VERSION, ErrorSample

    current = json.loads(_rec(0).to_json())
    unversioned = {k: v for k, v in current.items() if k != "version"}
    path = tmp_path / "r.jsonl"
    lines = [
        current,
        dict(current, version=RECORD_VERSION + 1),
        unversioned,
        dict(current, version="1"),
        dict(current, version=True),
    ]
    path.write_text("".join(json.dumps(o) + "\n" for o in lines) + "{not json\n")
    with pytest.raises(RecordFormatError, match=rf"r.jsonl:2: .*schema version {RECORD_VERSION + 1}\b"):
        list(iter_record_dicts(path, strict=True))
    errors = ErrorSample()
    assert len(list(iter_record_dicts(path, errors=errors))) == 2
    assert (errors.count, errors.unknown_version) == (4, 3)
    assert [e.line_no for e in errors.first] == [2, 4, 5, 6]
    assert [e.version for e in errors.first[:3]] == [RECORD_VERSION + 1, "1", True]


def test_read_errors_are_a_bounded_sample_with_short_reasons(tmp_path):
    """Corrupt input costs memory in proportion to the sample kept, not to the lines read: the
    first ``keep`` errors and a count of all, each reason cut short however long the line."""
    from data.records import MAX_REASON_CHARS, ErrorSample

    giant = dict(json.loads(_rec(0).to_json()), version="v" * 200_000)
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(giant) + "\n" + "{not json\n" * 1000 + _rec(1).to_json() + "\n")
    errors = ErrorSample(keep=5)
    assert [d["query_id"] for d in iter_record_dicts(path, errors=errors)] == ["q1"]
    assert errors.count == 1001 and len(errors.first) == 5
    assert [e.line_no for e in errors.first] == [1, 2, 3, 4, 5]
    assert all(len(e.reason) <= MAX_REASON_CHARS for e in errors.first)
    assert len(str(errors.first[0])) < MAX_REASON_CHARS + len(str(path)) + 20
    with pytest.raises(RecordFormatError) as info:
        list(iter_record_dicts(path, strict=True))
    assert len(str(info.value)) < MAX_REASON_CHARS + len(str(path)) + 20


def test_a_line_too_long_for_a_record_is_skipped_without_being_held(tmp_path, monkeypatch):
    """A line over MAX_LINE_BYTES (a binary blob, a runaway write) is one corrupt line, read past
    in chunks: reading a 200 MB line whole took over three times its size. The lines after it
    keep their numbers, and the bytes of all of them are counted for the progress bar."""
    import data.records as records

    monkeypatch.setattr(records, "MAX_LINE_BYTES", 1000)
    long_record = _rec(1)
    long_record.response = "x" * 5000  # valid, but no rollout record is that long here
    path = tmp_path / "r.jsonl"
    write_records(path, [_rec(0), long_record, _rec(2)])
    seen, errors = [], records.ErrorSample()
    assert [d["query_id"] for d in iter_record_dicts(path, errors=errors, on_bytes=seen.append)] == ["q0", "q2"]
    assert [(e.line_no, e.reason) for e in errors.first] == [(2, "line longer than 1000 bytes: not a rollout record")]
    assert sum(seen) == path.stat().st_size
    with pytest.raises(RecordFormatError, match=r"r.jsonl:2: line longer than 1000 bytes"):
        list(iter_records(path, strict=True))
