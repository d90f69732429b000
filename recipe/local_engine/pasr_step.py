"""One PASR step on the local engine: rollouts, scoring, the GRPO update and the step's metrics.

The counterpart of :func:`recipe.local_engine.rrr.rrr_step` for ``method=pasr``; the trainer
(:class:`recipe.local_engine.trainer.LocalPasrTrainer`) picks the queries, makes the KL
reference and logs what this returns. The pieces are PASR's everywhere else too:

1. ``pasr.n_refine`` refine-prompt and ``pasr.n_plain`` plain-prompt rollouts per query,
   batched (:func:`recipe.local_engine.rollout.generate_step`);
2. judged and recorded (:func:`recipe.scoring.judge_and_record`), scored per group
   (:func:`recipe.scoring.group_scores`); the records go to ``before_update`` (the trainer's
   dump and judge-error stop) before anything is trained, so a stopped step trains nothing;
3. an update on the refine rollouts (the plain ones are the baseline only) with verl's GRPO
   and clipped loss (:mod:`recipe.local_engine.policy_update`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from data.examples import Example
from data.records import REFINE, RolloutRecord
from prompts import PromptSet
from recipe.local_engine.config import AlgoConfig, RolloutConfig
from recipe.local_engine.policy_update import TrainRollout, build_batch, update_policy
from recipe.local_engine.rollout import generate_step
from recipe.local_engine.timing import timer
from recipe.metrics import reward_time_share, training_step_metrics
from recipe.pasr_config import PasrConfig
from recipe.refine_term import refine_term_metrics
from recipe.scoring import group_scores, judge_and_record
from runtime.hf_generate import SamplingParams


def pasr_step(
    *,
    get_generator: Callable[[], object],
    model,
    reference,
    optimizer,
    tokenizer,
    queries: Sequence[Example],
    prompts: PromptSet,
    prompt_versions: dict[str, str],
    judge,
    params: SamplingParams,
    rollout: RolloutConfig,
    pasr: PasrConfig,
    algo: AlgoConfig,
    run_id: str,
    step: int,
    before_update: Callable[[list[RolloutRecord]], None],
) -> tuple[dict[str, float], list[RolloutRecord]]:
    """One PASR training step (see the module docstring): returns the ``pasr/*``, ``actor/*``
    and ``timing_s/*`` metrics with the step's records. ``get_generator`` gives the policy that
    samples (``model`` or its bf16 copy, synced with it): it is called inside the ``gen``
    timer, so the copy's sync counts as generation. ``reference`` is the KL reference
    (:class:`recipe.local_engine.kl_reference.KLReference`; None without KL). A step whose rows
    are all masked out (judge errors) trains nothing."""
    m: dict = {}
    model.eval()
    with timer(m, "gen"):
        gens = generate_step(
            get_generator(),
            tokenizer,
            queries,
            prompts,
            pasr.n_refine,
            pasr.n_plain,
            params,
            rollout.gen_batch_size,
            pasr.prefill_think,
        )
    with timer(m, "reward"):
        records = judge_and_record(
            [g.rollout for g in gens],
            judge,
            run_id=run_id,
            step=step,
            engine="local",
            prompt_versions=prompt_versions,
        )
        scores, mask = group_scores(records, pasr)
    before_update(records)  # before the update: a stopped step trains nothing
    # A query's refine rollouts are its GRPO group; the mask leaves judge errors out.
    rows = [i for i, r in enumerate(records) if r.variant == REFINE]
    train = [TrainRollout(records[i].query_id, gens[i].prompt_ids, gens[i].response_ids, scores[i]) for i in rows]
    with timer(m, "update"):
        if any(mask[i] for i in rows):
            batch = build_batch(train, tokenizer.pad_token_id, algo, mask=[mask[i] for i in rows])
            m.update(update_policy(model, reference, optimizer, batch, algo, rollout.temperature))
    m.update(training_step_metrics(records, scores, mask))
    m.update(refine_term_metrics(records, scores, mask, pasr.weights.refine, norm_adv_by_std=algo.norm_adv_by_std))
    total = sum(v for k, v in m.items() if k.startswith("timing_s/"))
    m["timing_s/step"] = total
    m.update(reward_time_share(m["timing_s/reward"], total))
    return m, records
