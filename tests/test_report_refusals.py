"""``--report RUN_DIR`` of ``benchmarks.gpu_check`` and ``benchmarks.gpu_scale`` (issue 63, class 3):
a directory that does not exist, holds no run or only its settings, or whose JSON is cut off or
odd is refused in one line with exit 2, and the ``--out`` file (by default the committed
``benchmarks/results/*.json`` that ``pasr check`` reads) is left as it was. A directory that
does not exist used to write an all-null result over it and exit 0; an empty one reported "ok"."""

from __future__ import annotations

import json

import pytest

from benchmarks import gpu_check, gpu_scale

COMMITTED = '{"the": "committed result"}\n'


def _dirs(tmp_path):
    """name -> (run directory, the words the refusal must say)."""
    empty = tmp_path / "empty"
    empty.mkdir()
    cut = tmp_path / "cut"
    cut.mkdir()
    (cut / "settings.json").write_text('{"part": "all", "ste')
    (cut / "state.json").write_text("{}")
    odd = tmp_path / "odd"
    odd.mkdir()
    (odd / "settings.json").write_text("[1, 2]")
    (odd / "state.json").write_text("{}")
    wrong = tmp_path / "wrong"
    wrong.mkdir()
    (wrong / "settings.json").write_text('{"seeds": 5, "part": "all"}')
    (wrong / "state.json").write_text('{"parts": {"warmups": 3}}')
    only_settings = tmp_path / "only_settings"
    only_settings.mkdir()
    (only_settings / "settings.json").write_text('{"part": "all", "seeds": [1]}')
    cut_state = tmp_path / "cut_state"
    cut_state.mkdir()
    (cut_state / "settings.json").write_text('{"part": "all", "seeds": [1]}')
    (cut_state / "state.json").write_text('{"phases": {"warm')
    return {
        "missing": (tmp_path / "no_such_dir", "no such directory"),
        "empty": (empty, "no {name} run found there"),
        "cut settings": (cut, f"{cut / 'settings.json'}: not readable JSON"),
        "odd settings": (odd, f"{odd / 'settings.json'}: holds a JSON list"),
        "wrong types": (wrong, "its files do not hold what a {name} run writes"),
        "only settings": (only_settings, "wrote its settings.json and nothing else"),
        "cut state": (cut_state, f"{cut_state / 'state.json'}: not readable JSON"),
    }


@pytest.mark.parametrize("module", [gpu_check, gpu_scale], ids=["gpu_check", "gpu_scale"])
@pytest.mark.parametrize(
    "case", ["missing", "empty", "cut settings", "odd settings", "wrong types", "only settings", "cut state"]
)
def test_report_of_no_run_is_one_line_and_writes_nothing(tmp_path, capsys, module, case):
    name = module.__name__.rsplit(".", 1)[1]
    root, needle = _dirs(tmp_path)[case]
    out = tmp_path / "results" / f"{name}.json"
    out.parent.mkdir()
    out.write_text(COMMITTED)
    assert module.main(["--report", str(root), "--out", str(out)]) == 2
    std = capsys.readouterr()
    assert std.out == "" and std.err.count("\n") == 1 and "Traceback" not in std.err, std.err
    assert std.err.startswith(f"{name}: ") and needle.format(name=name) in std.err, std.err
    assert out.read_text() == COMMITTED


def test_a_started_run_is_still_reported(tmp_path, capsys):
    """The refusals are of what holds no run: a run cut off after its first phase is reported (FAIL)."""
    root = tmp_path / "run"
    root.mkdir()
    (root / "settings.json").write_text(json.dumps({"part": "all", "steps": 4, "stop_at": 2, "device": "cpu"}))
    (root / "state.json").write_text(json.dumps({"parts": {"first": {"wall_s": 12.0}}, "phases": {}}))
    out = tmp_path / "gpu_check.json"
    assert gpu_check.main(["--report", str(root), "--out", str(out)]) == 1
    assert "==== gpu_check ====" in capsys.readouterr().out
    assert json.loads(out.read_text())["wall_s"] == 12.0
