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
        sys.executable,
        "-m",
        "recipe",
        "train",
        "--run-dir",
        str(run_dir),
        f"model.path={tiny_model_dir}",
        "model.threads=1",
        "warmup.steps=2",
        "warmup.batch_size=2",
        "warmup.n_traces=8",
        "warmup.lr_schedule=cosine",
        "trainer.steps=5",
        "trainer.save_every=1",
        "trainer.keep_last=2",
        "trainer.eval_at_start=false",
        "rollout.queries_per_step=2",
        "pasr.n_refine=2",
        "pasr.n_plain=2",
        "algo.lr=2e-5",
        "algo.lr_warmup_steps=3",
        "rollout.max_new_tokens=8",
        "rollout.eval_max_new_tokens=4",
        "data.eval_size=2",
        "data.train_size=12",
    ]


def _env():
    return {**os.environ, "PYTHONUNBUFFERED": "1", "TQDM_DISABLE": "1"}


def _steps(run_dir: Path) -> list[tuple[int, str]]:
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
    return [(x["step"], x["phase"]) for x in lines if x["phase"] != "eval"]


def _rollouts(run_dir: Path) -> dict[str, list[str]]:
    return {
        p.name: [json.loads(x)["response"] for x in p.read_text().splitlines()]
        for p in sorted((run_dir / "rollouts").glob("*.jsonl"))
    }


def _with_optimizer(run_dir: Path) -> list[str]:
    """The checkpoints that keep optimizer state (optimizer.pt, or inside trainer.pt as older ones did)."""
    import torch

    return [
        p.name
        for p in sorted((run_dir / "checkpoints").glob("step_*"))
        if (p / "optimizer.pt").is_file() or torch.load(p / "trainer.pt", weights_only=False).get("optimizer")
    ]


def _latest_step(run_dir: Path) -> int:
    pointer = run_dir / "checkpoints" / "latest"
    return int(pointer.read_text().split("_")[1]) if pointer.is_file() else 0


