"""The rollout record format: round trip, unknown fields kept, corrupt lines (bad JSON, missing fields,
wrong types) named by file:line."""

import json

import pytest

from data.records import RecordFormatError, RolloutRecord, iter_record_dicts, iter_records, validate_record, write_records


def _rec(i: int) -> RolloutRecord:
    return RolloutRecord("run", f"q{i}", "synthetic", "refine", "1+1?", "<think>2</think><answer>2</answer>", 9,
                         True, "ok", 0, "2", "2", 1.0, step=3)


def test_round_trip_and_unknown_fields(tmp_path):
    path = tmp_path / "r.jsonl"
    assert write_records(path, [_rec(0), _rec(1)]) == 2
    with path.open("a") as fh:
        fh.write('{"run_id": "run", "query_id": "q2", "data_source": "s", "variant": "plain", "prompt": "p", '
                 '"response": "r", "response_tokens": 1, "format_ok": false, "format_reason": "missing_think", '
                 '"n_refine": 0, "extracted_answer": null, "gold": "2", "acc": null, "new_field": 7}\n')
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
    bad = ['"acc": "high"', '"step": "3"', '"n_refine": true', '"variant": ["refine"]', '"response": null',
           '"sample_index": 1.5', '"refine_outcome": {"x": 1}']
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join([good] + [good[:-1] + ", " + b + "}" for b in bad]) + "\n")
    errors = []
    assert [r.query_id for r in iter_records(path, errors=errors)] == ["q0"]
    assert [e.line_no for e in errors] == [2, 3, 4, 5, 6, 7, 8]
    assert [e.reason.split("(", 1)[1] for e in errors[:3]] == [
        "field 'acc' is not a number or null)", "field 'step' is not an integer or null)", "field 'n_refine' is not an integer)"]
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
