"""The verl trainer for PASR (and RRR, ``method=rrr``): ``RayPPOTrainer`` with the method's
rollout installed, nothing copied.

:class:`PasrRayTrainer` overrides these methods of verl 0.9.1's legacy ``RayPPOTrainer``:

* ``init_workers``: makes verl build its agent-loop manager without the streaming reward loop
  (:class:`recipe.verl_engine.agent_loop.PasrAgentLoopManager`), then replaces
  ``self.async_rollout_manager`` with the method's rollout around it
  (:func:`recipe.verl_engine.rollout.build_rollout_manager`: PASR's, or RRR's).
* ``_update_actor``: adds the step's ``pasr/*`` (``rrr/*``) metrics to the metrics the actor
  update returns; ``fit()`` merges those into the dict it logs with verl's ``Tracking`` logger
  (console, wandb, ...). verl does not log reward extra info during training by itself. A batch
  with no token to train on (an RRR step whose first attempts all succeeded; a step whose every
  row had a judge error) is not sent to the actor: verl's token-mean loss would divide by zero
  tokens (``actor/update_skipped`` = 1, see :func:`nothing_to_train`).
* ``fit``: verl's own ``fit`` (re-bound, not copied) with five changes around it:
  advantages are estimated over the rows PASR trains on only (:func:`pasr_compute_advantage`,
  the judge-error policy of :mod:`recipe.scoring`), ``perf/throughput`` counts the rows
  generated in the step but not trained on (:func:`pasr_throughput_metrics`), the timing
  metrics add the local engine's ``pasr/reward_time_share`` (:func:`pasr_timing_metrics`), every dict its
  logger logs is also a line of ``metrics.jsonl`` in ``trainer.default_local_dir``, as the local
  engine writes its own (:func:`metrics_file_tracking`; ``_load_checkpoint`` cuts the file back
  to the step it resumes from; the tensorboard backend writes to ``tensorboard/`` beside it
  unless ``TENSORBOARD_DIR`` is set), and a stop request (SIGTERM / Ctrl-C on the driver, see below)
  ends the run at the end of the current step with a checkpoint, as Ctrl-C does in the local
  engine.

:class:`PasrTaskRunner` sets up what verl's ``TaskRunner.run`` sets up (workers, resource pools,
tokenizer, datasets) with verl's own helpers, and builds a :class:`PasrRayTrainer`. verl's
``TaskRunner`` is a Ray actor class, which cannot be subclassed, so, like verl-recipe's
``DAPOTaskRunner``, it subclasses the plain ``BaseTaskRunner`` behind it with a ``run`` of its
own. Before that it takes the two decisions that depend on the node it runs on (the judge
client and the trainer live there, and Ray may place it on any node): the attention
implementation (:func:`recipe.verl_engine.config.choose_attention`) and whether the judge
answers from there. ``tests/test_verl_pinned.py`` pins the assumptions this rests on (the
helpers verl's own ``run`` calls are the ones called here).

Stopping (SIGTERM from ``ray job stop``, Ctrl-C): :mod:`recipe.verl_engine.stopping` relays the
driver's signal to the trainer, which finishes the step, checkpoints and returns. After each
save the checkpoints of earlier starts beyond ``trainer.max_actor_ckpt_to_keep`` are removed too
(verl counts only its own start's: :mod:`recipe.verl_engine.checkpoint_rotation`).

Importing this module needs verl's trainer stack (vLLM's dependencies uvicorn and fastapi).
"""

from __future__ import annotations

import os
import socket
import types
from contextlib import contextmanager

import ray
from omegaconf import OmegaConf, open_dict
from verl.trainer.main_ppo_v0 import BaseTaskRunner
from verl.trainer.ppo import ray_trainer as _verl_ray_trainer
from verl.trainer.ppo.ray_trainer import RayPPOTrainer

from recipe.advantages import advantages_on_trained_rows
from recipe.metrics import reward_time_share
from recipe.metrics_file import append_metrics, truncate_metrics, use_run_tensorboard_dir
from recipe.verl_engine.agent_loop import FQN as AGENT_LOOP_MANAGER_FQN
from recipe.verl_engine.agent_loop import PasrAgentLoopManager
from recipe.verl_engine.checkpoint_rotation import remove_stale_checkpoints
from recipe.verl_engine.rollout_wrapper import UNTRAINED_TOKENS_KEY
from recipe.verl_engine.stopping import PasrTaskRunnerLauncher, StopAwareLoader, attach, poll_stop_flag


class PasrSetupError(RuntimeError):
    """The verl side is not set up the way PASR needs (a config that bypassed the preflight)."""


