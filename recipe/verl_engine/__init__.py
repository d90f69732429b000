"""The verl engine: PASR (or RRR, ``method=rrr``) on a Ray cluster with vLLM rollouts and FSDP
actors.

verl's legacy ``RayPPOTrainer.fit()`` is used as is. A method's whole difference sits behind the
one call ``fit()`` makes per step, ``self.async_rollout_manager.generate_sequences(batch)``:

* :mod:`recipe.verl_engine.plain_rollouts` adds the plain-prompted rows to the generation batch
  and slices them off again, and sets the chats of follow-up passes (pure functions on
  ``DataProto``);
* :mod:`recipe.verl_engine.batch_convert` reads generated rows as the step core's rollouts
  (:mod:`recipe.scoring`, shared with the local engine) and writes its scores and judge-error
  mask back as verl's token-level ``rm_scores``, ``response_mask`` and ``pasr_trained``;
* :mod:`recipe.verl_engine.rollout` is the PASR wrapper that does both around verl's rollout
  manager, :mod:`recipe.verl_engine.rrr_rollout` the Reflect, Retry, Reward one (attempts,
  reflections on the failed ones, retries; the reflection rows are trained), and
  :mod:`recipe.verl_engine.rollout_wrapper` what the two share (judge loop, dumps, judge-error
  stop, metrics hand-over);
* :mod:`recipe.verl_engine.agent_loop` keeps verl's own reward loop out of the rollout;
* :mod:`recipe.verl_engine.trainer` installs the wrapper (a small ``RayPPOTrainer`` subclass whose
  advantages skip masked rows) and the Ray task runner that builds it;
* :mod:`recipe.verl_engine.config` checks a composed config (``method``, ``pasr.*``, ``rrr.*``,
  ``pasr_verl.*``) and the GPUs before anything starts
  (``python3 -m recipe.main_pasr``, ``pasr submit``) and picks the attention implementation;
* :mod:`recipe.verl_engine.stopping` relays SIGTERM / Ctrl-C from the driver to the trainer, which
  stops after the step with a checkpoint;
* turning a verl FSDP checkpoint into a Hugging Face folder (``pasr eval --model
  .../global_step_N``) is the model runtime's job: :mod:`runtime.hf_export`, which
  :func:`runtime.model_loading.resolve_model_path` calls (the runtime imports no engine).

Only ``agent_loop`` and ``trainer`` import verl's trainer stack (which needs the GPU extras:
vLLM, uvicorn, fastapi); the other modules import on any machine.
"""
