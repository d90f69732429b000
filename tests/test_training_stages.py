"""The learning-signal benchmarks' shared stages: reusing a finished warm-up, reading a phase's steps, trends."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from benchmarks.training_stages import can_reuse_warmup, phase_steps, prepare_dirs, trends, warmup_stage

CFG = SimpleNamespace(warmup=SimpleNamespace(steps=80))


def _finished_warmup(d, wall_s=None):
    (d / "checkpoints" / "step_000080").mkdir(parents=True)
    (d / "eval").mkdir()
    for name in ("base.jsonl", "warmup.jsonl"):
        (d / "eval" / name).write_text("{}\n")
    if wall_s is not None:
        (d / "stage.json").write_text(json.dumps({"wall_s": wall_s}))


def test_a_finished_warmup_stage_is_reused_only_when_asked_and_complete(tmp_path, capsys):
    d = tmp_path / "warmup"
    _finished_warmup(d, wall_s=1234.5)
    assert can_reuse_warmup(True, d, CFG)
    assert not can_reuse_warmup(False, d, CFG)
    assert warmup_stage(CFG, d, reuse=True) == (str(d / "checkpoints" / "step_000080"), 1234.5)
    (d / "eval" / "warmup.jsonl").unlink()  # interrupted during the warm-up evaluation
    assert not can_reuse_warmup(True, d, CFG)
    assert "no finished warm-up stage" in capsys.readouterr().out
    other = SimpleNamespace(warmup=SimpleNamespace(steps=40))  # a different warm-up length is not this stage
    (d / "eval" / "warmup.jsonl").write_text("{}\n")
    assert not can_reuse_warmup(True, d, other)


def test_a_reused_stage_without_a_recorded_time_reports_none(tmp_path):
    d = tmp_path / "warmup"
    _finished_warmup(d)
    assert warmup_stage(CFG, d, reuse=True)[1] is None


def test_reusing_the_warmup_clears_what_an_interrupted_run_left_in_the_other_stages(tmp_path):
    """--reuse-warmup is for an interrupted benchmark, whose method and control directories are
    not empty: they are rerun whole. Without a kept stage nothing is deleted unasked."""
    _finished_warmup(tmp_path / "warmup")
    (tmp_path / "pasr").mkdir()
    (tmp_path / "pasr" / "metrics.jsonl").write_text("{}\n")
    with pytest.raises(FileExistsError, match="not empty"):
        prepare_dirs(tmp_path, ("warmup", "pasr", "control"))
    assert (tmp_path / "pasr" / "metrics.jsonl").exists()
    dirs = prepare_dirs(tmp_path, ("warmup", "pasr", "control"), keep=("warmup",))
    assert list(dirs["pasr"].iterdir()) == [] and dirs["control"].is_dir()
    assert (tmp_path / "warmup" / "eval" / "base.jsonl").exists()  # the kept stage is untouched


def test_a_finished_pair_is_reused_only_when_both_evaluated_and_timed(tmp_path, capsys):
    """learning_signal --reuse-pair keeps PASR and the control only when both were evaluated and
    the pair's wall time was written; the paper row alone is rerun."""
    from benchmarks.learning_signal import pair_done

    pair_file = tmp_path / "pair.json"
    for name, dump in (("pasr", "final.jsonl"), ("control", "control.jsonl")):
        (tmp_path / name / "eval").mkdir(parents=True)
        (tmp_path / name / "eval" / dump).write_text("{}\n")
    assert not pair_done(tmp_path, pair_file)  # no wall time: the pair did not finish in a benchmark
    assert "no finished PASR / control pair" in capsys.readouterr().out
    pair_file.write_text(json.dumps({"wall_s": 3462}))
    assert pair_done(tmp_path, pair_file)
    (tmp_path / "control" / "eval" / "control.jsonl").unlink()  # stopped before the control's evaluation
    assert not pair_done(tmp_path, pair_file)
    _finished_warmup(tmp_path / "warmup")
    (tmp_path / "paper" / "eval").mkdir(parents=True)
    dirs = prepare_dirs(tmp_path, ("warmup", "pasr", "paper", "control"), keep=("warmup", "pasr", "control"))
    assert list(dirs["paper"].iterdir()) == [] and (tmp_path / "pasr" / "eval" / "final.jsonl").exists()