def _ensure_pasr_agent_loop_manager(config) -> None:
    agent = config.actor_rollout_ref.rollout.agent
    current = agent.get("agent_loop_manager_class")
    if not current:
        with open_dict(agent):
            agent.agent_loop_manager_class = AGENT_LOOP_MANAGER_FQN
        return
    if current == AGENT_LOOP_MANAGER_FQN:
        return
    from verl.utils.import_utils import load_class_from_fqn

    cls = load_class_from_fqn(current, "AgentLoopManager")
    if not (isinstance(cls, type) and issubclass(cls, PasrAgentLoopManager)):
        raise PasrSetupError(
            f"actor_rollout_ref.rollout.agent.agent_loop_manager_class={current} is not a subclass of "
            f"{AGENT_LOOP_MANAGER_FQN}: verl's reward loop would score PASR rollouts with its default "
            "reward function"
        )


# --------------------------------------------------------------------------- re-binding verl code
def rebind_globals(func: types.FunctionType, **names) -> types.FunctionType:
    """``func`` with the global ``names`` resolving to the given objects (a copy of its module
    globals; the module itself is untouched)."""
    if func.__closure__ is not None:
        raise PasrSetupError(f"{func.__qualname__} is a closure; cannot re-bind its globals")
    for name in names:
        if name not in func.__code__.co_names:
            raise PasrSetupError(f"{func.__qualname__} no longer uses the global {name}")
    scope = dict(func.__globals__)
    scope.update(names)
    return types.FunctionType(func.__code__, scope, func.__name__, func.__defaults__, None)


def pasr_throughput_metrics(batch, timing_raw, n_gpus):
    """verl's ``compute_throughout_metrics`` with the untrained rows counted.

    verl divides the tokens of the batch it trains on by the whole step time. A PASR step also
    generates ``n_plain`` plain rows per prompt (half the rollouts with the defaults), an RRR step
    its first attempts and retries; they never reach that batch, so verl's figure understates the
    step's throughput by about that share. ``perf/total_num_tokens`` and ``perf/throughput`` count
    both; ``perf/trained_num_tokens`` and ``perf/trained_throughput`` keep verl's trained-rows-only
    figures."""
    metrics = _verl_ray_trainer.compute_throughout_metrics(batch=batch, timing_raw=timing_raw, n_gpus=n_gpus)
    trained = metrics["perf/total_num_tokens"]
    total = trained + int(batch.meta_info.get(UNTRAINED_TOKENS_KEY, 0))
    metrics["perf/trained_num_tokens"] = trained
    metrics["perf/trained_throughput"] = metrics["perf/throughput"]
    metrics["perf/total_num_tokens"] = total
    metrics["perf/throughput"] = total / (metrics["perf/time_per_step"] * n_gpus)
    return metrics


def pasr_timing_metrics(batch, timing_raw):
    """verl's ``compute_timing_metrics`` and ``pasr/reward_time_share``, the local engine's
    metric (:func:`recipe.metrics.reward_time_share`): the PASR rollout's judging and scoring
    (``timing_s/pasr_score``, timed inside ``timing_s/gen``) over the whole step (``timing_s/step``).
    fit() times the step only after the rollout returned, so the share is computed here."""
    metrics = _verl_ray_trainer.compute_timing_metrics(batch=batch, timing_raw=timing_raw)
    if "pasr_score" in timing_raw:  # a PASR step (an RRR step times its passes under rrr_*)
        metrics.update(reward_time_share(timing_raw["pasr_score"], timing_raw["step"]))
    return metrics


def pasr_compute_advantage(data, adv_estimator, *args, **kwargs):
    """verl's ``compute_advantage`` (any estimator) on the rows PASR trains on; the rows masked
    for a judge error are outside their group's statistics and get advantage 0, as in the local
    engine (:mod:`recipe.advantages`)."""
    return advantages_on_trained_rows(
        data, lambda rows: _verl_ray_trainer.compute_advantage(rows, adv_estimator, *args, **kwargs)
    )


def verl_fit():
    """verl's ``RayPPOTrainer.fit`` with :func:`pasr_compute_advantage`,
    :func:`pasr_throughput_metrics` and :func:`pasr_timing_metrics` in place of verl's
    ``compute_advantage``, ``compute_throughout_metrics`` and ``compute_timing_metrics``
    (re-bound at each call, so it sees verl's module as it is)."""
    return rebind_globals(
        vars(RayPPOTrainer)["fit"],
        compute_advantage=pasr_compute_advantage,
        compute_throughout_metrics=pasr_throughput_metrics,
        compute_timing_metrics=pasr_timing_metrics,
    )


VALIDATION_PREFIXES = ("val-core/", "val-aux/")  # the keys of verl's _validate metrics


