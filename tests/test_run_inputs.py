"""A run's inputs cannot change under it (issue #63). The local engine's policy used to stay
memory-mapped to ``model.path``'s weights file, so a ``cp`` over it mid-run replaced the trained
weights; the KL reference is read from the RL phase's start for each step, so replacing that
checkpoint mid-run made the KL term pull toward another model (KL 1.09 -> 8.66, exit 0), and
deleting it gave a traceback at every resume. Now the run trains on what it loaded, and it reads
its reference checked against the weights the phase started from, or stops with one line that
names the file and says how to go on, at every resume too."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from recipe.local_engine.config import load_config
from recipe.local_engine.kl_reference import ReferenceUnavailable
from tests.weights_files import rewrite_in_place  # every float negated, the same inode and size

TINY_RUN = [
    "model.threads=1",
    "warmup.steps=2",
    "warmup.batch_size=2",
    "warmup.n_traces=8",
    "trainer.steps=3",
    "trainer.save_every=1",
    "trainer.eval_at_start=false",
    "trainer.eval_after_warmup=false",
    "trainer.eval_at_end=false",
    "rollout.queries_per_step=2",
    "pasr.n_refine=2",
    "pasr.n_plain=2",
    "rollout.max_new_tokens=8",
    "data.train_size=12",
    "algo.skip_zero_adv=false",  # every step updates, with its KL term
    "algo.kl_coef=0.1",
    "algo.lr=1e-3",
]


class AlternatingJudge:
    """Right on every other answer: reward spread in every group, so the policy moves."""

    name = "alternating"

    async def score_many(self, items):
        from rewards.judges.base import JudgeResult

        return [JudgeResult(float(i % 2)) for i, _ in enumerate(items)]


def _trainer(model_dir: Path, run_dir: Path, *overrides: str):
    from recipe.local_engine.trainer import LocalPasrTrainer

    cfg = load_config(overrides=[f"model.path={model_dir}", *TINY_RUN, *overrides])
    trainer = LocalPasrTrainer(cfg, run_dir)
    trainer.setup()
    trainer.judge = AlternatingJudge()
    return trainer


def _after_step(trainer, name: str, step: int, action) -> None:
    """``action()`` once ``trainer``'s step method ``name`` has done global step ``step``."""
    method = getattr(trainer, name)

    def wrapped(s):
        out = method(s)
        if s == step:
            action()
        return out

    setattr(trainer, name, wrapped)


def _weights(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_a_run_trains_on_what_it_loaded_and_stops_when_its_reference_is_rewritten(tiny_model_dir, tmp_path):
    """``model.path``'s weights file rewritten after the first warm-up step, the warm-up's pinned
    end (the KL reference) after the first PASR step: the policy is the undisturbed run's, and
    the next step's reference read stops the run, naming the checkpoint, before its update."""
    model_dir = shutil.copytree(tiny_model_dir, tmp_path / "model")
    undisturbed = _trainer(model_dir, tmp_path / "undisturbed", "trainer.steps=1")
    undisturbed.fit()
    expected = _weights(undisturbed.model)

    trainer = _trainer(model_dir, tmp_path / "run")
    pinned = tmp_path / "run" / "checkpoints" / "step_000002"
    _after_step(trainer, "warmup_step", 1, lambda: rewrite_in_place(model_dir / "model.safetensors"))
    _after_step(trainer, "pasr_step", 3, lambda: rewrite_in_place(pinned / "model.safetensors"))
    with pytest.raises(ReferenceUnavailable) as stop:
        trainer.fit()
    message = str(stop.value)
    assert message.startswith(f"the KL reference {pinned} (the warm-up's pinned end, where the RL phase started)")
    assert "holds other weights" in message and f"pasr train --resume {tmp_path / 'run'}" in message
    assert "algo.kl_coef=0 --force" in message and "\n" not in message
    assert trainer.step == 3  # step 4 stopped at its reference read, before its update
    for name, w in _weights(trainer.model).items():  # the model.path rewrite reached no weight
        torch.testing.assert_close(w, expected[name], rtol=0, atol=0, msg=name)


def test_without_a_warm_up_the_reference_is_model_path_and_its_rewrite_stops_the_run(tiny_model_dir, tmp_path):
    model_dir = shutil.copytree(tiny_model_dir, tmp_path / "model")
    trainer = _trainer(model_dir, tmp_path / "run", "warmup.steps=0", "trainer.steps=2")
    _after_step(trainer, "pasr_step", 1, lambda: rewrite_in_place(model_dir / "model.safetensors"))
    with pytest.raises(ReferenceUnavailable, match=f"^the KL reference {model_dir} \\(model.path={model_dir}, "):
        trainer.fit()
    assert trainer.step == 1


@pytest.fixture(scope="module")
def finished_run(tiny_model_dir, tmp_path_factory) -> Path:
    """A finished CLI run of 2 warm-up steps and 1 PASR step (checkpoints step_2, pinned, and
    step_3), which a test copies and extends to 3 PASR steps with ``--resume``."""
    from pasr_cli import main

    run_dir = tmp_path_factory.mktemp("inputs") / "run"
    rc = main(["train", "--run-dir", str(run_dir), f"model.path={tiny_model_dir}", *TINY_RUN, "trainer.steps=1"])
    assert rc == 0
    return run_dir


def _resume(capsys, run_dir: Path, *overrides: str) -> tuple[int, str]:
    from pasr_cli import main

    capsys.readouterr()
    rc = main(["train", "--resume", str(run_dir), "trainer.steps=3", *overrides])
    return rc, capsys.readouterr().err


def _one_line_error(rc: int, err: str) -> str:
    assert rc == 2 and "Traceback" not in err, err
    return err.strip().splitlines()[-1]


@pytest.mark.parametrize("fault", ["rewritten", "gone", "cut"])
def test_a_changed_or_lost_reference_stops_every_resume_with_one_line_until_it_is_restored(
    finished_run, tmp_path, capsys, fault
):
    """The fingerprint of the phase's start is kept in the checkpoints: a resumed run checks its
    reference against the original (a rewritten checkpoint would otherwise pass as the start),
    and says the same line at each resume; restored (or without the KL term, --force), it goes on."""
    run_dir = shutil.copytree(finished_run, tmp_path / "run")
    pinned = run_dir / "checkpoints" / "step_000002"
    saved = tmp_path / "pinned"
    shutil.copytree(pinned, saved)
    weights = pinned / "model.safetensors"
    if fault == "rewritten":
        rewrite_in_place(weights)
        why = "holds other weights than the phase started from"
    elif fault == "gone":
        shutil.rmtree(pinned)
        why = "is gone"
    else:
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 3])
        why = f"cannot be loaded (WeightsFileError: {weights} is cut short"
    expected = (
        f"pasr train: error: the KL reference {pinned} (the warm-up's pinned end, where the RL phase started) {why}"
    )
    for _ in range(2):  # the stop does not change what the next resume finds
        last = _one_line_error(*_resume(capsys, run_dir))
        assert last.startswith(expected), last
        assert f"pasr train --resume {run_dir} algo.kl_coef=0 --force" in last
    if fault == "gone":  # what the line offers where the checkpoint cannot come back
        rc, err = _resume(capsys, run_dir, "algo.kl_coef=0", "--force")
    else:
        shutil.rmtree(pinned)
        shutil.copytree(saved, pinned)
        rc, err = _resume(capsys, run_dir)
    assert rc == 0, err
    assert (run_dir / "checkpoints" / "latest").read_text().strip() == "step_000005"


