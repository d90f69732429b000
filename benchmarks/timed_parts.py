"""The trainer's own parts timed for :mod:`benchmarks.step_floors`: a warm-up step, a PASR
step (generation, reward, log-probs, update) and an evaluation, on one ``LocalPasrTrainer``.

The engine is not changed: the parts' inputs are seen, and their inner pieces timed, by
wrapping the functions they call for the length of one block (:func:`wrapped`), and each part
carries the FLOPs of the work it did (:mod:`benchmarks.flop_count`) for its floor.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.flop_count import Shapes, Work, generation_work, micro_batches, pass_work

TRAIN_KINDS = ("warm-up step", "log-probs", "update")  # the parts that run in the update's dtype


# ---------------------------------------------------------------- the trainer's parts, timed
@dataclass
class Part:
    name: str
    seconds: float
    dtype: str | None  # what it ran in; None: no floor (judging)
    work: list[Work]
    train: bool = False
    detail: str = ""
    optimizer_s: float | None = None  # of ``seconds``, AdamW's step: memory-bound, outside the floor


@contextlib.contextmanager
def wrapped(module, name: str, wrapper):
    """``module.name`` replaced by ``wrapper(original)`` for the block: how the parts' inputs are
    seen and their inner pieces timed without touching the engine."""
    own = name in vars(module)  # a method of an instance's class is put back by removing the wrapper
    original = getattr(module, name)
    setattr(module, name, wrapper(original))
    try:
        yield
    finally:
        if own:
            setattr(module, name, original)
        else:
            delattr(module, name)


def recorder(seen: list):
    """A wrapper for :func:`wrapped` that keeps what the call returned."""

    def wrap(fn):
        def call(*args, **kwargs):
            out = fn(*args, **kwargs)
            seen.append(out)
            return out

        return call

    return wrap


def stopwatch(seconds: list):
    """A wrapper for :func:`wrapped` that adds each call's wall time to ``seconds``."""

    def wrap(fn):
        def call(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                seconds.append(time.perf_counter() - start)

        return call

    return wrap


def trained_rows(data) -> tuple[list[list[int]], list[list[int]]]:
    """(prompts, responses) of the rows in an update's batch (``DataProto`` as ``build_batch``
    packs it: left-padded prompts, right-padded responses)."""
    b = data.batch
    width = b["input_ids"].shape[1] - b["responses"].shape[1]
    prompts = [ids[:width][mask[:width].bool()].tolist() for ids, mask in zip(b["input_ids"], b["attention_mask"])]
    responses = [r[m.bool()].tolist() for r, m in zip(b["responses"], b["response_mask"])]
    return prompts, responses


def _mean_len(rows) -> float:
    return sum(map(len, rows)) / max(1, len(rows))


def time_parts(cfg, policy_dir: Path) -> tuple[list[Part], dict]:
    """The warm-up step, the PASR step's parts and the evaluation, timed on one trainer; the
    policy they leave is saved in ``policy_dir`` for the peer to start from."""
    import torch

    import recipe.local_engine.evaluate as evaluate_module
    import recipe.local_engine.pasr_step as pasr_step_module
    import recipe.local_engine.policy_update as policy_update
    from recipe.local_engine.trainer import LocalPasrTrainer

    with tempfile.TemporaryDirectory() as tmp:
        trainer = LocalPasrTrainer(cfg, Path(tmp) / "run")
        trainer.setup()
        trainer.evals = {}
        shapes = Shapes.of(trainer.model.config)
        update_dtype = "bfloat16" if trainer.algo.bf16_autocast else "float32"
        parts: list[Part] = []

        trainer.optimizer = trainer._make_optimizer("warmup")
        trainer.warmup_step(1)  # untimed: the allocator and kernels
        step = cfg.warmup.steps
        prompts, responses = trainer.warmup_batch(step)
        adam: list[float] = []
        with wrapped(trainer.optimizer, "step", stopwatch(adam)):
            metrics = trainer.warmup_step(step)
        parts.append(
            Part(
                "warm-up step",
                metrics["timing_s/update"],
                update_dtype,
                pass_work(shapes, prompts, responses),
                train=True,
                optimizer_s=sum(adam),
                detail=f"{len(prompts)} rows, prompt {_mean_len(prompts):.0f} + target "
                f"{_mean_len(responses):.0f} tokens; AdamW {sum(adam):.2f} s",
            )
        )
        trainer.step = step

        # The RL phase's first step makes the KL reference and the rollout copy and AdamW's state
        # (two more copies of the weights: 1 s of the first update): untimed, as step 1 above. The
        # second is what the other steps of a run cost.
        trainer.optimizer = trainer._make_optimizer(cfg.method)
        step += 1
        trainer._set_rl_lr(step)
        trainer.pasr_step(step)
        trainer.step = step
        step += 1
        trainer._set_rl_lr(step)
        gens, batches, logprob_s, adam = [], [], [], []

        def seen_rows(fn):
            def call(model, reference, data, *args, **kwargs):
                batches.append(trained_rows(data))
                return fn(model, reference, data, *args, **kwargs)

            return call

        with (
            wrapped(pasr_step_module, "generate_step", recorder(gens)),
            wrapped(policy_update, "fill_logprobs", lambda fn: seen_rows(stopwatch(logprob_s)(fn))),
            wrapped(trainer.optimizer, "step", stopwatch(adam)),
        ):
            metrics = trainer.pasr_step(step)
        trainer.step = step
        rollouts = gens[0]
        g_prompts, g_responses = [g.prompt_ids for g in rollouts], [g.response_ids for g in rollouts]
        parts.append(
            Part(
                "generation",
                metrics["timing_s/gen"],
                trainer.rollout_dtype,
                generation_work(shapes, g_prompts, g_responses, cfg.rollout.gen_batch_size),
                detail=f"{len(rollouts)} rollouts of {_mean_len(g_responses):.0f} tokens "
                f"(max {cfg.rollout.max_new_tokens})",
            )
        )
        parts.append(Part("reward", metrics["timing_s/reward"], None, [], detail="judging, no floor"))
        t_prompts, t_responses = batches[0] if batches else ([], [])
        mbs = micro_batches(t_prompts, t_responses, cfg.algo.micro_batch_size)
        forwards = (cfg.algo.kl_coef > 0) + (cfg.algo.ppo_epochs > 1)  # reference, old policy
        ref_work = [w for p, r in mbs for w in pass_work(shapes, p, r)] * forwards
        parts.append(
            Part(
                "log-probs",
                sum(logprob_s),
                update_dtype,
                ref_work,
                detail=f"{forwards} forward over {len(t_prompts)} rows, micro-batches of {cfg.algo.micro_batch_size}",
            )
        )
        update_work = [w for p, r in mbs for w in pass_work(shapes, p, r)] * cfg.algo.ppo_epochs
        parts.append(
            Part(
                "update",
                metrics["timing_s/update"] - sum(logprob_s),
                update_dtype,
                update_work,
                train=True,
                optimizer_s=sum(adam),
                detail=f"{len(t_prompts)} rows of {_mean_len(t_responses):.0f} tokens, "
                f"fwd + bwd; AdamW {sum(adam):.2f} s",
            )
        )

        evals: list = []
        with wrapped(evaluate_module, "generate_step", recorder(evals)):
            metrics = trainer._evaluate("bench")
        e_prompts, e_responses = [g.prompt_ids for g in evals[0]], [g.response_ids for g in evals[0]]
        parts.append(
            Part(
                "evaluation",
                metrics["timing_s/eval"],
                trainer.rollout_dtype,
                generation_work(shapes, e_prompts, e_responses, cfg.rollout.eval_batch_size),
                detail=f"{len(trainer.heldout)} problems, {len(evals[0])} greedy rows of "
                f"{_mean_len(e_responses):.0f} tokens",
            )
        )
        # The peer samples from these weights, not the base model's: two warm-up steps already
        # teach the model to stop (base: most rollouts run to the budget), and a peer writing
        # three times the tokens would be timing another step.
        trainer.model.save_pretrained(policy_dir)
        trainer.tokenizer.save_pretrained(policy_dir)
        subject = {
            "shapes": shapes,
            "rollout_dtype": trainer.rollout_dtype,
            "update_dtype": update_dtype,
            "threads": torch.get_num_threads(),
            "attention": trainer.attention,
            "step_rollouts": len(rollouts),
            "step_trained_rows": len(t_prompts),
            "step_response_tokens": sum(map(len, g_responses)),
            "step_trained_tokens": sum(map(len, t_responses)),
            "policy_dir": str(policy_dir),
            "train": trainer.train,
            "prompts": trainer.prompts,
            "tokenizer": trainer.tokenizer,
        }
    return parts, subject