@contextmanager
def metrics_file_tracking(run_dir: str, method: str):
    """While the block runs, the ``Tracking`` verl's ``fit()`` makes (it imports the class from
    ``verl.utils.tracking`` when it starts) also appends every dict it logs to
    ``run_dir/metrics.jsonl`` (:func:`recipe.metrics_file.append_metrics`, the local engine's
    writer): ``phase`` is ``method``, or ``eval`` for a validation logged alone (before the first
    step). The backends of ``trainer.logger`` get the same dicts as before; wandb's run is the one
    whose id ``run_dir`` keeps (:func:`recipe.tracker_run.resume_wandb_run`), so a resumed run
    logs into the run it started."""
    from verl.utils import tracking

    from recipe.tracker_run import logs_to_wandb, resume_wandb_run
    from rewards.judges.redact import redact_urls_in

    verl_tracking = tracking.Tracking

    class MetricsFileTracking(verl_tracking):
        def __init__(self, project_name, experiment_name, default_backend="console", config=None):
            if logs_to_wandb(default_backend):  # a resumed run logs into the same wandb run
                resume_wandb_run(run_dir)
            # wandb and mlflow write the run's config to disk and to their server: no URL credentials
            super().__init__(project_name, experiment_name, default_backend, config=redact_urls_in(config))

        def log(self, data, step, backend=None):
            if backend is None:  # the step's whole dict (fit() names no backend)
                validation = bool(data) and all(str(k).startswith(VALIDATION_PREFIXES) for k in data)
                append_metrics(run_dir, step, "eval" if validation else method, data)
            super().log(data=data, step=step, backend=backend)

    tracking.Tracking = MetricsFileTracking
    try:
        yield
    finally:
        tracking.Tracking = verl_tracking


def nothing_to_train(batch) -> bool:
    """No response token of ``batch`` is in the loss. verl's actor would still run the update:
    its token-mean loss divides by the batch's loss tokens (0: NaN), and only its non-finite
    gradient check keeps the weights, with NaN loss metrics and a warning per mini-batch."""
    return not bool(batch.batch["response_mask"].any())


# --------------------------------------------------------------------------- trainer
class PasrRayTrainer(RayPPOTrainer):
    """verl's PPO trainer with the method's rollout (PASR: plain baselines, PASR rewards, refine
    rows only; RRR: attempts, reflections and retries, reflection rows only)."""

    def init_workers(self):
        _ensure_pasr_agent_loop_manager(self.config)
        super().init_workers()
        inner = self.async_rollout_manager
        if getattr(inner, "reward_loop_worker_handles", None):
            raise PasrSetupError("the agent loop manager still streams rewards through verl's reward loop")
        from recipe.verl_engine.rollout import build_rollout_manager

        self.async_rollout_manager = build_rollout_manager(self.config, self.tokenizer, inner)

    def _update_actor(self, batch):
        from verl import DataProto

        skipped = nothing_to_train(batch)
        if skipped:
            print(f"pasr verl: step {self.global_steps}: no token to train on; the actor update is skipped", flush=True)
            actor_output = DataProto.from_single_dict(data={}, meta_info={"metrics": {}})
        else:
            actor_output = super()._update_actor(batch)
        metrics = actor_output.meta_info.setdefault("metrics", {})
        metrics["actor/update_skipped"] = float(skipped)
        pop = getattr(self.async_rollout_manager, "pop_metrics", None)
        if callable(pop):
            metrics.update(pop())
        return actor_output

    # ---------------------------------------------------------------- checkpoints and stopping
    def _load_checkpoint(self):
        result = super()._load_checkpoint()
        self._last_saved_step = self.global_steps  # the resumed step (0 from scratch) is on disk
        # the steps after it are logged again: metrics.jsonl holds each once
        truncate_metrics(str(self.config.trainer.default_local_dir), self.global_steps)
        return result

    def _save_checkpoint(self):
        super()._save_checkpoint()
        self._last_saved_step = self.global_steps
        # verl rotates only the checkpoints this start saved: those of starts before a resume too
        trainer = self.config.trainer
        remove_stale_checkpoints(trainer.default_local_dir, trainer.get("max_actor_ckpt_to_keep"), self.global_steps)

    def _stop_requested(self) -> bool:
        if getattr(self, "_stop_reason", None) is None:
            self._stop_reason = poll_stop_flag()
            if self._stop_reason is not None:
                print(
                    f"pasr verl: {self._stop_reason} received: stopping after step {self.global_steps - 1}", flush=True
                )
        return self._stop_reason is not None

    def _checkpoint_on_stop(self) -> str | None:
        """After ``fit()`` ended on a stop request: save the last finished step unless it is on
        disk already; returns the checkpoint folder or None."""
        last = self.global_steps - 1  # fit() counts one past the step it finished
        if last <= getattr(self, "_last_saved_step", 0):
            print(f"pasr verl: stopped after step {last}; its checkpoint is already saved", flush=True)
            return None
        if self.config.trainer.save_freq <= 0:
            print(f"pasr verl: stopped after step {last}; no checkpoint (trainer.save_freq <= 0)", flush=True)
            return None
        self.global_steps = last
        try:
            self._save_checkpoint()
        finally:
            self.global_steps = last + 1
        folder = os.path.join(str(self.config.trainer.default_local_dir), f"global_step_{last}")
        print(f"pasr verl: stopped after step {last}; checkpoint {folder} (the same command resumes)", flush=True)
        return folder

    def fit(self):
        if not isinstance(self.train_dataloader, StopAwareLoader):
            self.train_dataloader = StopAwareLoader(self.train_dataloader, self._stop_requested)
        from recipe.verl_engine.config import method_of

        run_dir = str(self.config.trainer.default_local_dir)
        use_run_tensorboard_dir(run_dir)  # beside metrics.jsonl, as in the local engine
        with metrics_file_tracking(run_dir, method_of(self.config)):
            result = verl_fit()(self)
        if getattr(self, "_stop_reason", None) is not None:
            self._checkpoint_on_stop()
        return result