@pytest.fixture(scope="module")
def reference_run(tiny_model_dir, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("ref") / "run"
    proc = subprocess.run(
        _args(tiny_model_dir, run_dir), cwd=REPO, env=_env(), capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "run directory:" in proc.stdout
    return run_dir


EXPECTED = [(1, "warmup"), (2, "warmup")] + [(s, "pasr") for s in range(3, 8)]


def test_uninterrupted_run_layout(reference_run):
    assert _steps(reference_run) == EXPECTED
    lines = [json.loads(x) for x in (reference_run / "metrics.jsonl").read_text().splitlines() if x.strip()]
    lrs = [x["actor/lr"] for x in lines if x["phase"] == "pasr"]
    base = 2e-5  # algo.lr=2e-5: ramped over algo.lr_warmup_steps=3 RL steps, then held
    assert lrs == pytest.approx([base / 3, 2 * base / 3, base, base, base])
    warmup_lrs = [x["warmup/lr"] for x in lines if x["phase"] == "warmup"]
    assert warmup_lrs == pytest.approx([5e-5, 2.5e-5])  # warmup.lr on a half cosine over 2 steps
    assert sorted(_rollouts(reference_run)) == [f"step_{s:06d}.jsonl" for s in range(3, 8)]
    ckpts = sorted(p.name for p in (reference_run / "checkpoints").glob("step_*"))
    assert ckpts == ["step_000002", "step_000006", "step_000007"]  # warm-up end pinned + last 2
    # the optimizer state (twice the weights' size) only where a resume reads it: the newest
    # checkpoint of an unfinished run (test_sigkill_...), none once the run has finished
    assert _with_optimizer(reference_run) == []
    assert (reference_run / "eval" / "warmup.jsonl").is_file() and (reference_run / "eval" / "final.jsonl").is_file()
    assert (reference_run / "config.yaml").read_text().count("n_refine: 2") == 1
    split = json.loads((reference_run / "data_split.json").read_text())  # how the held-out set was kept apart
    assert (split["method"], split["train"], split["heldout"], split["dropped_from_train"]) == ("splits", 12, 2, 0)


def test_sigkill_between_checkpoints_then_resume(tiny_model_dir, tmp_path, reference_run):
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        _args(tiny_model_dir, run_dir), cwd=REPO, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    deadline = time.time() + 300
    while _latest_step(run_dir) < 4 and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    killed_at = _latest_step(run_dir)
    assert 4 <= killed_at < 7
    # what the exact resume reads: the optimizer state of the checkpoint `latest` names; a kill
    # between moving `latest` and pruning (save_checkpoint) also leaves the previous one's, which
    # the next save's prune drops
    with_optimizer = _with_optimizer(run_dir)
    assert with_optimizer[-1] == f"step_{killed_at:06d}" and with_optimizer[:-1] in ([], [f"step_{killed_at - 1:06d}"])

    resumed = subprocess.run(
        _args(tiny_model_dir, run_dir)[:4] + ["--resume", str(run_dir)],
        cwd=REPO,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"at step {killed_at}" in resumed.stderr
    assert _steps(run_dir) == EXPECTED  # no step lost, none repeated
    assert _rollouts(run_dir) == _rollouts(reference_run)  # same RNG, optimizer and data position


@pytest.mark.slow  # minutes of subprocess training runs: make test-slow
def test_ctrl_c_saves_and_resumes(tiny_model_dir, tmp_path, reference_run):
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        _args(tiny_model_dir, run_dir), cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.time() + 300
    while not (run_dir / "metrics.jsonl").is_file() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err[-3000:]
    stopped_at = _latest_step(run_dir)
    assert stopped_at == _steps(run_dir)[-1][0]  # the checkpoint is the last finished step
    assert "pasr train --resume" in err
    resumed = subprocess.run(
        _args(tiny_model_dir, run_dir)[:4] + ["--resume", str(run_dir)],
        cwd=REPO,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert _steps(run_dir) == EXPECTED
    assert _rollouts(run_dir) == _rollouts(reference_run)


def test_bad_run_dir_errors(tmp_path, tiny_model_dir):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    proc = subprocess.run(
        _args(tiny_model_dir, tmp_path / "full"), cwd=REPO, env=_env(), capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2 and "not empty" in proc.stderr and "Traceback" not in proc.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "recipe", "train", "--resume", str(tmp_path / "nothing")],
        cwd=REPO,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "config.yaml" in proc.stderr


# ----------------------------------------------------------------------------- resume edge cases
# Each starts from a copy of the finished reference run, cut back to the state a kill (or a
# user) leaves, and resumes it: every step must end up in metrics.jsonl once, and the RNG,
# optimizer and data position make the redone steps' rollouts the reference's.


def _resume(run_dir, *extra):
    return subprocess.run(
        [sys.executable, "-m", "recipe", "train", "--resume", str(run_dir), *extra],
        cwd=REPO,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )


def _evals(run_dir: Path) -> list[tuple[int, str]]:
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
    return [(x["step"], x["tag"]) for x in lines if x["phase"] == "eval"]


def _copy_of(reference_run, tmp_path) -> Path:
    import shutil

    run_dir = tmp_path / "run"
    shutil.copytree(reference_run, run_dir)
    return run_dir


@pytest.mark.slow  # minutes of subprocess training runs: make test-slow
def test_killed_before_the_first_checkpoint_starts_over_once(reference_run, tmp_path):
    """No checkpoint: the resume starts over, and drops what the killed start wrote (it used to
    append, so metrics.jsonl held step 1 twice)."""
    run_dir = _copy_of(reference_run, tmp_path)
    import shutil

    shutil.rmtree(run_dir / "checkpoints")
    shutil.rmtree(run_dir / "eval")
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    (run_dir / "metrics.jsonl").write_text(lines[0] + "\n" + lines[1][:25])  # step 1, then step 2 cut off mid-write
    for dump in (run_dir / "rollouts").glob("*.jsonl"):
        dump.unlink() if dump.name != "step_000003.jsonl" else dump.write_text("garbage from the killed start\n")
    resumed = _resume(run_dir)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "starting the run over" in resumed.stderr
    assert _steps(run_dir) == EXPECTED
    assert _evals(run_dir) == _evals(reference_run) == [(2, "warmup"), (7, "final")]
    assert _rollouts(run_dir) == _rollouts(reference_run)


@pytest.mark.slow  # minutes of subprocess training runs: make test-slow
def test_torn_last_metrics_line_is_dropped_on_resume(reference_run, tmp_path):
    """Killed mid-write of a step's metrics line (here step 8, extending the finished run; the
    line is written before the step's checkpoint): the torn line is dropped, the step redone once."""
    run_dir = _copy_of(reference_run, tmp_path)
    step8 = json.dumps({"step": 8, "phase": "pasr", "pasr/reward_mean": 0.5})
    with (run_dir / "metrics.jsonl").open("a") as fh:
        fh.write(step8[:30])
    resumed = _resume(run_dir, "trainer.steps=6")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "at step 7" in resumed.stderr and "corrupt line" in resumed.stderr
    assert _steps(run_dir) == EXPECTED + [(8, "pasr")]
    assert _evals(run_dir) == [(2, "warmup"), (7, "final"), (8, "final")]
    assert {k: v for k, v in _rollouts(run_dir).items() if k != "step_000008.jsonl"} == _rollouts(reference_run)
    # the earlier end's per-sample evaluation is kept beside the new end's, not replaced
    kept = run_dir / "eval" / "final_step_000007.jsonl"
    assert kept.read_bytes() == (reference_run / "eval" / "final.jsonl").read_bytes()
    assert {json.loads(x)["step"] for x in (run_dir / "eval" / "final.jsonl").read_text().splitlines()} == {8}


@pytest.mark.slow  # minutes of subprocess training runs: make test-slow
def test_resuming_a_finished_run_changes_nothing(reference_run, tmp_path):
    run_dir = _copy_of(reference_run, tmp_path)
    before = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file() and p.name != ".lock"}  # (its holder's pid)
    resumed = _resume(run_dir)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "finished at step 7: nothing to resume" in resumed.stderr
    assert "| final |" in resumed.stdout
    assert {
        p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file() and p.name != ".lock"
    } == before  # no second final eval


@pytest.mark.slow  # minutes of subprocess training runs: make test-slow
def test_final_eval_cut_off_is_redone_once(reference_run, tmp_path):
    """Killed during the final evaluation (after the last checkpoint): the resume only evaluates."""
    run_dir = _copy_of(reference_run, tmp_path)
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    (run_dir / "metrics.jsonl").write_text("\n".join(x for x in lines if json.loads(x).get("tag") != "final") + "\n")
    resumed = _resume(run_dir)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert _steps(run_dir) == EXPECTED and _evals(run_dir) == [(2, "warmup"), (7, "final")]


@pytest.mark.slow  # minutes of subprocess training runs: make test-slow
def test_resume_refuses_other_settings_unless_forced(reference_run, tmp_path):
    run_dir = _copy_of(reference_run, tmp_path)
    config = (run_dir / "config.yaml").read_text()
    refused = _resume(run_dir, "warmup.steps=3", "pasr.n_refine=4")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
    assert "other settings (pasr.n_refine: 2 in the run, 4 now; warmup.steps: 2 in the run, 3 now)" in refused.stderr
    assert "--force" in refused.stderr
    assert (run_dir / "config.yaml").read_text() == config  # not rewritten
    # settings that only say how long, how often and how fast are accepted
    extended = _resume(run_dir, "trainer.keep_last=3", "trainer.save_every=2")
    assert extended.returncode == 0, extended.stderr[-3000:]
    assert "keep_last: 3" in (run_dir / "config.yaml").read_text()
    forced = _resume(run_dir, "--force", "pasr.n_refine=4")
    assert forced.returncode == 0 and "warning: --force" in forced.stderr, forced.stderr[-3000:]
    assert "n_refine: 4" in (run_dir / "config.yaml").read_text()
    plain = _resume(run_dir)  # the config it was forced to is the run's config now
    assert plain.returncode == 0, plain.stderr[-3000:]


# ----------------------------------------------------------------------------- errors before any work


def _train(capsys, *argv) -> tuple[int, str]:
    from pasr_cli import main

    capsys.readouterr()
    rc = main(["train", *argv])
    return rc, capsys.readouterr().err


@pytest.mark.parametrize(
    "override, needle",
    [
        ("data.train_size=0", "data.train_size must be >= 1"),
        ("warmup.batch_size=0", "warmup.batch_size must be >= 1"),
        ("algo.micro_batch_size=0", "algo.micro_batch_size must be >= 1"),
        ("algo.lr=-1", "algo.lr must be > 0"),
        ("rollout.temperature=-1", "rollout.temperature must be > 0"),
        ("data.source=gsm8kk", "data.source: unknown dataset 'gsm8kk'"),
        ("data.source=missing/train.jsonl", "data.source: data file not found"),
        ("model.path=[oops", "cannot parse the override model.path=[oops"),
    ],
)
def test_bad_values_fail_before_any_work(tiny_model_dir, tmp_path, capsys, override, needle):
    run_dir = tmp_path / "run"
    rc, err = _train(capsys, *_args(tiny_model_dir, run_dir)[4:], override)
    assert rc == 2 and needle in err and err.count("\n") == 1, err
    assert not run_dir.exists()  # refused before the run directory (or a model) was touched


def test_bad_config_files_are_one_line(tiny_model_dir, tmp_path, capsys):
    broken = tmp_path / "broken.yaml"
    broken.write_text("model:\n  path: [unclosed\n")
    latin1 = tmp_path / "latin1.yaml"
    latin1.write_bytes(b"model:\n  path: caf\xe9\n")
    cases = [
        (["--config", str(broken)], f"config file {broken} is not valid YAML"),
        (["--config", str(latin1)], f"config file {latin1} is not UTF-8 text"),
        (["--config", str(REPO / "recipe" / "config" / "pasr_trainer.yaml")], "is a verl (Hydra) config"),
    ]
    for argv, needle in cases:
        rc, err = _train(capsys, *argv, "--run-dir", str(tmp_path / "run"))
        assert rc == 2 and needle in err and err.count("\n") == 1, err
    # --resume of a directory whose config.yaml cannot be used
    for name, config in (("torn", broken), ("verl", REPO / "recipe" / "config" / "pasr_trainer.yaml")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.yaml").write_bytes(config.read_bytes())
        rc, err = _train(capsys, "--resume", str(tmp_path / name))
        assert rc == 2 and f"cannot resume {tmp_path / name}: config file" in err and err.count("\n") == 1, err
    rc, err = _train(capsys, "--force")
    assert rc == 2 and "--force only applies to --resume" in err


def test_failed_start_leaves_the_run_dir_reusable(tiny_model_dir, tmp_path, capsys):
    """A start that fails while loading (here: a data file that is not UTF-8) writes no
    config.yaml, so the fixed command is accepted instead of "not empty; use --resume"."""
    latin1 = tmp_path / "train.jsonl"
    latin1.write_bytes(b'{"question": "caf\xe9 2+2?", "answer": "4"}\n')
    run_dir = tmp_path / "run"
    quick = ["warmup.steps=0", "trainer.steps=0", "trainer.eval_after_warmup=false", "trainer.eval_at_end=false"]
    rc, err = _train(capsys, *_args(tiny_model_dir, run_dir)[4:], *quick, f"data.source={latin1}")
    last = err.strip().splitlines()[-1]  # after the model-loading chatter: one error line
    assert rc == 2 and last.startswith("pasr train: error: ") and "train.jsonl:1: not UTF-8 text" in last, err
    assert "Traceback" not in err
    assert not (run_dir / "config.yaml").exists()
    latin1.write_text('{"question": "2+2?", "answer": "4"}\n', encoding="utf-8")
    rc, err = _train(capsys, *_args(tiny_model_dir, run_dir)[4:], *quick, f"data.source={latin1}", "data.eval_size=1")
    assert rc == 0, err
    assert (run_dir / "config.yaml").is_file()


def test_run_dir_under_a_file(tiny_model_dir, tmp_path, capsys):
    (tmp_path / "f").write_text("x")
    rc, err = _train(capsys, *_args(tiny_model_dir, tmp_path / "f" / "run")[4:])
    assert rc == 2 and f"{tmp_path / 'f'} is a file, not a directory" in err and err.count("\n") == 1, err


def test_too_little_data_fails_before_the_model_loads(tiny_model_dir, tmp_path, capsys):
    """An empty data file used to run the whole warm-up and checkpoint it, then die in
    step_indices (ZeroDivisionError); a file with fewer rows than a step's queries made every
    step repeat queries. Both are refused in one line before the model loads or anything is
    written in the run directory."""
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    one = tmp_path / "one.jsonl"  # one row to train on: the other two are the held-out set (data.eval_size=2)
    one.write_text("".join(f'{{"question": "2+{i}?", "answer": "{2 + i}"}}\n' for i in range(3)))
    for source, needle in (
        (empty, f"data.source: {empty} holds no rows"),
        (one, f"data.source: {one} has 1 training row, fewer than rollout.queries_per_step=2"),
    ):
        run_dir = tmp_path / f"run_{source.stem}"
        rc, err = _train(capsys, *_args(tiny_model_dir, run_dir)[4:], f"data.source={source}")
        last = err.strip().splitlines()[-1]
        assert rc == 2 and last.startswith("pasr train: error: ") and needle in last, err
        assert "Loading weights" not in err and "attention:" not in err  # the model was not loaded
        assert not (run_dir / "config.yaml").exists() and not (run_dir / "checkpoints").exists()


@pytest.mark.parametrize(
    "phase, overrides, bad_call, needle, last_good",
    [
        ("warmup", [], 2, "step 2 (warmup): the warm-up SFT loss is nan", 1),
        # RL step 2 is global step 4; one micro-batch a step, so the second loss is step 4's
        ("pasr", ["algo.skip_zero_adv=false"], 2, "step 4 (pasr): the policy loss is nan", 3),
    ],
)
def test_non_finite_loss_stops_the_run_before_its_checkpoint(
    tiny_model_dir, tmp_path, capsys, monkeypatch, phase, overrides, bad_call, needle, last_good
):
    """A NaN loss, once applied, turns every weight NaN and the run went on checkpointing and
    evaluating garbage: it stops at the step with the bad loss, in one line naming the step and
    the loss, before the update is applied or that step's checkpoint written."""
    from recipe.local_engine import policy_update

    calls = []

    def poisoned(real):
        def wrapper(*args, **kwargs):
            out = real(*args, **kwargs)
            calls.append(1)
            if len(calls) != bad_call:
                return out
            return (out[0] * float("nan"), out[1]) if isinstance(out, tuple) else out * float("nan")

        return wrapper

    if phase == "warmup":
        # warmup.batch_size=2 rows in one micro-batch: the second loss is step 2's
        monkeypatch.setattr(policy_update, "sft_loss", poisoned(policy_update.sft_loss))
    else:
        monkeypatch.setattr(
            policy_update.core_algos,
            "compute_policy_loss_vanilla",
            poisoned(policy_update.core_algos.compute_policy_loss_vanilla),
        )
    run_dir = tmp_path / "run"
    rc, err = _train(capsys, *_args(tiny_model_dir, run_dir)[4:], *overrides)
    last = err.strip().splitlines()[-1]
    assert rc == 2 and last.startswith("pasr train: error: ") and needle in last, err
    assert "Traceback" not in err
    assert _latest_step(run_dir) == last_good
    assert max(step for step, _ in _steps(run_dir)) == last_good  # the bad step is not logged either


@pytest.mark.parametrize("broken", ["no_weights", "bad_config", "truncated_weights"])
def test_unloadable_model_folder_is_one_line(tiny_model_dir, broken_model_dirs, tmp_path, capsys, broken):
    """A model folder transformers cannot load gave an OSError (or SafetensorError) traceback;
    `pasr eval` said it in one line, and so does `pasr train` now (the same check)."""
    run_dir = tmp_path / "run"
    path = broken_model_dirs[broken]
    rc, err = _train(capsys, *_args(tiny_model_dir, run_dir)[4:], f"model.path={path}")
    last = err.strip().splitlines()[-1]
    assert rc == 2 and last.startswith(f"pasr train: error: cannot load model '{path}'"), err
    assert "Traceback" not in err
    assert not (run_dir / "config.yaml").exists()
