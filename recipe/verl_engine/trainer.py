"""The verl trainer for PASR: ``RayPPOTrainer`` with the PASR rollout installed, nothing copied.

:class:`PasrRayTrainer` overrides two methods of verl 0.9.1's legacy ``RayPPOTrainer``:

* ``init_workers``: makes verl build its agent-loop manager without the streaming reward loop
  (:class:`recipe.verl_engine.agent_loop.PasrAgentLoopManager`), then replaces
  ``self.async_rollout_manager`` with :class:`recipe.verl_engine.rollout.PasrRolloutManager`
  around it. ``fit()`` is inherited unchanged.
* ``_update_actor``: adds the step's ``pasr/*`` metrics to the metrics the actor update returns;
  ``fit()`` merges those into the dict it logs with verl's ``Tracking`` logger (console, wandb,
  ...). verl does not log reward extra info during training by itself.

:class:`PasrTaskRunner` is verl's own ``TaskRunner.run`` (datasets, tokenizer, resource pools)
run with ``RayPPOTrainer`` resolved to :class:`PasrRayTrainer`: the function is re-bound to a copy
of its module globals in which that one name differs, so no verl module is modified and the 60
lines of setup are not copied. ``tests/test_verl_engine.py`` pins the assumptions this rests on.

Importing this module needs verl's trainer stack (vLLM's dependencies uvicorn and fastapi).
"""

from __future__ import annotations

import types

import ray
from omegaconf import open_dict

from verl.trainer.main_ppo_v0 import BaseTaskRunner
from verl.trainer.main_ppo_v0 import TaskRunner as _VerlTaskRunnerActor
from verl.trainer.ppo.ray_trainer import RayPPOTrainer

from recipe.verl_engine.agent_loop import FQN as AGENT_LOOP_MANAGER_FQN
from recipe.verl_engine.agent_loop import PasrAgentLoopManager


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


class PasrRayTrainer(RayPPOTrainer):
    """verl's PPO trainer with PASR's rollout (plain baselines, PASR rewards, refine rows only)."""

    def init_workers(self):
        _ensure_pasr_agent_loop_manager(self.config)
        super().init_workers()
        inner = self.async_rollout_manager
        if getattr(inner, "reward_loop_worker_handles", None):
            raise PasrSetupError("the agent loop manager still streams rewards through verl's reward loop")
        from recipe.verl_engine.rollout import build_rollout_manager

        self.async_rollout_manager = build_rollout_manager(self.config, self.tokenizer, inner)

    def _update_actor(self, batch):
        actor_output = super()._update_actor(batch)
        pop = getattr(self.async_rollout_manager, "pop_metrics", None)
        if callable(pop):
            actor_output.meta_info.setdefault("metrics", {}).update(pop())
        return actor_output


def verl_task_runner_class() -> type:
    """The class verl wrote, behind its ``@ray.remote`` ``TaskRunner`` (Ray subclasses it and wraps
    its methods for tracing; the original is next in the MRO)."""
    modified = _VerlTaskRunnerActor.__ray_metadata__.modified_class
    for cls in modified.__mro__:
        if cls.__module__ == "verl.trainer.main_ppo_v0" and cls.__qualname__ == "TaskRunner":
            return cls
    raise PasrSetupError("cannot find verl's TaskRunner class behind verl.trainer.main_ppo_v0.TaskRunner")


def rebind_trainer_class(func: types.FunctionType, trainer_cls: type) -> types.FunctionType:
    """``func`` with the global name ``RayPPOTrainer`` resolving to ``trainer_cls``."""
    if func.__closure__ is not None:
        raise PasrSetupError(f"{func.__qualname__} is a closure; cannot re-bind its globals")
    if "RayPPOTrainer" not in func.__code__.co_names:
        raise PasrSetupError(f"{func.__qualname__} no longer constructs RayPPOTrainer by name")
    scope = dict(func.__globals__)
    scope["RayPPOTrainer"] = trainer_cls
    return types.FunctionType(func.__code__, scope, func.__name__, func.__defaults__, None)


class PasrTaskRunner(BaseTaskRunner):
    """verl's TaskRunner building a :class:`PasrRayTrainer`."""

    def run(self, config):
        run = rebind_trainer_class(vars(verl_task_runner_class())["run"], PasrRayTrainer)
        return run(self, config)


PasrTaskRunnerActor = ray.remote(num_cpus=1)(PasrTaskRunner)