def _running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's zombie may wait for a reaper that never comes)."""
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split()[0] not in ("Z", "X")
    except (FileNotFoundError, IndexError):
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_killed_benchmark_takes_its_stage_processes_with_it():
    """A benchmark's method and control run in spawned processes; killing the benchmark (even with
    SIGKILL) must not leave them writing into run directories a rerun recreates."""
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; from benchmarks.training_stages import spawn; "
            "p = spawn(time.sleep, 120); print(p.pid, flush=True); time.sleep(120)",
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    child = int(parent.stdout.readline())
    assert _running(child)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 30
    while _running(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = _running(child)
    if alive:
        os.kill(child, signal.SIGKILL)
    assert not alive


def test_phase_steps_and_trends(tmp_path):
    lines = [{"step": 80, "phase": "warmup", "x": 9.0}] + [
        {"step": 80 + i, "phase": "rrr", "x": float(i)} for i in range(1, 7)
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in lines) + "\n")
    steps = phase_steps(tmp_path, "rrr")
    assert [m["step"] for m in steps] == list(range(81, 87))
    assert trends(steps, ("x",)) == {"x": {"first_third": pytest.approx(1.5), "last_third": pytest.approx(5.5)}}
    assert trends([], ("x",)) == {}
    assert trends(steps[:1], ("x",)) == {"x": {"first_third": 1.0, "last_third": 1.0}}


def _dump(path: Path, right: list[bool]) -> None:
    """An evaluation dump: one refine-prompt answer per question, right or wrong as given."""
    from data.records import REFINE, RolloutRecord, write_records
    from rewards.format import check_format

    path.parent.mkdir(parents=True, exist_ok=True)
    records = []
    for i, ok in enumerate(right):
        response = f"<think>{i} + 1 = {i + 1}.</think><answer>{i + 1 if ok else 0}</answer>"
        fmt = check_format(response)
        records.append(
            RolloutRecord(
                run_id="t",
                query_id=f"q{i}",
                data_source="synthetic",
                variant=REFINE,
                prompt="?",
                response=response,
                response_tokens=len(response),
                format_ok=fmt.ok,
                format_reason=fmt.reason,
                n_refine=fmt.n_refine,
                extracted_answer=str(i + 1 if ok else 0),
                gold=str(i + 1),
                acc=1.0 if ok else 0.0,
            )
        )
    write_records(path, records, append=False)


def test_report_only_rebuilds_the_result_from_a_finished_run(tmp_path):
    """--report-only trains nothing: rows, paired sign tests and trends come from the run's dumps,
    and the machine from the run's machine.json (a GPU run read back here), not from this one."""
    from benchmarks.learning_signal import MACHINE, main

    n = 10
    dumps = {
        "warmup/eval/base.jsonl": [False] * n,
        "warmup/eval/warmup.jsonl": [True] * 4 + [False] * 6,
        "pasr/eval/final.jsonl": [True] * 9 + [False],
        "paper/eval/final.jsonl": [False] * n,
        "control/eval/control.jsonl": [False] + [True] * 5 + [False] * 3 + [True],
    }
    for rel, right in dumps.items():
        _dump(tmp_path / rel, right)
    (tmp_path / "pasr" / "metrics.jsonl").write_text(
        "".join(
            json.dumps(
                {
                    "step": 160 + i,
                    "phase": "pasr",
                    "pasr/refine_rate": i / 3,
                    "pasr/acc_refine": 0.5,
                    "pasr/acc_plain": 0.4,
                    "pasr/refine_fix_rate": 0.1,
                    "pasr/empty_refine_rate": 0.0,
                }
            )
            + "\n"
            for i in range(1, 4)
        )
    )
    (tmp_path / "control" / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": 160 + i, "phase": "control"}) + "\n" for i in range(1, 8))
    )
    (tmp_path / "pair.json").write_text(json.dumps({"wall_s": 191.5}))
    (tmp_path / "warmup" / "stage.json").write_text(json.dumps({"wall_s": 60.7}))
    (tmp_path / MACHINE).write_text(json.dumps({"cpu": {"model": "elsewhere"}, "gpu": "NVIDIA H200"}))
    out = tmp_path / "result.json"
    assert main(["--report-only", "--run-dir", str(tmp_path), "--out", str(out), "--eval-size", str(n)]) == 0
    result = json.loads(out.read_text())
    assert result["rows"]["warm-up"]["acc"] == pytest.approx(0.4) and result["rows"]["PASR"]["acc"] == pytest.approx(
        0.9
    )
    assert result["pairs"]["PASR vs warm-up"] == {"wins": 5, "losses": 0, "p": pytest.approx(0.0625)}
    assert result["pairs"]["PASR vs control"]["wins"] == 4 and result["pairs"]["PASR vs control"]["losses"] == 1
    assert result["pasr_phase"]["steps"] == 3 and result["pasr_phase"]["control_steps"] == 7
    assert result["pasr_phase"]["trends"]["pasr/refine_rate"]["last_third"] == pytest.approx(1.0)
    assert (
        result["wall_s"] is None and result["wall_s_warmup_stage"] == 60.7 and result["pasr_phase"]["wall_s"] == 191.5
    )
    assert result["gpu"] == "NVIDIA H200" and result["cpu"] == {"model": "elsewhere"}
