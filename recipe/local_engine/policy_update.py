"""One PASR policy update on the refine rollouts, with verl's RL math.

GRPO advantages (``compute_grpo_outcome_advantage``), the clipped policy loss
(``compute_policy_loss_vanilla``), the KL estimator (``kl_penalty``) and loss aggregation
(``agg_loss``) all come from ``verl.trainer.ppo.core_algos`` and the batch travels in a
``DataProto``, so the local engine optimises exactly what the verl engine does; only the
plumbing (one process, a torch optimizer) differs.

Trained tokens are the ones that were sampled, EOS included (the reference code re-tokenised
decoded text and never trained the stop token). Rollouts whose judge failed are left out of
their group's GRPO statistics and of the batch (``build_batch``'s mask, the policy of
:mod:`recipe.scoring`); rows whose GRPO group has no reward spread have zero advantage and,
with ``skip_zero_adv``, are skipped: they would only add KL gradient.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch
from verl import DataProto
from verl.trainer.ppo import core_algos
from verl.workers.config import ActorConfig

from recipe.advantages import TRAINED, advantages_on_trained_rows
from recipe.local_engine.config import WARMUP_LR_SCHEDULES, AlgoConfig
from recipe.local_engine.kl_reference import KLReference
from recipe.local_engine.logprobs import (
    PackedBatch,
    PromptPass,
    concatenated_response_logprobs,
    end_to_end_pays,
    length_micro_batches,
    pack,
    response_logprobs,
)
from runtime.hf_generate import length_batches
from runtime.prompt_prefill import decoder


class NonFiniteLoss(FloatingPointError):
    """A loss or gradient norm that is NaN or infinite; raised before ``optimizer.step()``.

    One such update turns every weight NaN, and the run went on as if nothing happened: it
    checkpointed the NaN weights and crashed later in sampling, far from the cause. Raised before
    the step, the weights (and every checkpoint the run wrote) are those of the last good step."""


def require_finite(value: torch.Tensor, what: str) -> None:
    """Raise :class:`NonFiniteLoss` naming ``what`` unless ``value`` (a scalar) is finite."""
    if not torch.isfinite(value).all():
        raise NonFiniteLoss(f"{what} is {value.item()}")


@dataclass
class TrainRollout:
    uid: str  # query id: the GRPO group
    prompt_ids: list[int]
    response_ids: list[int]
    reward: float


def build_batch(
    rollouts: list[TrainRollout],
    pad_id: int,
    algo: AlgoConfig,
    mask: Sequence[bool] | None = None,
) -> DataProto:
    """Pack rollouts and attach outcome rewards and GRPO advantages (verl's estimator).

    ``mask`` (from :func:`recipe.scoring.group_scores`; all True when None) marks the rows
    trained on: GRPO's group mean and std are taken over those rows only, as the verl engine
    does (:func:`recipe.advantages.advantages_on_trained_rows`), and the others are not in the
    returned batch (no loss, no compute)."""
    packed = pack([r.prompt_ids for r in rollouts], [r.response_ids for r in rollouts], pad_id)
    response_mask = packed.response_mask
    token_rewards = torch.zeros(response_mask.shape, dtype=torch.float32)
    last = (response_mask.sum(-1) - 1).clamp(min=0)
    token_rewards[torch.arange(len(rollouts)), last] = torch.tensor([r.reward for r in rollouts])
    trained = np.ones(len(rollouts), dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    if len(trained) != len(rollouts):
        raise ValueError(f"{len(rollouts)} rollouts but a mask of {len(trained)}")
    data = DataProto.from_dict(
        tensors={
            "input_ids": packed.input_ids,
            "attention_mask": packed.attention_mask,
            "position_ids": packed.position_ids,
            "responses": packed.responses,
            "response_mask": response_mask,
            "token_level_rewards": token_rewards,
        },
        non_tensors={
            "uid": np.array([r.uid for r in rollouts], dtype=object),
            TRAINED: trained,
        },
    )

    def grpo(rows: DataProto) -> DataProto:
        rows.batch["advantages"], rows.batch["returns"] = core_algos.compute_grpo_outcome_advantage(
            token_level_rewards=rows.batch["token_level_rewards"],
            response_mask=rows.batch["response_mask"],
            index=rows.non_tensor_batch["uid"],
            norm_adv_by_std_in_grpo=algo.norm_adv_by_std,
        )
        return rows

    data = advantages_on_trained_rows(data, grpo)
    return data if trained.all() else data.select_idxs(np.flatnonzero(trained))


def _packed(data: DataProto) -> PackedBatch:
    b = data.batch
    return PackedBatch(b["input_ids"], b["attention_mask"], b["position_ids"], b["responses"], b["response_mask"])


def actor_config(algo: AlgoConfig, n_rows: int) -> ActorConfig:
    return ActorConfig(
        strategy="fsdp",  # ActorConfig needs a strategy name; only the loss fields are read here
        ppo_mini_batch_size=n_rows,
        ppo_micro_batch_size_per_gpu=algo.micro_batch_size,
        clip_ratio=algo.clip_ratio,
        loss_agg_mode=algo.loss_agg_mode,
        rollout_n=1,
    )


def autocast(enabled: bool | None, device_type: str = "cpu"):
    """bf16 autocast on ``device_type`` (the model's: ``cpu`` | ``cuda``); None
    (``algo.bf16_autocast`` not yet resolved by the trainer's measurement) means off, the safe
    choice on any CPU."""
    return torch.autocast(device_type, dtype=torch.bfloat16, enabled=bool(enabled))


def on_model_device(model, data: DataProto) -> DataProto:
    """``data`` with its tensors where ``model`` is (a new DataProto: verl's ``DataProto.to``
    moves in place, and the caller's batch stays on the CPU for its metrics)."""
    if next(iter(data.batch.values())).device == model.device:
        return data
    return DataProto(
        batch=data.batch.to(model.device), non_tensor_batch=data.non_tensor_batch, meta_info=data.meta_info
    )


@torch.no_grad()
def fill_logprobs(model, reference: KLReference | None, data: DataProto, algo: AlgoConfig, temperature: float) -> None:
    """old_log_probs (behaviour policy) and ref_log_prob (frozen reference), micro-batched.

    With one PPO epoch the policy has not moved when each micro-batch's loss is computed, so
    the behaviour log-probs equal the current ones and are taken from that same forward pass
    (``update_policy``) instead of a separate one: one forward pass fewer per step.
    """
    if reference is not None and algo.kl_coef > 0:
        data.batch["ref_log_prob"] = reference.apply(lambda ref: batch_logprobs(ref, data, algo, temperature))
    if algo.ppo_epochs > 1:
        data.batch["old_log_probs"] = batch_logprobs(model, data, algo, temperature)


def batch_logprobs(model, data: DataProto, algo: AlgoConfig, temperature: float) -> torch.Tensor:
    """(B, R) response log-probs of every row of ``data`` under ``model``, without a graph: the
    batch's prompts run once, the rows in micro-batches of similar response length
    (:class:`recipe.local_engine.logprobs.PromptPass`)."""
    packed = _packed(data)
    out = None
    with torch.no_grad(), autocast(algo.bf16_autocast, model.device.type):
        prompts = PromptPass.run(decoder(model), packed.to(model.device), separate_backward=False)
        for rows in length_micro_batches(packed.response_mask, algo.micro_batch_size):
            lp = response_logprobs(model, _packed(data.select_idxs(rows)), temperature, prompts, rows)
            if out is None:
                out = lp.new_zeros(packed.responses.shape)
            out[rows.to(out.device)] = lp
    return out


def rl_learning_rate(lr: float, rl_step: int, warmup_steps: int) -> float:
    """The learning rate of RL step ``rl_step`` (1-based): ``lr`` ramped linearly over the first
    ``warmup_steps`` steps (verl's constant schedule with warm-up, without its zero-lr first
    step), then held."""
    if warmup_steps <= 0:
        return lr
    return lr * min(1.0, max(rl_step, 1) / warmup_steps)


def warmup_learning_rate(lr: float, step: int, total_steps: int, schedule: str) -> float:
    """The learning rate of warm-up step ``step`` (1-based) of ``total_steps``: ``lr`` held
    (``constant``) or decayed to zero on a half cosine (``cosine``: verl's SFT trainer's default
    schedule, computed by verl's own ``get_cosine_schedule_with_warmup`` without its linear ramp).
    A pure function of the step, so a resumed warm-up needs no scheduler state. Past
    ``total_steps`` (supervised steps that continue a finished warm-up, as the learning-signal
    benchmark's control does) the rate stays where the schedule ends, at zero: verl's cosine would
    rise again there, re-heating a warm-up that had settled."""
    if schedule == "constant":
        return lr
    if schedule != "cosine":
        raise ValueError(f"warmup.lr_schedule must be one of {', '.join(WARMUP_LR_SCHEDULES)}, got {schedule!r}")
    # verl counts from 0: the first step has the full lr, and index total_steps (one past the
    # last step) is zero, where steps past the end stay
    return lr * _cosine_factor(total_steps)(min(step - 1, total_steps))


@lru_cache(maxsize=8)
def _cosine_factor(total_steps: int) -> Callable[[int], float]:
    """verl's cosine factor for ``total_steps`` (its LambdaLR's lambda, built once per length)."""
    from verl.utils.torch_functional import get_cosine_schedule_with_warmup

    probe = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    return get_cosine_schedule_with_warmup(probe, num_warmup_steps=0, num_training_steps=total_steps).lr_lambdas[0]


def update_policy(
    model, reference: KLReference | None, optimizer, data: DataProto, algo: AlgoConfig, temperature: float
) -> dict[str, float]:
    """PPO-clip update over ``data`` (ppo_epochs × micro-batches, one optimizer step per epoch),
    with a KL term to ``reference`` (None: without)."""
    if algo.skip_zero_adv:
        keep = (data.batch["advantages"].abs().sum(-1) > 0).nonzero().flatten().tolist()
        if not keep:
            return {"actor/skipped_rows": float(len(data)), "actor/trained_rows": 0.0}
        skipped = len(data) - len(keep)
        data = data.select_idxs(keep)
    else:
        skipped = 0
    model.eval()  # no dropout: log-probs must match the sampling policy
    data = on_model_device(model, data)
    fill_logprobs(model, reference, data, algo, temperature)
    cfg = actor_config(algo, len(data))
    n_tokens = data.batch["response_mask"].sum()
    cfg.global_batch_info.update({"dp_size": 1, "batch_num_tokens": n_tokens, "global_batch_size": len(data)})
    metrics: dict[str, list[float]] = {}
    micro_batches = length_micro_batches(data.batch["response_mask"], algo.micro_batch_size)
    for _ in range(algo.ppo_epochs):
        optimizer.zero_grad(set_to_none=True)
        with autocast(algo.bf16_autocast, model.device.type):
            prompts = PromptPass.run(decoder(model), _packed(data), separate_backward=True)
        for rows in micro_batches:
            mb = data.select_idxs(rows)
            b = mb.batch
            with autocast(algo.bf16_autocast, model.device.type):
                log_prob = response_logprobs(model, _packed(mb), temperature, prompts, rows)
            old_log_prob = b["old_log_probs"] if "old_log_probs" in b.keys() else log_prob.detach()
            pg_loss, pg_metrics = core_algos.compute_policy_loss_vanilla(
                old_log_prob=old_log_prob,
                log_prob=log_prob,
                advantages=b["advantages"],
                response_mask=b["response_mask"],
                loss_agg_mode=algo.loss_agg_mode,
                config=cfg,
            )
            loss = pg_loss
            if reference is not None and algo.kl_coef > 0:
                kld = core_algos.kl_penalty(log_prob, b["ref_log_prob"], algo.kl_type)
                kl_loss = core_algos.agg_loss(kld, b["response_mask"], algo.loss_agg_mode, **cfg.global_batch_info)
                loss = loss + algo.kl_coef * kl_loss
                metrics.setdefault("actor/kl_loss", []).append(kl_loss.item())
            require_finite(loss, "the policy loss")
            loss.backward()
            metrics.setdefault("actor/pg_loss", []).append(pg_loss.item())
            for k, v in pg_metrics.items():
                metrics.setdefault(k, []).append(float(v))
        if prompts is not None:
            prompts.backward()  # the prompt pass's share, once for all micro-batches
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), algo.max_grad_norm)
        require_finite(grad_norm, "the policy loss's gradient norm")  # clipping by a NaN norm makes every weight NaN
        optimizer.step()
        # freed now, not at the next update's start: the next step's generation, evaluations and
        # checkpoints would otherwise hold a second copy of the weights' size (SmolLM2: 0.54 GB)
        optimizer.zero_grad(set_to_none=True)
        metrics.setdefault("actor/grad_norm", []).append(float(grad_norm))
    out = {
        k: float(np.mean(v)) if k != "actor/pg_loss" and k != "actor/kl_loss" else float(np.sum(v))
        for k, v in metrics.items()
    }
    out["actor/trained_rows"] = float(len(data))
    out["actor/skipped_rows"] = float(skipped)
    return out


def sft_loss(
    model, prompts: list[list[int]], responses: list[list[int]], pad_id: int, bf16: bool = False, layout: str = "auto"
) -> torch.Tensor:
    """Token-mean negative log-likelihood of responses (the warm-up's loss). ``layout``:
    ``end_to_end`` (rows laid end to end without padding,
    :func:`recipe.local_engine.logprobs.concatenated_response_logprobs`), ``padded``, or
    ``auto``: whichever costs less for this batch (:func:`recipe.local_engine.logprobs.end_to_end_pays`).
    Both give the same loss."""
    if layout not in ("auto", "end_to_end", "padded"):
        raise ValueError(f"layout must be auto, end_to_end or padded, got {layout!r}")
    if layout == "auto":
        layout = "end_to_end" if end_to_end_pays(model.config, prompts, responses) else "padded"
    with autocast(bf16, model.device.type):
        if layout == "end_to_end":
            lp = concatenated_response_logprobs(model, prompts, responses)[None]
            mask = torch.ones_like(lp)
        else:
            pb = pack(prompts, responses, pad_id).to(model.device)
            lp, mask = response_logprobs(model, pb), pb.response_mask.float()
    return core_algos.agg_loss(-lp, mask, "token-mean")


def sft_backward(
    model,
    prompts: list[list[int]],
    responses: list[list[int]],
    pad_id: int,
    micro_batch_size: int,
    bf16: bool = False,
) -> torch.Tensor:
    """The warm-up's token-mean loss over every row (:func:`sft_loss`, returned detached), with
    its gradient accumulated in the weights' ``.grad``, in micro-batches of at most
    ``micro_batch_size`` rows of similar length: each one's loss weighted by its share of the
    batch's response tokens, so the gradients add up to the whole batch's, and only one
    micro-batch's activations exist at once (the body keeps about 1.7 MB a position for the
    backward on SmolLM2 in fp32: about 1.5 GB for the demo's 8 rows at once). A non-finite loss
    raises :class:`NonFiniteLoss` before its backward."""
    total = sum(map(len, responses))
    loss = None
    for rows in length_batches([len(p) + len(r) for p, r in zip(prompts, responses)], micro_batch_size):
        share = sum(len(responses[i]) for i in rows) / total
        part = sft_loss(model, [prompts[i] for i in rows], [responses[i] for i in rows], pad_id, bf16) * share
        require_finite(part, "the warm-up SFT loss")
        part.backward()
        loss = part.detach() if loss is None else loss + part.detach()
    return loss
