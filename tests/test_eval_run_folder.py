"""``pasr eval --model RUN`` on a training run's folder (issue 63): it said "model folder RUN has no
config.json", blaming a file no run folder has. A run with no checkpoint yet is said to have none;
a run with one is pointed at it."""

from __future__ import annotations

import json
import shutil

import pytest

from eval.backends import run_folder_problem


def _eval(run_cli, model, out):
    return run_cli(["eval", "--model", str(model), "--dataset", "synthetic", "--limit", "1", "--out", str(out)])


def test_a_run_with_no_checkpoint_yet(tmp_path, run_cli):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("method: pasr\n")
    (run / "metrics.jsonl").write_text(json.dumps({"step": 1, "phase": "warmup"}) + "\n")
    rc, _, err = _eval(run_cli, run, tmp_path / "out")
    assert rc == 2 and "Traceback" not in err, err
    assert "config.json" not in err
    assert (
        f"{run} is a training run's folder with no checkpoint yet" in err and str(run / "checkpoints" / "latest") in err
    )


def test_a_run_with_a_checkpoint_is_pointed_at_it(tiny_model_dir, tmp_path):
    run = tmp_path / "run"
    step = run / "checkpoints" / "step_000002"
    shutil.copytree(tiny_model_dir, step)
    (step / "trainer_state.json").write_text('{"step": 2}')
    (run / "checkpoints" / "latest").write_text("step_000002")
    (run / "config.yaml").write_text("method: pasr\n")
    assert f"--model {run / 'checkpoints' / 'latest'}" in run_folder_problem(str(run))
    # what names a model is left alone: the checkpoint, its pointer, a model folder, a hub name
    for spec in (step, run / "checkpoints" / "latest", tiny_model_dir, "HuggingFaceTB/SmolLM2-135M-Instruct"):
        assert run_folder_problem(str(spec)) is None


@pytest.mark.parametrize("marker", ["rollouts", "checkpoints"])
def test_a_verl_or_local_run_folder_by_its_contents(tmp_path, marker):
    run = tmp_path / "run"
    (run / marker).mkdir(parents=True)
    assert "with no checkpoint yet" in run_folder_problem(str(run))
    assert run_folder_problem(str(tmp_path)) is None  # a plain folder: the loader's own message
