"""The verl 0.9.1 behaviour the verl engine relies on, pinned against the installed verl's source,
so an upgrade that changes it fails here: one ``generate_sequences`` call in ``fit``, the
``rm_scores`` and ``response_mask`` guards, the interleaved repeat, ``uid`` grouping in
``compute_advantage``, the agent-loop output layout, ``TaskRunner.run``'s set-up, ``run_ppo``'s
launch, ``fit``'s throughput metrics and loop, ``HFModelConfig``'s attention default, and
``verl.__version__``."""

from __future__ import annotations

import inspect
import textwrap

import numpy as np
import torch

from tests.verl_scripted_rollout import gen_batch, prompts, tokenizer, verl_mods  # noqa: F401  (fixtures)


def _source(obj) -> str:
    return textwrap.dedent(inspect.getsource(obj))


def test_pinned_verl_version():
    import verl

    assert verl.__version__ == "0.9.1", "the verl engine is written against verl 0.9.1; re-check the pinned assumptions"


def test_pinned_fit_generates_once_and_reads_rm_scores(verl_mods):
    fit = _source(verl_mods.ray_trainer.RayPPOTrainer.fit)
    # one rollout call per step, on the attribute our trainer replaces
    assert fit.count("self.async_rollout_manager.generate_sequences(") == 1
    # prompts repeated rollout.n times, interleaved, before that call; the step is passed along
    assert "rollout_n = self.config.actor_rollout_ref.rollout.n" in fit
    assert "gen_batch.repeat(repeat_times=rollout_n, interleave=True)" in fit
    assert 'gen_batch.meta_info["global_steps"] = self.global_steps' in fit
    # the returned rows are unioned row by row with the repeated batch
    assert "batch = batch.repeat(repeat_times=self.config.actor_rollout_ref.rollout.n, interleave=True)" in fit
    assert "batch = batch.union(gen_batch_output)" in fit
    # rewards: rm_scores from the rollout are used as they are, response_mask too
    assert 'if self.use_rm and "rm_scores" not in batch.batch.keys():' in fit
    assert "reward_tensor, reward_extra_infos_dict = extract_reward(batch)" in fit
    assert 'if "response_mask" not in batch.batch.keys():' in fit
    # rollout timing is logged, GRPO groups rollout.n rows
    assert 'timing_raw.update(combined_gen_output.meta_info["timing"])' in fit
    assert "num_repeat=self.config.actor_rollout_ref.rollout.n" in fit
    # the actor update's metrics are reduced into what the logger logs
    assert "actor_output = self._update_actor(batch)" in fit
    assert 'reduce_metrics(actor_output.meta_info["metrics"])' in fit
    assert "logger.log(data=metrics, step=self.global_steps)" in fit


def test_pinned_validate_and_init_workers(verl_mods):
    rt = verl_mods.ray_trainer.RayPPOTrainer
    validate = _source(rt._validate)
    assert "self.async_rollout_manager.generate_sequences(test_gen_batch_padded)" in validate
    assert '"validate": True' in validate
    assert "extract_reward(test_batch)" in validate
    init = _source(rt.init_workers)
    assert 'get("agent_loop_manager_class")' in init
    assert "self.async_rollout_manager = AgentLoopManager.create(" in init
    assert "reward_loop_worker_handles=reward_loop_worker_handles" in init
    # GRPO groups by uid
    assert 'index=data.non_tensor_batch["uid"]' in _source(verl_mods.ray_trainer.compute_advantage)


def test_pinned_agent_loop(verl_mods):
    al = verl_mods.agent_loop
    params = list(inspect.signature(al.AgentLoopManager.__init__).parameters)
    assert params == ["self", "config", "llm_client", "teacher_client", "reward_loop_worker_handles"]
    gen = _source(al.AgentLoopManager.generate_sequences)
    assert "prompts.chunk(len(self.agent_loop_workers))" in gen and "DataProto.concat(outputs)" in gen
    post = _source(al.AgentLoopWorker._postprocess)
    assert "if self.reward_loop_worker_handles is None and input_non_tensor_batch:" in post
    assert "response_length = attention_mask[:, prompt_length:].sum(dim=1) - 1" in post
    # concrete agent loops get every non-tensor column as a keyword argument
    assert "kwargs = {k: v[i] for k, v in batch.non_tensor_batch.items()" in _source(
        al.AgentLoopWorker.generate_sequences
    )


def _self_calls(src: str) -> set[str]:
    import re

    return set(re.findall(r"self\.(\w+)\(", src))


def test_pinned_task_runner_and_losses(verl_mods):
    """PasrTaskRunner.run does verl's TaskRunner.run set-up with its own body: the helpers and
    set-up functions verl's run calls are the ones ours calls, so a verl release that adds a
    step to its run fails here."""
    from verl.trainer.main_ppo import run_ppo
    from verl.workers.utils import losses

    verl_module = _source(verl_mods.main_ppo_v0)
    verl_run = verl_module[verl_module.index("class TaskRunner(BaseTaskRunner)") :]
    ours = _source(verl_mods.trainer.PasrTaskRunner.run)
    assert (
        _self_calls(verl_run)
        == _self_calls(ours)
        == {
            "add_actor_rollout_worker",
            "add_critic_worker",
            "add_reward_model_resource_pool",
            "add_teacher_model_resource_pool",
            "add_ref_policy_worker",
            "init_resource_pool_mgr",
        }
    )
    for call in (
        "validate_config(",
        "create_rl_dataset(",
        "create_rl_sampler(",
        "OmegaConf.resolve(config)",
        "omega_conf_to_dataclass(config.actor_rollout_ref.model)",
        "trainer.init_workers()",
        "trainer.fit()",
    ):
        assert call in verl_run and call in ours, call
    for key in ("train_max_samples", "val_max_samples"):
        assert key in verl_run
    assert verl_run.count("create_rl_dataset(") == 2 and "RayPPOTrainer(" in verl_run
    assert "PasrRayTrainer(" in ours and issubclass(
        verl_mods.trainer.PasrTaskRunner, verl_mods.main_ppo_v0.BaseTaskRunner
    )
    assert list(inspect.signature(run_ppo).parameters) == ["config", "task_runner_class"]
    assert 'data["response_mask"]' in _source(losses.ppo_loss)


