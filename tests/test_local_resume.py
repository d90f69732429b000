"""Fault tolerance of `pasr train`: SIGKILL between checkpoints, Ctrl-C, and resume.

Runs the real CLI in subprocesses on a tiny random Llama (SmolLM2's tokenizer), and compares
a killed-and-resumed run with an uninterrupted one: the same steps, once each, and (because
RNG, optimizer and data position are restored) the same rollouts.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _args(tiny_model_dir, run_dir):
    return [
        sys.executable, "-m", "recipe", "train", "--run-dir", str(run_dir),
        f"model.path={tiny_model_dir}", "model.threads=1",
        "warmup.steps=2", "warmup.batch_size=2", "warmup.n_traces=8",
        "trainer.steps=5", "trainer.save_every=1", "trainer.keep_last=2", "trainer.eval_at_start=false",
        "rollout.queries_per_step=2", "pasr.n_refine=2", "pasr.n_plain=2",
        "rollout.max_new_tokens=8", "rollout.eval_max_new_tokens=4", "data.eval_size=2", "data.train_size=12",
    ]


def _env():
    return {**os.environ, "PYTHONUNBUFFERED": "1", "TQDM_DISABLE": "1"}


def _steps(run_dir: Path) -> list[tuple[int, str]]:
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
    return [(x["step"], x["phase"]) for x in lines if x["phase"] != "eval"]


def _rollouts(run_dir: Path) -> dict[str, list[str]]:
    return {p.name: [json.loads(x)["response"] for x in p.read_text().splitlines()] for p in sorted((run_dir / "rollouts").glob("*.jsonl"))}


def _latest_step(run_dir: Path) -> int:
    pointer = run_dir / "checkpoints" / "latest"
    return int(pointer.read_text().split("_")[1]) if pointer.is_file() else 0


@pytest.fixture(scope="module")
def reference_run(tiny_model_dir, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("ref") / "run"
    proc = subprocess.run(_args(tiny_model_dir, run_dir), cwd=REPO, env=_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "run directory:" in proc.stdout
    return run_dir


EXPECTED = [(1, "warmup"), (2, "warmup")] + [(s, "pasr") for s in range(3, 8)]


def test_uninterrupted_run_layout(reference_run):
    assert _steps(reference_run) == EXPECTED
    assert sorted(_rollouts(reference_run)) == [f"step_{s:06d}.jsonl" for s in range(3, 8)]
    ckpts = sorted(p.name for p in (reference_run / "checkpoints").glob("step_*"))
    assert ckpts == ["step_000002", "step_000006", "step_000007"]  # warm-up end pinned + last 2
    assert (reference_run / "eval" / "warmup.jsonl").is_file() and (reference_run / "eval" / "final.jsonl").is_file()
    assert (reference_run / "config.yaml").read_text().count("n_refine: 2") == 1


def test_sigkill_between_checkpoints_then_resume(tiny_model_dir, tmp_path, reference_run):
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(_args(tiny_model_dir, run_dir), cwd=REPO, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 300
    while _latest_step(run_dir) < 4 and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    killed_at = _latest_step(run_dir)
    assert 4 <= killed_at < 7

    resumed = subprocess.run(_args(tiny_model_dir, run_dir)[:4] + ["--resume", str(run_dir)], cwd=REPO, env=_env(),
                             capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"at step {killed_at}" in resumed.stderr
    assert _steps(run_dir) == EXPECTED  # no step lost, none repeated
    assert _rollouts(run_dir) == _rollouts(reference_run)  # same RNG, optimizer and data position


def test_ctrl_c_saves_and_resumes(tiny_model_dir, tmp_path, reference_run):
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(_args(tiny_model_dir, run_dir), cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    while not (run_dir / "metrics.jsonl").is_file() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err[-3000:]
    stopped_at = _latest_step(run_dir)
    assert stopped_at == _steps(run_dir)[-1][0]  # the checkpoint is the last finished step
    assert "pasr train --resume" in err
    resumed = subprocess.run(_args(tiny_model_dir, run_dir)[:4] + ["--resume", str(run_dir)], cwd=REPO, env=_env(),
                             capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert _steps(run_dir) == EXPECTED
    assert _rollouts(run_dir) == _rollouts(reference_run)


def test_bad_run_dir_errors(tmp_path, tiny_model_dir):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    proc = subprocess.run(_args(tiny_model_dir, tmp_path / "full"), cwd=REPO, env=_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "not empty" in proc.stderr and "Traceback" not in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "recipe", "train", "--resume", str(tmp_path / "nothing")], cwd=REPO,
                          env=_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "config.yaml" in proc.stderr
