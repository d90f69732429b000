"""The verl engine's trainer (:class:`recipe.verl_engine.trainer.PasrRayTrainer` and its set-up):
the actor update's PASR metrics and its skip when no token is trainable, the enforced agent loop
manager, the rollout manager built from the config, and the throughput metrics counting the plain
rows (issue 11.8)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from tests.verl_compose import config  # noqa: F401  (a fixture)
from tests.verl_scripted_rollout import gen_batch, prompts, tokenizer, train_step, verl_mods  # noqa: F401  (fixtures)


def test_update_actor_adds_pasr_metrics(verl_mods, monkeypatch, train_step):
    from verl import DataProto
    from verl.utils.metric import reduce_metrics

    t = verl_mods.trainer

    def fake_update(self, batch):
        return DataProto.from_single_dict(data={}, meta_info={"metrics": {"actor/pg_loss": [0.1, 0.3]}})

    monkeypatch.setattr(verl_mods.ray_trainer.RayPPOTrainer, "_update_actor", fake_update)
    trainer = object.__new__(t.PasrRayTrainer)
    trainer.global_steps = 5
    trainer.async_rollout_manager = SimpleNamespace(pop_metrics=lambda: {"pasr/refine_rate": 0.5})
    out = trainer._update_actor(train_step.out)
    reduced = reduce_metrics(out.meta_info["metrics"])
    assert reduced["pasr/refine_rate"] == 0.5 and reduced["actor/pg_loss"] == pytest.approx(0.2)
    assert reduced["actor/update_skipped"] == 0.0


def test_update_actor_skips_a_batch_with_nothing_to_train(verl_mods, monkeypatch, train_step, capsys):
    """Every row masked (every judge failed; an RRR step whose first attempts all succeeded): verl's
    token-mean loss would divide by zero tokens, so the actor is not called; the metrics still come."""
    t = verl_mods.trainer
    monkeypatch.setattr(verl_mods.ray_trainer.RayPPOTrainer, "_update_actor", lambda self, b: pytest.fail("updated"))
    trainer = object.__new__(t.PasrRayTrainer)
    trainer.global_steps = 5
    trainer.async_rollout_manager = SimpleNamespace(pop_metrics=lambda: {"pasr/refine_rate": 0.5})
    batch = train_step.out.slice(0, None)
    batch.batch = batch.batch.clone()
    batch.batch["response_mask"] = torch.zeros_like(batch.batch["response_mask"])
    out = trainer._update_actor(batch)
    assert out.meta_info["metrics"] == {"actor/update_skipped": 1.0, "pasr/refine_rate": 0.5}
    assert "step 5: no token to train on; the actor update is skipped" in capsys.readouterr().out


def test_agent_loop_manager_is_enforced(verl_mods):
    from omegaconf import OmegaConf

    t = verl_mods.trainer
    cfg = OmegaConf.create({"actor_rollout_ref": {"rollout": {"agent": {"num_workers": 1}}}})
    OmegaConf.set_struct(cfg, True)
    t._ensure_pasr_agent_loop_manager(cfg)
    assert cfg.actor_rollout_ref.rollout.agent.agent_loop_manager_class == t.AGENT_LOOP_MANAGER_FQN
    cfg.actor_rollout_ref.rollout.agent.agent_loop_manager_class = "verl.experimental.agent_loop.AgentLoopManager"
    with pytest.raises(t.PasrSetupError, match="not a subclass"):
        t._ensure_pasr_agent_loop_manager(cfg)
    assert issubclass(t.PasrAgentLoopManager, verl_mods.agent_loop.AgentLoopManager)


def test_build_rollout_manager_from_config(config, tokenizer):
    from recipe.verl_engine.rollout import build_rollout_manager
    from rewards.judges import RuleJudge

    inner = SimpleNamespace(generate_sequences=None, start_profile=lambda: "inner")
    manager = build_rollout_manager(config, tokenizer, inner)
    try:
        assert isinstance(manager.judge, RuleJudge) and manager.size_divisor == 8 and manager.run_id == "pasr"
        assert str(manager.rollout_dir) == "checkpoints/pasr/pasr/rollouts"
        assert manager.start_profile() == "inner"  # everything else is the wrapped manager's
    finally:
        manager.close()


def test_throughput_counts_the_plain_rows(train_step, gen_batch):
    from recipe.verl_engine.rollout_wrapper import UNTRAINED_TOKENS_KEY
    from recipe.verl_engine.trainer import pasr_throughput_metrics

    plain = train_step.out.meta_info[UNTRAINED_TOKENS_KEY]
    assert plain > 0
    # fit(): union with its repeated batch keeps the rollout's meta_info, then counts trained tokens
    batch = gen_batch.batch.repeat(repeat_times=3, interleave=True)
    out = train_step.out.slice(0, None)
    out.meta_info = {k: v for k, v in out.meta_info.items() if k != "timing"}
    batch = batch.union(out)
    batch.meta_info["global_token_num"] = torch.sum(batch.batch["attention_mask"], dim=-1).tolist()
    trained = sum(batch.meta_info["global_token_num"])
    m = pasr_throughput_metrics(batch, {"step": 2.0}, n_gpus=2)
    assert m["perf/trained_num_tokens"] == trained and m["perf/total_num_tokens"] == trained + plain
    assert m["perf/throughput"] == pytest.approx((trained + plain) / 4.0)
    assert m["perf/trained_throughput"] == pytest.approx(trained / 4.0)
    # 9 plain rows of about the same size as the 9 refine rows
    assert 0.5 < plain / trained < 1.5
