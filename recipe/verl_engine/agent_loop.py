"""verl's agent-loop rollout manager without verl's streaming reward loop.

With no reward model, verl 0.9.1 hands its agent loop workers the reward-loop workers, which
score each sample with ``reward.custom_reward_function`` (or verl's default rule scores, which
raise ``NotImplementedError`` for a data source they do not know) as it finishes. PASR scores in
:class:`recipe.verl_engine.rollout.PasrRolloutManager` instead, where the plain rollouts of the
same query are available (RRR in :class:`recipe.verl_engine.rrr_rollout.RrrRolloutManager`,
where a reflection's reward is its retry's), so this manager is built without those handles: the
workers then skip scoring and forward the input columns with the generated rows.

Selected with ``actor_rollout_ref.rollout.agent.agent_loop_manager_class`` (verl's own
extension point, set in ``recipe/config/pasr_trainer.yaml`` and enforced by the trainer).
"""

from __future__ import annotations

from verl.experimental.agent_loop import AgentLoopManager

FQN = "recipe.verl_engine.agent_loop.PasrAgentLoopManager"


class PasrAgentLoopManager(AgentLoopManager):
    def __init__(self, config, llm_client, teacher_client=None, reward_loop_worker_handles=None):
        super().__init__(config, llm_client, teacher_client=teacher_client, reward_loop_worker_handles=None)