def test_pinned_get_gen_batch_and_extract_reward(gen_batch, verl_mods):
    from verl import DataProto
    from verl.trainer.ppo.reward import extract_reward

    # fit()'s batch keeps only the reward keys; the generation batch has raw_prompt and them
    assert set(gen_batch.batch.non_tensor_batch) == {"data_source", "reward_model", "extra_info", "uid"}
    assert {"raw_prompt", "uid", "extra_info", "reward_model", "data_source"} <= set(gen_batch.gen.non_tensor_batch)
    d = DataProto.from_dict(
        tensors={"rm_scores": torch.ones(2, 3)},
        non_tensors={"acc": np.array([1.0, 0.0])},
        meta_info={"reward_extra_keys": ["acc"]},
    )
    scores, extra = extract_reward(d)
    assert scores.shape == (2, 3) and list(extra) == ["acc"]


def test_fit_is_rebound_without_touching_verl(verl_mods):
    t = verl_mods.trainer
    fit = t.verl_fit()
    assert fit.__globals__["compute_advantage"] is t.pasr_compute_advantage
    assert fit.__globals__["compute_throughout_metrics"] is t.pasr_throughput_metrics
    assert fit.__globals__["compute_timing_metrics"] is t.pasr_timing_metrics
    assert verl_mods.ray_trainer.compute_advantage is not t.pasr_compute_advantage
    assert fit.__code__ is vars(verl_mods.ray_trainer.RayPPOTrainer)["fit"].__code__


def test_pinned_fit_throughput_and_loop(verl_mods):
    fit = _source(verl_mods.ray_trainer.RayPPOTrainer.fit)
    assert "metrics.update(compute_throughout_metrics(batch=batch, timing_raw=timing_raw, n_gpus=n_gpus))" in fit
    # pasr/reward_time_share (pasr_timing_metrics): the rollout's timing (pasr_score) joins
    # timing_raw, and the timing metrics are computed once the step is timed
    assert 'timing_raw.update(combined_gen_output.meta_info["timing"])' in fit
    assert fit.index('steps_duration = timing_raw["step"]') < fit.index(
        "metrics.update(compute_timing_metrics(batch=batch, timing_raw=timing_raw))"
    )
    assert 'batch.meta_info["global_token_num"] = torch.sum(batch.batch["attention_mask"], dim=-1).tolist()' in fit
    # the stop check sits in the loader: a step ends (log, global_steps += 1) before the next batch is asked for
    assert fit.count("for batch_dict in self.train_dataloader:") == 1
    log = fit.index("logger.log(data=metrics, step=self.global_steps)")
    inc = fit.index("self.global_steps += 1", log)
    assert fit.index("if is_last_step:", inc) > inc and "for batch_dict" not in fit[log:]
    # metrics.jsonl (metrics_file_tracking): fit() takes Tracking from verl.utils.tracking when it
    # starts, and every dict it logs goes through that one logger's log()
    assert "from verl.utils.tracking import Tracking" in fit and "logger = Tracking(" in fit
    assert "logger.log(data=val_metrics, step=self.global_steps)" in fit
    assert fit.count("logger.log(") == 2 and "Tracking" not in vars(verl_mods.ray_trainer)
    assert "self._save_checkpoint()" in fit and "self._load_checkpoint()" in fit
    src = _source(verl_mods.ray_trainer.RayPPOTrainer._save_checkpoint)
    assert 'f"global_step_{self.global_steps}"' in src and "self.train_dataloader.state_dict()" in src
    fn = verl_mods.trainer.verl_fit()
    assert fn.__code__ is verl_mods.ray_trainer.RayPPOTrainer.fit.__code__
    assert fn.__globals__["compute_throughout_metrics"] is verl_mods.trainer.pasr_throughput_metrics
    assert verl_mods.ray_trainer.compute_throughout_metrics.__module__ == "verl.trainer.ppo.metric_utils"


def test_pinned_verl_defaults_to_flash_attention():
    from verl.workers.config import HFModelConfig

    assert 'self.override_config.get("attn_implementation", "flash_attention_2")' in _source(
        HFModelConfig.__post_init__
    )


def test_launcher_is_what_run_ppo_calls(verl_mods):
    from verl.trainer.main_ppo import run_ppo

    src = _source(run_ppo)
    assert "runner = task_runner_class.remote()" in src and "ray.get(runner.run.remote(config))" in src
    assert 'task_runner_class.options(runtime_env={"nsight": nsight_options}).remote()' in src
    launcher = verl_mods.trainer.PasrTaskRunnerActor
    assert launcher.options(runtime_env={"x": 1})._options == {"runtime_env": {"x": 1}}
    assert hasattr(launcher.actor_cls, "set_stop_flag") and hasattr(launcher.actor_cls, "run")