def test_a_resume_in_another_dtype_checks_the_reference_in_the_one_the_phase_started_in(finished_run, tmp_path, capsys):
    """The fingerprint is of the weights in the dtype they were trained in: read in that dtype,
    checked, then cast; a resume with another model.dtype (--force) is no false "other weights"."""
    run_dir = shutil.copytree(finished_run, tmp_path / "run")
    rc, err = _resume(capsys, run_dir, "model.dtype=bfloat16", "--force")
    assert rc == 0, err
    assert (run_dir / "checkpoints" / "latest").read_text().strip() == "step_000005"


def test_a_resume_from_the_phase_start_cut_short_says_which_checkpoint_to_resume_from(finished_run, tmp_path, capsys):
    """Killed right after the warm-up's end (``latest`` names it), its weights then cut: every
    resume failed the same way; the line now says what can be done, and doing it goes on."""
    run_dir = shutil.copytree(finished_run, tmp_path / "run")
    ckpts = run_dir / "checkpoints"
    (ckpts / "latest").write_text("step_000002")
    weights = ckpts / "step_000002" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    last = _one_line_error(*_resume(capsys, run_dir))
    assert last.startswith(
        f"pasr train: error: cannot load model '{ckpts / 'step_000002'}': WeightsFileError: {weights}"
    )
    assert last.endswith(
        f"it is the checkpoint this run resumes from: restore it, or write step_000001 into {ckpts / 'latest'} "
        "to resume from the checkpoint before it"
    )
    (ckpts / "latest").write_text("step_000001")
    rc, err = _resume(capsys, run_dir)
    assert rc == 0, err
    assert (ckpts / "latest").read_text().strip() == "step_000005"


def test_a_resume_whose_checkpoint_is_gone_says_which_to_resume_from(finished_run, tmp_path, capsys):
    """``latest`` names a checkpoint deleted by hand: the resume used to start the run over,
    dropping every step it had logged; now one line, and its advice goes on."""
    run_dir = shutil.copytree(finished_run, tmp_path / "run")
    ckpts = run_dir / "checkpoints"
    shutil.rmtree(ckpts / "step_000003")
    last = _one_line_error(*_resume(capsys, run_dir))
    assert last == (
        f"pasr train: error: {ckpts / 'latest'} names {ckpts / 'step_000003'}, which is gone or incomplete; it is "
        f"the checkpoint this run resumes from: restore it, or write step_000002 into {ckpts / 'latest'} to resume "
        "from the checkpoint before it"
    )
    assert (run_dir / "metrics.jsonl").read_text().count('"phase": "pasr"') == 1  # nothing dropped
    (ckpts / "latest").write_text("step_000002")
    rc, err = _resume(capsys, run_dir)
    assert rc == 0, err
    assert (ckpts / "latest").read_text().strip() == "step_000005"
