"""The rollout record format: round trip, unknown fields kept, corrupt lines named by file:line."""

import pytest

from data.records import RecordFormatError, RolloutRecord, iter_records, write_records


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
