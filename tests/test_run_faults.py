"""`pasr train` and `pasr eval` when the run directory is in use, the disk fills up, or a resume
is asked for something it cannot give (issue 34: items 1, 5, 8 and keep_last of 12).

The training runs are the tiny random Llama's of tests/test_local_resume.py (its helpers and its
finished reference run); a full disk is simulated (:class:`FullDisk`, or torch.save raising what
it raises on a full disk), not made with a real filesystem.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.test_local_resume import (  # noqa: F401  (reference_run is a fixture)
    EXPECTED,
    REPO,
    _args,
    _copy_of,
    _env,
    _evals,
    _latest_step,
    _resume,
    _steps,
    _train,
    reference_run,
)

LOCK = ".lock"


def _files(run_dir: Path) -> dict[Path, bytes]:
    """Every file of a run directory but its lock (which holds the pid of its latest holder)."""
    return {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file() and p.name != LOCK}


def _checkpoints(run_dir: Path) -> list[str]:
    return sorted(p.name for p in (run_dir / "checkpoints").iterdir() if p.is_dir())


# ----------------------------------------------------------------------------- one run per directory


@pytest.mark.slow  # minutes of subprocess training runs: make test-slow
def test_resume_of_a_run_still_going_is_refused(tiny_model_dir, tmp_path):
    """`--resume` of a run that is still going used to train beside it (both exit 0, every step
    written twice): the run holds its directory, and the second process gets one line naming it."""
    run_dir = tmp_path / "run"
    # steps it cannot finish before the SIGINT below (with 40 an idle machine finished them and
    # the signal met a process that was already exiting: -2 instead of 130)
    first = subprocess.Popen(
        _args(tiny_model_dir, run_dir) + ["trainer.steps=100000"],
        cwd=REPO,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.time() + 300
        while not (run_dir / "metrics.jsonl").is_file() and first.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        assert first.poll() is None, "the first run ended before the second started"
        second = _resume(run_dir)
        assert second.returncode == 2, second.stderr[-3000:]
        assert second.stderr == (
            f"pasr train: error: {run_dir} is in use by another pasr train (pid {first.pid}); wait for it to finish\n"
        )
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=300)
    assert first.returncode == 130
    steps = [step for step, _ in _steps(run_dir)]
    assert steps == list(range(1, len(steps) + 1))  # each step once


HOLD = (
    "import sys, time; from recipe.run_lock import RunLock; RunLock(sys.argv[1], 'pasr train').acquire(); "
    "print('locked', flush=True); time.sleep(120)"
)


def test_second_start_into_one_run_dir_is_refused(tiny_model_dir, tmp_path, capsys):
    """Two `pasr train --run-dir R` started together both found R empty, and one died mid-run
    (FileNotFoundError on the other's .tmp_step_*) after both had logged the same steps. The
    later of two starts is refused before it writes anything, and a killed holder leaves no stale lock."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(run_dir)], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        rc, err = _train(capsys, *_args(tiny_model_dir, run_dir)[4:])
        assert rc == 2 and err.count("\n") == 1, err
        assert f"{run_dir} is in use by another pasr train (pid {holder.pid}); wait for it to finish" in err
        assert [p.name for p in run_dir.iterdir()] == [LOCK]
    finally:
        holder.kill()
        holder.wait()
    quick = ["warmup.steps=0", "trainer.steps=0", "trainer.eval_after_warmup=false", "trainer.eval_at_end=false"]
    rc, err = _train(capsys, *_args(tiny_model_dir, run_dir)[4:], *quick)
    assert rc == 0, err
    assert (run_dir / "config.yaml").is_file()


# ----------------------------------------------------------------------------- what --resume takes


def test_resume_refuses_what_it_would_ignore(reference_run, tmp_path, capsys):
    """`--config`, `--preset` and `--run-dir` were dropped without a word beside `--resume`
    ("nothing to resume"), and fewer steps than the run has done rewrote its config.yaml. Each is
    refused in one line, and the run directory is left as it was."""
    run_dir = _copy_of(reference_run, tmp_path)
    other = tmp_path / "other.yaml"
    other.write_text("trainer:\n  steps: 9\n")
    before = _files(run_dir)
    cases = [
        (["--config", str(other)], "--config cannot be used with --resume"),
        (["--preset", "demo"], "--preset cannot be used with --resume"),
        (["--run-dir", str(tmp_path / "elsewhere")], "--run-dir cannot be used with --resume"),
        (["trainer.run_dir=elsewhere"], "trainer.run_dir cannot be used with --resume"),
        (["trainer.steps=2"], f"cannot resume {run_dir} with trainer.steps=2: it is at step 7 (2 warm-up + 5)"),
    ]
    for extra, needle in cases:
        rc, err = _train(capsys, "--resume", str(run_dir), *extra)
        assert rc == 2 and needle in err and err.count("\n") == 1, err
    assert _files(run_dir) == before
    assert not (tmp_path / "elsewhere").exists()


@pytest.mark.slow  # minutes of subprocess training runs: make test-slow
def test_resume_extends_a_finished_run(reference_run, tmp_path):
    """More trainer.steps on a finished run: the next steps and a final evaluation at the new end."""
    run_dir = _copy_of(reference_run, tmp_path)
    # the finished run dropped its optimizer state: said, and kept at this extension's end when asked
    extended = _resume(run_dir, "trainer.steps=7", "trainer.keep_final_optimizer=true")
    assert extended.returncode == 0, extended.stderr[-3000:]
    assert f"extending {run_dir} from 5 to 7 steps (2 warm-up steps before them)" in extended.stderr
    assert "keeps no optimizer state" in extended.stderr and "trainer.keep_final_optimizer=true" in extended.stderr
    assert _steps(run_dir) == EXPECTED + [(8, "pasr"), (9, "pasr")]
    assert _evals(run_dir) == [(2, "warmup"), (7, "final"), (9, "final")]
    assert json.loads((run_dir / "eval" / "final.jsonl").read_text().splitlines()[0])["step"] == 9
    assert "steps: 7" in (run_dir / "config.yaml").read_text()
    assert _checkpoints(run_dir) == ["step_000002", "step_000008", "step_000009"]
    assert (run_dir / "checkpoints" / "step_000009" / "optimizer.pt").is_file()
    assert "keep_final_optimizer: true" in (run_dir / "config.yaml").read_text()  # the run's setting now
    # continues with the moments it kept, then, told to, drops them at its end
    again = _resume(run_dir, "trainer.steps=8", "trainer.keep_final_optimizer=false")
    assert again.returncode == 0 and "keeps no optimizer state" not in again.stderr, again.stderr[-3000:]
    assert not (run_dir / "checkpoints" / "step_000010" / "optimizer.pt").exists()


@pytest.mark.slow  # minutes of subprocess training runs: make test-slow
def test_resume_prunes_what_a_kill_left(reference_run, tmp_path):
    """Killed after the last checkpoint was written but before the older ones were pruned (and
    before the final evaluation): the resume only evaluates, saves nothing, and used to keep the
    extra checkpoint for good. It prunes as it resumes, and drops a save cut off mid-write."""
    run_dir = _copy_of(reference_run, tmp_path)
    ckpts = run_dir / "checkpoints"
    shutil.copytree(ckpts / "step_000006", ckpts / "step_000005")  # what keep_last=2 would have pruned
    (ckpts / ".tmp_step_000004").mkdir()  # a save killed mid-write
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    (run_dir / "metrics.jsonl").write_text("\n".join(x for x in lines if json.loads(x).get("tag") != "final") + "\n")
    resumed = _resume(run_dir)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert _evals(run_dir) == [(2, "warmup"), (7, "final")]
    assert _checkpoints(run_dir) == ["step_000002", "step_000006", "step_000007"]  # pinned warm-up end + keep_last


def test_prune_keeps_the_latest_checkpoint(tmp_path):
    """A kill between renaming a checkpoint into place and pointing ``latest`` at it leaves one
    newer than ``latest``: pruning drops that one (its step is redone), never the one resumed from."""
    from recipe.local_engine.checkpoint import LATEST, prune

    for step in (2, 4, 5, 6):
        (tmp_path / f"step_{step:06d}").mkdir()
        (tmp_path / f"step_{step:06d}" / "trainer_state.json").write_text("{}")
    (tmp_path / "pinned").write_text("step_000002\n")
    (tmp_path / LATEST).write_text("step_000005")
    prune(tmp_path, keep_last=1)
    assert sorted(p.name for p in tmp_path.glob("step_*")) == ["step_000002", "step_000005"]


def test_prune_drops_what_latest_does_not_reach_and_older_optimizer_states(tmp_path):
    """A kill between pinning a checkpoint and pointing ``latest`` at it leaves a pinned one
    newer than ``latest``: its step is redone (and pinned again), so it goes and so does its
    pin. Only ``latest`` keeps its optimizer state."""
    from recipe.local_engine.checkpoint import LATEST, OPTIMIZER, prune

    for step in (2, 4, 5, 6):
        (tmp_path / f"step_{step:06d}").mkdir()
        (tmp_path / f"step_{step:06d}" / OPTIMIZER).write_text("moments")
        (tmp_path / f"step_{step:06d}" / "trainer_state.json").write_text("{}")
    (tmp_path / "pinned").write_text("step_000002\nstep_000006\n")
    (tmp_path / LATEST).write_text("step_000005")
    prune(tmp_path, keep_last=2)
    assert sorted(p.name for p in tmp_path.glob("step_*")) == ["step_000002", "step_000004", "step_000005"]
    assert (tmp_path / "pinned").read_text() == "step_000002\n"
    assert sorted(p.parent.name for p in tmp_path.glob(f"step_*/{OPTIMIZER}")) == ["step_000005"]


class _Killed(BaseException):
    """A kill at a chosen point (nothing in the trainer catches it)."""


@pytest.mark.slow  # minutes of subprocess training runs: make test-slow
def test_a_stop_between_latest_and_the_pin_keeps_the_warmup_checkpoint(tiny_model_dir, tmp_path, monkeypatch, capsys):
    """`latest` named the warm-up's last step before the pin was written: a stop between the
    two left no pin, and the resumed run pruned the warm-up checkpoint the docs say is kept.
    Killed right after `latest` names it, the resumed run keeps it."""
    import recipe.local_engine.checkpoint as ckpt
    from pasr_cli import main

    real = ckpt.replace_text

    def replace_text(path, text):
        real(path, text)
        if Path(path).name == ckpt.LATEST and text == "step_000002":  # the warm-up's end (warmup.steps=2)
            raise _Killed

    monkeypatch.setattr(ckpt, "replace_text", replace_text)
    run_dir = tmp_path / "run"
    with pytest.raises(_Killed):
        main(["train", *_args(tiny_model_dir, run_dir)[4:], "trainer.steps=3"])
    monkeypatch.undo()
    assert _latest_step(run_dir) == 2
    resumed = _resume(run_dir)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert _steps(run_dir) == EXPECTED[:5]
    assert _checkpoints(run_dir) == ["step_000002", "step_000004", "step_000005"]  # pinned warm-up end + keep_last=2
    assert (run_dir / "checkpoints" / "pinned").read_text().split() == ["step_000002"]


def test_resume_cannot_move_the_warmup_boundary_even_forced(reference_run, tmp_path):
    """A finished 2 + 5 run resumed with --force warmup.steps=5 trainer.steps=6 used to train
    more RL steps than it said and record 5 warm-up steps where 2 happened. Refused in one line;
    a run still inside its warm-up may lengthen it (to more steps than it has done)."""
    run_dir = _copy_of(reference_run, tmp_path)
    before = _files(run_dir)
    refused = _resume(run_dir, "--force", "warmup.steps=5", "trainer.steps=6")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
    assert (
        f"cannot resume {run_dir} with warmup.steps=5, even with --force: it is at step 7, after its 2 warm-up "
        "steps and 5 pasr steps, and the steps done cannot change phase; start a new --run-dir"
    ) in refused.stderr
    assert _files(run_dir) == before

    from recipe.local_engine.cli import warmup_change_refused

    assert warmup_change_refused(saved=4, new=6, done=3, method="pasr") is None  # mid-warm-up: it may end later
    assert "not before" in warmup_change_refused(saved=4, new=3, done=3, method="pasr")
    assert "after its 4 warm-up steps," in warmup_change_refused(saved=4, new=6, done=4, method="pasr")


# ----------------------------------------------------------------------------- a full disk


class FullDisk:
    """``Path.open`` on a disk that fills up: of the writes to files ``match`` accepts, the first
    ``writes_left`` go through; the next writes half its text and raises ENOSPC, as a full disk
    does, and so does every later one (the disk stays full)."""

    def __init__(self, monkeypatch, match, writes_left: int):
        self.writes_left = writes_left
        real_open = Path.open
        disk = self

        def open_(path, mode="r", *args, **kwargs):
            fh = real_open(path, mode, *args, **kwargs)
            return _Filling(fh, disk) if any(c in mode for c in "wax") and match(Path(path)) else fh

        monkeypatch.setattr(Path, "open", open_)


class _Filling:
    def __init__(self, fh, disk: FullDisk):
        self._fh, self._disk = fh, disk

    def write(self, data):
        self._disk.writes_left -= 1
        if self._disk.writes_left >= 0:
            return self._fh.write(data)
        if self._disk.writes_left == -1:
            self._fh.write(data[: len(data) // 2])
            self._fh.flush()
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __getattr__(self, name):
        return getattr(self._fh, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._fh.close()


TORCH_FULL_DISK = "[enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598"  # torch.save's report


@pytest.mark.parametrize("where", ["checkpoint", "rollouts"])
def test_full_disk_in_training_is_one_line(tiny_model_dir, tmp_path, capsys, monkeypatch, where):
    """A full disk while saving step 3's checkpoint (torch.save's RuntimeError) or writing its
    rollouts (OSError ENOSPC) gave a traceback and left a half-written file behind. Now: one line
    naming the file, nothing half-written kept (no .tmp_step_*, no torn rollouts file), `latest`
    still at the last good checkpoint, and the resume goes on from it."""
    import torch

    run_dir = tmp_path / "run"
    if where == "checkpoint":
        real_save = torch.save

        def save(obj, f, *args, **kwargs):
            if "step_000003" not in str(f):
                return real_save(obj, f, *args, **kwargs)
            Path(f).write_bytes(b"PK\x03\x04")  # the start of the zip torch was writing
            raise RuntimeError(TORCH_FULL_DISK)

        monkeypatch.setattr(torch, "save", save)
        target = run_dir / "checkpoints" / "step_000003"
    else:
        FullDisk(monkeypatch, lambda p: "rollouts" in p.parts, writes_left=1)
        target = run_dir / "rollouts" / "step_000003.jsonl"
    rc, err = _train(capsys, *_args(tiny_model_dir, run_dir)[4:], "trainer.steps=2")
    monkeypatch.undo()
    assert rc == 2 and err.strip().splitlines()[-1] == f"pasr train: error: no space left on device writing {target}", (
        err
    )
    assert "Traceback" not in err
    assert not target.exists() and not [p for p in run_dir.rglob("*") if "tmp" in p.name]
    assert _latest_step(run_dir) == 2
    resumed = _resume(run_dir)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert _steps(run_dir) == [(1, "warmup"), (2, "warmup"), (3, "pasr"), (4, "pasr")]
    assert len((run_dir / "rollouts" / "step_000003.jsonl").read_text().splitlines()) == 8  # 2 queries x (2 + 2)


class _Answers:
    """An eval backend that answers every question with the same plain answer."""

    name = "answers"

    def load(self) -> None:
        pass

    def generate(self, chats, params, on_finished=None):
        from eval.backends import Completion

        return [Completion("The final answer is <answer>\\boxed{4}</answer>", 8, "stop") for _ in chats]


def test_full_disk_in_pasr_eval_is_one_line(tmp_path, capsys, monkeypatch):
    """The disk fills up in the second chunk's samples, and stays full for the summary: this was
    two tracebacks, one inside the other. Now one line naming the file; samples.jsonl keeps whole
    records only (the first chunk's), and the rerun once there is room finishes the rest."""
    import eval.run
    from data.records import iter_records
    from pasr_cli import main

    data = tmp_path / "qa.jsonl"
    data.write_text("".join(json.dumps({"question": f"{i}+{4 - i}?", "answer": "4"}) + "\n" for i in range(4)))
    out = tmp_path / "out"
    argv = [
        "eval",
        "--model",
        "m",
        "--dataset",
        str(data),
        "--method",
        "plain",
        "--batch-size",
        "2",
        "--progress",
        "off",
        "--out",
        str(out),
    ]
    monkeypatch.setattr(eval.run, "build_backend", lambda *a, **k: _Answers())
    with monkeypatch.context() as full:
        FullDisk(full, lambda p: p.name.startswith(("samples", "summary")), writes_left=2)
        rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2 and err == f"pasr eval: error: no space left on device writing {out / 'summary.json'}\n", err
    assert len(list(iter_records(out / "samples.jsonl", strict=True))) == 2
    assert main(argv) == 0
    assert len(list(iter_records(out / "samples.jsonl", strict=True))) == 4


def test_full_disk_where_no_writer_names_the_file_is_one_line(tmp_path, capsys, monkeypatch):
    """A full disk in a write of a library's own (tensorboard, say) still ends in one line, with
    the file when the OSError has one."""
    import eval.run
    from pasr_cli import main

    def full(cfg):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/data/out/events.bin")

    monkeypatch.setattr(eval.run, "run_eval", full)
    assert main(["eval", "--model", "m", "--dataset", "gsm8k", "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err == "pasr eval: error: no space left on device writing /data/out/events.bin\n"
