"""Reflect, Retry, Reward on the local engine: one training step and the held-out evaluation.

The step's data logic (which attempts are reflected on, what a reflection earns, which tokens
are trained) is :mod:`recipe.rrr_step`'s; this module does the engine's part around it, with
the pieces PASR uses: batched ``generate`` (:mod:`runtime.hf_generate`), the judge and the record
format (:mod:`recipe.scoring`), verl's GRPO and clipped loss
(:mod:`recipe.local_engine.policy_update`).

One exchange (:func:`run_exchange`) is three batched generate calls:

1. a first attempt per query (RRR's attempt prompt), judged; successes stop here;
2. ``n`` reflections per failed attempt (the reflection prompt: question, attempt, binary
   feedback);
3. one retry per reflection (the attempt prompt's system text, the reflection in context),
   judged: the reflection's reward.

Training (:func:`rrr_step`) samples all three and updates on the reflection rows only
(:func:`recipe.rrr_step.training_rows`); evaluation (:func:`evaluate_rrr`) is greedy with one
reflection per failure. Every pass is written as a :class:`~data.records.RolloutRecord`
(variants ``attempt``, ``reflection``, ``retry``; a reflection's ``acc`` is its retry's
success), so ``pasr stats`` and the benchmark read the dumps like any other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from data.examples import Example
from data.records import ATTEMPT, REFLECTION, RETRY, RolloutRecord
from recipe.judge_errors import judged_accuracy
from recipe.local_engine.config import AlgoConfig, RolloutConfig
from recipe.local_engine.policy_update import build_batch, update_policy
from recipe.local_engine.timing import timer
from recipe.rrr_config import RrrConfig
from recipe.rrr_step import (
    Attempt,
    Reflection,
    RrrPrompts,
    final_score,
    is_success,
    mean_or_zero,
    reflection_record,
    reflection_requests,
    rrr_metrics,
    select_failures,
    training_rows,
)
from recipe.scoring import Rollout, judge_and_record
from runtime.decoding import decode_response
from runtime.hf_generate import SamplingParams, generate_ids, render_prompts


@dataclass(frozen=True)
class PassParams:
    """How each of the three passes is generated."""

    attempt: SamplingParams
    reflection: SamplingParams
    retry: SamplingParams

    @classmethod
    def sampled(cls, rollout: RolloutConfig, rrr: RrrConfig) -> PassParams:
        """Training: every pass sampled at the rollout temperature (the update divides the
        reflection logits by it, as for PASR)."""

        def params(n: int) -> SamplingParams:
            return SamplingParams(n, rollout.temperature, rollout.top_p, True)

        return cls(
            params(rollout.max_new_tokens),
            params(rrr.max_reflection_tokens),
            params(rrr.max_retry_tokens or rollout.max_new_tokens),
        )

    @classmethod
    def greedy(cls, max_new_tokens: int, rrr: RrrConfig) -> PassParams:
        """Evaluation: greedy passes; answers get ``max_new_tokens`` (``rrr.max_retry_tokens``
        for the retry when set)."""
        return cls(
            SamplingParams(max_new_tokens, do_sample=False),
            SamplingParams(rrr.max_reflection_tokens, do_sample=False),
            SamplingParams(rrr.max_retry_tokens or max_new_tokens, do_sample=False),
        )


@dataclass
class Exchange:
    """Everything one round of attempts, reflections and retries produced."""

    attempts: list[Attempt]
    reflections: list[Reflection]
    attempt_records: list[RolloutRecord]
    reflection_records: list[RolloutRecord]
    retry_records: list[RolloutRecord]
    timing: dict[str, float] = field(default_factory=dict)

    @property
    def records(self) -> list[RolloutRecord]:
        return self.attempt_records + self.reflection_records + self.retry_records


def _generate(model, tokenizer, prompt_ids: list[list[int]], params: SamplingParams, batch_size: int):
    return generate_ids(model, tokenizer, prompt_ids, params, batch_size=batch_size) if prompt_ids else []


def run_exchange(
    model,
    tokenizer,
    queries: Sequence[Example],
    prompts: RrrPrompts,
    judge,
    params: PassParams,
    n_reflections: int,
    batch_size: int,
    *,
    run_id: str,
    step: int | None,
    dataset: str | None = None,
    engine: str = "local",
) -> Exchange:
    """Attempts for ``queries``, ``n_reflections`` reflections per failed attempt, one retry per
    reflection; judged and recorded (see the module docstring)."""
    timing: dict[str, float] = {}
    version = prompts.version()
    record = dict(run_id=run_id, step=step, engine=engine, prompt_versions=version)

    def rollout(ex: Example, variant: str, ids: list[int], finish: str, k: int = 0) -> Rollout:
        text = decode_response(tokenizer, ids)
        return Rollout(ex.id, ex.data_source, ex.question, ex.answer, variant, text, len(ids), finish, k, dataset)

    # 1. first attempts
    attempt_prompts = render_prompts(tokenizer, [prompts.attempt_chat(q.question) for q in queries])
    with timer(timing, "gen_attempt"):
        outs = _generate(model, tokenizer, attempt_prompts, params.attempt, batch_size)
    with timer(timing, "reward"):
        attempt_records = judge_and_record(
            [rollout(q, ATTEMPT, ids, fin) for q, (ids, fin) in zip(queries, outs)], judge, **record
        )
    attempts = [Attempt(q.id, q.question, r.response, r.acc) for q, r in zip(queries, attempt_records)]

    # 2. reflections on the failures (each reflection chat rendered once, sampled n times)
    requests = reflection_requests(select_failures(attempts), prompts, n_reflections)
    rendered = {}
    for req in requests:
        if req.query_id not in rendered:
            rendered[req.query_id] = render_prompts(tokenizer, [req.chat])[0]
    reflection_prompts = [rendered[req.query_id] for req in requests]
    with timer(timing, "gen_reflection"):
        reflection_outs = _generate(model, tokenizer, reflection_prompts, params.reflection, batch_size)
    reflection_texts = [decode_response(tokenizer, ids) for ids, _ in reflection_outs]

    # 3. one retry per reflection, with the reflection in context
    retry_prompts = render_prompts(
        tokenizer, [req.retry_chat(prompts, text) for req, text in zip(requests, reflection_texts)]
    )
    with timer(timing, "gen_retry"):
        retry_outs = _generate(model, tokenizer, retry_prompts, params.retry, batch_size)
    by_id = {q.id: q for q in queries}
    with timer(timing, "reward"):
        retry_records = judge_and_record(
            [
                rollout(by_id[req.query_id], RETRY, ids, fin, req.sample_index)
                for req, (ids, fin) in zip(requests, retry_outs)
            ],
            judge,
            **record,
        )

    reflections = [
        Reflection(req.query_id, req.sample_index, p_ids, ids, retry.acc)
        for req, p_ids, (ids, _), retry in zip(requests, reflection_prompts, reflection_outs, retry_records)
    ]
    reflection_records = [
        reflection_record(retry, text, ids, fin, refl.reward)
        for retry, text, (ids, fin), refl in zip(retry_records, reflection_texts, reflection_outs, reflections)
    ]
    return Exchange(attempts, reflections, attempt_records, reflection_records, retry_records, timing)


def rrr_step(
    *,
    generator,
    model,
    reference,
    optimizer,
    tokenizer,
    queries: Sequence[Example],
    prompts: RrrPrompts,
    judge,
    rollout: RolloutConfig,
    rrr: RrrConfig,
    algo: AlgoConfig,
    run_id: str,
    step: int,
) -> tuple[dict[str, float], list[RolloutRecord]]:
    """One RRR training step: sample an exchange with ``generator`` (the policy, or its bf16
    copy), update ``model`` on the reflection rows (GRPO grouped by failed query, KL to
    ``reference``, a :class:`recipe.local_engine.kl_reference.KLReference`), and return the
    ``rrr/*``, ``actor/*`` and ``timing_s/*`` metrics with the step's records. A step where
    every attempt succeeded, or no retry was scored, trains nothing."""
    model.eval()
    exchange = run_exchange(
        generator,
        tokenizer,
        queries,
        prompts,
        judge,
        PassParams.sampled(rollout, rrr),
        rrr.n_reflections,
        rollout.gen_batch_size,
        run_id=run_id,
        step=step,
    )
    m: dict[str, float] = dict(exchange.timing)
    rows = training_rows(exchange.reflections)
    with timer(m, "update"):
        if rows:
            batch = build_batch(rows, tokenizer.pad_token_id, algo)
            m.update(update_policy(model, reference, optimizer, batch, algo, rollout.temperature))
    m.update(rrr_metrics(exchange.attempts, exchange.reflections))
    m["rrr/response_length/mean"] = mean_or_zero(r.response_tokens for r in exchange.attempt_records)
    m["rrr/retry_length/mean"] = mean_or_zero(r.response_tokens for r in exchange.retry_records)
    m["timing_s/step"] = sum(v for k, v in m.items() if k.startswith("timing_s/"))
    return m, exchange.records


# --------------------------------------------------------------------------- evaluation
@dataclass(frozen=True)
class QueryOutcome:
    """One held-out query after a greedy exchange (scores None where the verifier failed)."""

    first: float | None  # first-attempt score
    retry: float | None  # the retry's score; None when there was none (success, unscored) or it failed to score
    retried: bool
    tokens: int  # attempt + reflection + retry tokens

    @property
    def first_correct(self) -> bool | None:
        return None if self.first is None else is_success(self.first)

    @property
    def final_correct(self) -> bool | None:
        """Right at the first attempt, or else at the retry; None when that is not known."""
        final = final_score(self.first, [self.retry] if self.retried else [])
        return None if final is None else is_success(final)


def query_outcomes(records: Sequence[RolloutRecord]) -> dict[str, QueryOutcome]:
    """Per query, from an evaluation's records (one reflection per failure: a retry is the
    query's second answer). The benchmark pairs rows on these."""
    tokens: dict[str, int] = {}
    first: dict[str, float | None] = {}
    retry: dict[str, float | None] = {}
    for r in records:
        tokens[r.query_id] = tokens.get(r.query_id, 0) + r.response_tokens
        if r.variant == ATTEMPT:
            first[r.query_id] = r.acc
        elif r.variant == RETRY:
            retry[r.query_id] = r.acc
    return {q: QueryOutcome(first[q], retry.get(q), q in retry, tokens[q]) for q in first}


def eval_metrics(records: Sequence[RolloutRecord]) -> dict[str, float]:
    """``eval/*`` of an RRR evaluation: first-attempt accuracy, retry accuracy (over retried
    failures whose retry was scored), accuracy after one retry, tokens of all passes per query,
    reflection length, judge errors. Unscored answers are left out of a rate, never counted 0;
    the accuracies are None (no answer scored) when the verifier failed throughout."""
    outcomes = query_outcomes(records).values()
    reflections = [r for r in records if r.variant == REFLECTION]
    return {
        "eval/first_attempt_acc": judged_accuracy(o.first_correct for o in outcomes),
        "eval/retry_acc": mean_or_zero(is_success(o.retry) for o in outcomes if o.retried and o.retry is not None),
        "eval/acc": judged_accuracy(o.final_correct for o in outcomes),
        "eval/retried": float(sum(o.retried for o in outcomes)),
        "eval/recovered": float(sum(o.retried and is_success(o.retry) for o in outcomes)),
        "eval/tokens": mean_or_zero(o.tokens for o in outcomes),
        "eval/response_length/mean": mean_or_zero(r.response_tokens for r in records if r.variant == ATTEMPT),
        "eval/reflection_length/mean": mean_or_zero(r.response_tokens for r in reflections),
        "eval/judge_errors": float(sum(r.acc is None for r in records if r.variant != REFLECTION)),
    }


def evaluate_rrr(
    model,
    tokenizer,
    examples: Sequence[Example],
    prompts: RrrPrompts,
    judge,
    rrr: RrrConfig,
    *,
    max_new_tokens: int,
    batch_size: int,
    run_id: str,
    step: int,
    tag: str,
) -> tuple[dict[str, float], list[RolloutRecord]]:
    """Greedy first attempt on each held-out problem; for each failure one greedy reflection and
    retry. Records carry ``dataset = tag``, as PASR's evaluation records do."""
    exchange = run_exchange(
        model,
        tokenizer,
        examples,
        prompts,
        judge,
        PassParams.greedy(max_new_tokens, rrr),
        1,
        batch_size,
        run_id=run_id,
        step=step,
        dataset=tag,
    )
    return eval_metrics(exchange.records), exchange.records
