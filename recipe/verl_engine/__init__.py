"""The verl engine: PASR on a Ray cluster with vLLM rollouts and FSDP actors.

verl's legacy ``RayPPOTrainer.fit()`` is used as is. PASR's whole difference sits behind the one
call ``fit()`` makes per step, ``self.async_rollout_manager.generate_sequences(batch)``:

* :mod:`recipe.verl_engine.plain_rollouts` adds the plain-prompted rows to the generation batch
  and slices them off again (pure functions on ``DataProto``);
* :mod:`recipe.verl_engine.batch_convert` reads generated rows as the step core's rollouts
  (:mod:`recipe.scoring`, shared with the local engine) and writes its scores and judge-error
  mask back as verl's token-level ``rm_scores``, ``response_mask`` and ``pasr_trained``;
* :mod:`recipe.verl_engine.rollout` is the wrapper that does both around verl's rollout manager;
* :mod:`recipe.verl_engine.agent_loop` keeps verl's own reward loop out of the rollout;
* :mod:`recipe.verl_engine.trainer` installs the wrapper (a small ``RayPPOTrainer`` subclass whose
  advantages skip masked rows) and the Ray task runner that builds it;
* :mod:`recipe.verl_engine.config` checks a composed config and the GPUs before anything starts
  (``python3 -m recipe.main_pasr``, ``pasr submit``) and picks the attention implementation;
* :mod:`recipe.verl_engine.stopping` relays SIGTERM / Ctrl-C from the driver to the trainer, which
  stops after the step with a checkpoint;
* :mod:`recipe.verl_engine.hf_export` turns a verl FSDP checkpoint into a Hugging Face folder
  (``pasr eval --model .../global_step_N``).

Only ``agent_loop`` and ``trainer`` import verl's trainer stack (which needs the GPU extras:
vLLM, uvicorn, fastapi); the other modules import on any machine.
"""
