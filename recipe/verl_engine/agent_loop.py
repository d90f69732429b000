"""verl's agent-loop rollout manager without verl's streaming reward loop, and the agent loop
that starts PASR's responses with the ``<think>`` prefill.

With no reward model, verl 0.9.1 hands its agent loop workers the reward-loop workers, which
score each sample with ``reward.custom_reward_function`` (or verl's default rule scores, which
raise ``NotImplementedError`` for a data source they do not know) as it finishes. PASR scores in
:class:`recipe.verl_engine.rollout.PasrRolloutManager` instead, where the plain rollouts of the
same query are available (RRR in :class:`recipe.verl_engine.rrr_rollout.RrrRolloutManager`,
where a reflection's reward is its retry's), so this manager is built without those handles: the
workers then skip scoring and forward the input columns with the generated rows.

Selected with ``actor_rollout_ref.rollout.agent.agent_loop_manager_class`` (verl's own
extension point, set in ``recipe/config/pasr_trainer.yaml`` and enforced by the trainer).

:class:`ThinkPrefillAgentLoop` is verl's single-turn agent loop with ``prompts.THINK_PREFILL``
after the chat template's generation prompt, as the local engine renders a PASR prompt
(``pasr.prefill_think``); the PASR rollout names it per row (``agent_name``). verl's agent-loop
registry is per process, so the manager's workers are :class:`PasrAgentLoopWorker`, a class of
this module: Ray imports an actor's class by module in the worker's process, and with it the
registration.
"""

from __future__ import annotations

import ray
from verl.experimental.agent_loop import AgentLoopManager
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker, register
from verl.experimental.agent_loop.single_turn_agent_loop import SingleTurnAgentLoop

from prompts import THINK_PREFILL
from recipe.verl_engine.plain_rollouts import THINK_PREFILL_AGENT

FQN = "recipe.verl_engine.agent_loop.PasrAgentLoopManager"


@register(THINK_PREFILL_AGENT)
class ThinkPrefillAgentLoop(SingleTurnAgentLoop):
    """verl's single-turn agent loop whose prompt token ids end with the ``<think>`` prefill's.

    The prefill is prompt: the server continues from it, and it is in neither ``response_ids``
    nor ``response_mask`` (never trained, not counted as output tokens). A prompt longer than
    ``rollout.prompt_length`` with it is cut from the left, as verl cuts any prompt."""

    async def ct_build_initial_tokens(self, messages, **kwargs) -> list[int]:
        prompt_ids = await super().ct_build_initial_tokens(messages, **kwargs)
        prefill = self.tokenizer.encode(THINK_PREFILL, add_special_tokens=False)
        return self._cap_text_prompt_length(list(prompt_ids) + prefill)


class PasrAgentLoopWorker(AgentLoopWorker):
    """verl's agent-loop worker, defined here so that its Ray actor process imports this module
    and so registers :class:`ThinkPrefillAgentLoop`."""


class PasrAgentLoopManager(AgentLoopManager):
    def __init__(self, config, llm_client, teacher_client=None, reward_loop_worker_handles=None):
        self.agent_loop_workers_class = ray.remote(PasrAgentLoopWorker)  # verl's AgentLoopManager keeps a set one
        super().__init__(config, llm_client, teacher_client=teacher_client, reward_loop_worker_handles=None)
