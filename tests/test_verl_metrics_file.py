"""A verl run writes ``metrics.jsonl`` in ``trainer.default_local_dir`` as the local engine writes
its own (recipe/metrics_file.py, issue 52 item 3), so ``pasr stats`` draws its curves: verl's own
``fit()`` (its validation-only path, with verl's ``_validate`` around the scripted PASR rollout)
through ``PasrRayTrainer.fit``, a resume cutting the file back to its checkpoint, and steps
logged with verl's ``Tracking`` and numpy values, read back by ``pasr stats``."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from tests.test_verl_validation import _validating_trainer
from tests.verl_scripted_rollout import gen_batch, prompts, tokenizer, train_step, val_dataset, verl_mods  # noqa: F401  (fixtures)


def _lines(path):
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_verl_fit_logs_to_metrics_jsonl_and_a_resume_cuts_it_back(
    verl_mods, tokenizer, prompts, tmp_path, val_dataset, monkeypatch
):
    """verl's real fit() (val_only): the Tracking it makes writes the validation it logs; the run
    resumed from step 2 drops the lines of step 3 that a crash left behind."""
    from torchdata.stateful_dataloader import StatefulDataLoader
    from verl.utils import tracking

    from eval.stats.metrics_log import read_metrics

    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": s, "phase": "pasr", "pasr/acc_refine": s / 10}) + "\n" for s in (1, 2, 3))
    )
    t, _ = _validating_trainer(verl_mods, tokenizer, prompts, tmp_path, val_dataset, val_batch_size=3, val_n=1, step=0)
    t.config.trainer.default_local_dir = str(ckpt)
    t.config.trainer.val_only = True
    t._init_dump_executor()
    t.checkpoint_manager = SimpleNamespace(update_weights=lambda step: None)
    t.train_dataloader = StatefulDataLoader(list(range(4)), batch_size=1)
    monkeypatch.setattr(
        verl_mods.ray_trainer.RayPPOTrainer, "_load_checkpoint", lambda self: setattr(self, "global_steps", 2)
    )
    verl_tracking = tracking.Tracking
    try:
        t.fit()
    finally:
        t.async_rollout_manager.close()
    assert tracking.Tracking is verl_tracking  # verl's class is back after fit()
    lines = _lines(ckpt / "metrics.jsonl")
    assert [(x["step"], x["phase"]) for x in lines] == [(1, "pasr"), (2, "pasr"), (2, "eval")]
    assert lines[2]["val-core/synthetic/acc/mean@1"] == pytest.approx(1.0)
    series = read_metrics(ckpt / "metrics.jsonl", strict=True, errors=[])
    assert series["steps"] == [1, 2] and series["series"]["val-core/synthetic/acc/mean@1"] == [None, 1.0]


def test_verl_steps_in_metrics_jsonl_are_read_by_pasr_stats(verl_mods, train_step, monkeypatch, tmp_path, capsys):
    """Steps logged as fit() logs them (verl's Tracking with trainer.logger's backends, numpy
    values, the actor update's metrics with PASR's reduced by verl's reduce_metrics), beside the
    run's rollout dump: pasr stats finds the file, labels it with the run id and has every key;
    the tensorboard backend writes to tensorboard/ beside it, as in the local engine."""
    from verl import DataProto
    from verl.utils.metric import reduce_metrics

    from pasr_cli import main as pasr_main
    from recipe.metrics_file import metric_lines

    t_mod = verl_mods.trainer
    run = train_step.tmp  # rollouts/step_*.jsonl of the scripted step are here, run id test-run
    monkeypatch.setenv("TENSORBOARD_DIR", "unset")
    monkeypatch.delenv("TENSORBOARD_DIR")  # unset, and unset again after the test
    monkeypatch.setattr(
        verl_mods.ray_trainer.RayPPOTrainer,
        "_update_actor",
        lambda self, b: DataProto.from_single_dict(data={}, meta_info={"metrics": {"actor/pg_loss": [0.1, 0.3]}}),
    )
    monkeypatch.setattr(
        verl_mods.ray_trainer.RayPPOTrainer, "_load_checkpoint", lambda self: setattr(self, "global_steps", 0)
    )

    def fit_logging(trainer):  # what verl's fit() does around its logger (pinned in test_verl_pinned.py)
        from verl.utils.tracking import Tracking

        logger = Tracking(
            project_name="p", experiment_name="e", default_backend=trainer.config.trainer.logger, config=None
        )
        trainer._load_checkpoint()
        for step in (1, 2):
            trainer.global_steps = step
            metrics = reduce_metrics(trainer._update_actor(train_step.out).meta_info["metrics"])
            metrics.update(
                {
                    "training/global_step": step,
                    "critic/score/mean": np.float32(0.25 * step),
                    "timing_s/step": np.float64(1.5),
                }
            )
            logger.log(data=metrics, step=trainer.global_steps)

    monkeypatch.setattr(t_mod, "verl_fit", lambda: fit_logging)
    trainer = object.__new__(t_mod.PasrRayTrainer)
    from tests.verl_compose import _compose

    trainer.config = _compose([f"trainer.default_local_dir={run}", "trainer.logger=[console,tensorboard]"])
    trainer.train_dataloader = []
    trainer.async_rollout_manager = SimpleNamespace(pop_metrics=lambda: dict(train_step.metrics))
    trainer.fit()
    assert "step:2" in capsys.readouterr().out  # the console backend still logs
    assert list((run / "tensorboard").glob("events.out.tfevents.*"))
    lines = metric_lines(run)
    assert [(x["step"], x["phase"]) for x in lines] == [(1, "pasr"), (2, "pasr")]
    assert lines[1]["critic/score/mean"] == 0.5 and lines[0]["actor/pg_loss"] == pytest.approx(0.2)
    assert lines[0]["pasr/refine_rate"] == pytest.approx(train_step.metrics["pasr/refine_rate"])
    out = tmp_path / "stats"
    assert pasr_main(["stats", str(run), "--out", str(out), "--no-plots", "--progress", "off"]) == 0
    stats = json.loads((out / "stats.json").read_text())
    trend = stats["metrics_trends"]["test-run"]
    assert trend["steps"] == [1, 2] and trend["series"]["critic/score/mean"] == [0.25, 0.5]
    assert "pasr/refine_rate" in trend["series"] and "metrics.jsonl `test-run`" in (out / "report.md").read_text()


def test_a_resumed_run_logs_into_the_same_wandb_run(verl_mods, monkeypatch, tmp_path):
    """verl's Tracking (as fit() makes it, through metrics_file_tracking) with wandb, offline: the
    first start keeps its run id in the checkpoint folder and a second start (the resubmission
    after a preemption) resumes that wandb run; a fresh folder is a new run; a WANDB_RUN_ID the
    user set wins. Before, each start was a new wandb run of the same name."""
    import wandb
    from verl.utils import tracking

    from recipe.tracker_run import RUN_ID_FILE

    t_mod = verl_mods.trainer
    for key in ("WANDB_RUN_ID", "WANDB_RESUME", "WANDB_RESUME_FROM"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))

    def start(run_dir, own: str | None = None) -> str:
        # wandb reads WANDB_RUN_ID from the environment the start sets; each start is its own process
        monkeypatch.delenv("WANDB_RUN_ID", raising=False)
        monkeypatch.delenv("WANDB_RESUME", raising=False)
        if own:
            monkeypatch.setenv("WANDB_RUN_ID", own)
        with t_mod.metrics_file_tracking(str(run_dir), "pasr"):
            logger = tracking.Tracking(project_name="p", experiment_name="e", default_backend=["wandb"], config=None)
            run_id = wandb.run.id
            assert wandb.run.settings.resume == "allow"
            logger.log({"x": 1.0}, step=1)
            logger.finish()
        wandb.teardown()  # wandb reads the environment once a process: as a new process would
        return run_id

    first = start(tmp_path / "ckpt")
    assert (tmp_path / "ckpt" / RUN_ID_FILE).read_text().strip() == first
    assert start(tmp_path / "ckpt") == first
    assert start(tmp_path / "other") != first
    assert start(tmp_path / "ckpt", own="mine01") == "mine01"
    assert (tmp_path / "ckpt" / RUN_ID_FILE).read_text().strip() == first


def test_a_resumed_run_keeps_no_more_checkpoints_than_asked(verl_mods, monkeypatch, tmp_path, capsys):
    """verl rotates only the checkpoints its own start saved: a run resumed at step 24 kept
    global_step_8 and _16 of the start before it forever. After each save the trainer removes
    the oldest beyond trainer.max_actor_ckpt_to_keep, and never a later step's folder."""
    from recipe.verl_engine.checkpoint_rotation import stale_checkpoints
    from tests.verl_compose import _compose

    ckpt = tmp_path / "ckpt"
    for step in (8, 16, 24, 40):  # 40: a save a crash cut short, past the step resumed from
        (ckpt / f"global_step_{step}" / "actor").mkdir(parents=True)
    monkeypatch.setattr(
        verl_mods.ray_trainer.RayPPOTrainer,
        "_save_checkpoint",
        lambda self: (ckpt / f"global_step_{self.global_steps}" / "actor").mkdir(parents=True),
    )
    trainer = object.__new__(verl_mods.trainer.PasrRayTrainer)
    trainer.config = _compose([f"trainer.default_local_dir={ckpt}", "trainer.max_actor_ckpt_to_keep=2"])
    trainer.global_steps = 32
    trainer._save_checkpoint()
    assert sorted(p.name for p in ckpt.iterdir()) == ["global_step_24", "global_step_32", "global_step_40"]
    assert "removed global_step_8, a checkpoint of an earlier start" in capsys.readouterr().out
    assert stale_checkpoints(ckpt, None, 40) == [] and stale_checkpoints(ckpt, 0, 40) == []  # verl: keep all
    assert [p.name for p in stale_checkpoints(ckpt, 1, 32)] == ["global_step_24"]
