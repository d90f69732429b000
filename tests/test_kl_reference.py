"""The local engine's KL reference (recipe/local_engine/kl_reference.py): by default read from the
checkpoint the RL phase started from for each step's reference log-probs and dropped before the
update, where a step's memory peaks; with ``algo.ref_in_memory=true`` held for the whole phase.
Both give the same run."""

from __future__ import annotations

import json
import weakref

import pytest
import torch

from recipe.local_engine.config import load_config


class AlternatingJudge:
    """Right on every other answer: reward spread in every group, so the policy moves."""

    name = "alternating"

    async def score_many(self, items):
        from rewards.judges.base import JudgeResult

        return [JudgeResult(float(i % 2)) for i, _ in enumerate(items)]


def _run(tiny_model_dir, run_dir, in_memory: bool, monkeypatch, capfd):
    """A tiny run (2 warm-up steps, 3 PASR steps with KL) noting, at each micro-batch's loss, how
    many reference models are alive; returns (its PASR metrics without timings, that count, the
    number of reference loads, the final weights). Loading the reference prints no progress bar
    of its own inside the run's."""
    import recipe.local_engine.policy_update as pu
    from recipe.local_engine.trainer import LocalPasrTrainer

    cfg = load_config(
        overrides=[
            f"model.path={tiny_model_dir}",
            "model.threads=1",
            "warmup.steps=2",
            "warmup.batch_size=2",
            "warmup.n_traces=8",
            "trainer.steps=3",
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
            "algo.lr=1e-3",  # the policy moves away from the reference: a KL term that tells them apart
            f"algo.ref_in_memory={str(in_memory).lower()}",
        ]
    )
    trainer = LocalPasrTrainer(cfg, run_dir)
    trainer.setup()
    trainer.judge = AlternatingJudge()
    loaded, alive = [], []
    load = trainer._load_phase_start

    def noting_load():
        model = load()
        loaded.append(weakref.ref(model))
        return model

    trainer._load_phase_start = noting_load
    loss = pu.core_algos.compute_policy_loss_vanilla

    def noting_loss(**kwargs):
        alive.append(sum(ref() is not None for ref in loaded))
        return loss(**kwargs)

    monkeypatch.setattr(pu.core_algos, "compute_policy_loss_vanilla", noting_loss)
    capfd.readouterr()
    trainer.fit()
    assert "Loading weights" not in capfd.readouterr().err
    monkeypatch.undo()
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    timed = ("timing_s/", "pasr/reward_time_share")
    metrics = [{k: v for k, v in x.items() if not k.startswith(timed)} for x in lines if x["phase"] == "pasr"]
    return metrics, alive, len(loaded), {n: p.detach().clone() for n, p in trainer.model.named_parameters()}


def test_a_reference_read_for_each_step_gives_the_run_of_a_held_one_without_its_weights_in_the_update(
    tiny_model_dir, tmp_path, monkeypatch, capfd
):
    disk, disk_alive, disk_loads, disk_weights = _run(tiny_model_dir, tmp_path / "disk", False, monkeypatch, capfd)
    held, held_alive, held_loads, held_weights = _run(tiny_model_dir, tmp_path / "held", True, monkeypatch, capfd)
    assert disk_loads == 3 and set(disk_alive) == {0}  # read once a step, gone before every loss
    assert held_loads == 0  # the warm-up's end copied once, kept for every step
    assert [m["step"] for m in disk] == [3, 4, 5]
    assert disk[-1]["actor/kl_loss"] > 0
    assert disk == held  # the same reference log-probs: the same losses, rewards, rollouts' metrics
    for name, w in held_weights.items():
        torch.testing.assert_close(disk_weights[name], w, rtol=0, atol=0, msg=name)


def test_the_memory_keys_are_ones_a_resume_may_change():
    """They change how much is held at once, not what is trained: a resume takes them without --force."""
    from recipe.local_engine.cli import RESUMABLE_KEYS

    cfg = load_config()
    assert (cfg.algo.ref_in_memory, cfg.algo.micro_batch_size, cfg.warmup.micro_batch_size) == (False, 4, 4)
    assert {"algo.ref_in_memory", "algo.micro_batch_size", "warmup.micro_batch_size"} <= set(RESUMABLE_KEYS)
    with pytest.raises(Exception, match="ref_in_memory"):
        load_config(overrides=["algo.ref_in_memory=maybe"])
    with pytest.raises(Exception, match="warmup.micro_batch_size must be >= 1"):
        load_config(overrides=["warmup.micro_batch_size=0"])