# --------------------------------------------------------------------------- task runner
def node_checks(config, *, has_flash_attn=None, judge_check=None, node: str | None = None) -> list[str]:
    """What the task runner decides on its own node before verl builds anything: the attention
    implementation (``config`` is changed in place) and whether the judge answers from here.
    Returns the lines to log; raises :class:`PasrSetupError` when the judge does not answer."""
    from recipe.verl_engine.config import check_judge_endpoint, choose_attention, engine_config, pasr_config

    lines = []
    kwargs = {"has_flash_attn": has_flash_attn} if has_flash_attn is not None else {}
    message = choose_attention(config, **kwargs)
    if message:
        lines.append(message)
    if engine_config(config).check_judge:
        why = (judge_check or check_judge_endpoint)(pasr_config(config))
        if why:
            where = f"node {node}" if node else "the trainer's node"
            raise PasrSetupError(
                f"{why}, checked from {where}, where the trainer and its judge client run (a 127.0.0.1 or "
                "node-local judge URL must be reachable from there; pasr_verl.check_judge=false skips this check)"
            )
    return lines


class PasrTaskRunner(BaseTaskRunner):
    """verl's task runner set-up, building a :class:`PasrRayTrainer`."""

    def set_stop_flag(self, flag) -> None:
        attach(flag)

    def run(self, config):
        from verl.trainer.ppo.utils import create_rl_dataset, create_rl_sampler, need_critic, need_reference_policy
        from verl.utils.config import omega_conf_to_dataclass, validate_config
        from verl.utils.dataset.rl_dataset import collate_fn

        print(f"pasr verl: task runner on {socket.gethostname()} (pid {os.getpid()})", flush=True)
        from recipe.verl_engine.config import engine_config, wait_for_model

        wait_for_model(config.actor_rollout_ref.model.path, engine_config(config).wait_for_model_s)
        for line in node_checks(config, node=ray.util.get_node_ip_address()):
            print(f"pasr verl: {line}", flush=True)
        OmegaConf.resolve(config)
        from rewards.judges.redact import redact_url

        print(redact_url(OmegaConf.to_yaml(config)), flush=True)  # the job's log keeps it: no URL credentials

        # the roles and their worker classes, then the resource pools, as verl's own run does
        actor_rollout_cls, worker_group_cls = self.add_actor_rollout_worker(config)
        self.add_critic_worker(config)
        self.add_reward_model_resource_pool(config)
        self.add_teacher_model_resource_pool(config)
        self.add_ref_policy_worker(config, actor_rollout_cls)
        validate_config(
            config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config)
        )
        model = omega_conf_to_dataclass(config.actor_rollout_ref.model)  # HFModelConfig: tokenizer, processor
        resource_pool_manager = self.init_resource_pool_mgr(config)

        def dataset(files, split: str, is_train: bool):
            limit = config.data.get(f"{split}_max_samples", -1)
            return create_rl_dataset(
                files, config.data, model.tokenizer, model.processor, is_train=is_train, max_samples=limit
            )

        train_dataset = dataset(config.data.train_files, "train", True)
        trainer = PasrRayTrainer(
            config=config,
            tokenizer=model.tokenizer,
            processor=model.processor,
            role_worker_mapping=self.role_worker_mapping,
            resource_pool_manager=resource_pool_manager,
            ray_worker_group_cls=worker_group_cls,
            train_dataset=train_dataset,
            val_dataset=dataset(config.data.val_files, "val", False),
            collate_fn=collate_fn,
            train_sampler=create_rl_sampler(config.data, train_dataset),
        )
        trainer.init_workers()
        trainer.fit()


PasrTaskRunnerActor = PasrTaskRunnerLauncher(ray.remote(num_cpus=1)(PasrTaskRunner))
