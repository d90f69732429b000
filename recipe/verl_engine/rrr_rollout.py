"""Reflect, Retry, Reward on the verl engine (``method=rrr``): verl's rollout manager wrapped so
the one ``generate_sequences`` call ``fit()`` makes per step runs an RRR step's three passes and
hands back the reflection rows to train on.

What a step does is :mod:`recipe.rrr_step`'s, shared with the local engine
(:mod:`recipe.local_engine.rrr`); this module is the verl part (:func:`RrrRolloutManager._exchange`):

1. one first attempt per query (``fit()`` sends each prompt ``rollout.n`` times; the first row of
   each uid is the query), with RRR's attempt system prompt, judged;
2. successes are done; for each failure ``rrr.n_reflections`` reflections
   (:meth:`recipe.rrr_step.RrrPrompts.reflection_chat`: the attempt and the binary feedback),
   cut to ``rrr.max_reflection_tokens`` (:func:`.batch_convert.truncate_responses`: verl's agent
   loop has no per-request token limit);
3. one retry per reflection with the reflection in context
   (:meth:`recipe.rrr_step.RrrPrompts.retry_chat`), judged: a reflection's reward is its retry's
   success, 1 or 0 (:attr:`recipe.rrr_step.Reflection.reward`).

The chats go through the wrapped manager as ``raw_prompt`` (:func:`.plain_rollouts.with_messages`),
so verl's agent loop applies the chat template as it does for every prompt, and the three passes
share the replicas that are awake for the step.

**The rows returned to fit().** ``fit()`` repeats its batch ``rollout.n`` times and unions the
rollout's output with it row by row (pinned in ``tests/test_verl_pinned.py``), so the output has
exactly ``rollout.n = rrr.n_reflections`` rows per query, in the input's order and with its
``uid`` (:func:`recipe.verl_engine.config.rrr_config` checks the sizes agree):

* a failed query's rows are its reflections: prompt = the reflection chat, response = the
  reflection, so ``response_mask`` covers exactly the reflection tokens (the retry's tokens are in
  no row; the retry only measures the reflection), and the reward sits in ``rm_scores`` at the
  last reflection token. GRPO groups them by ``uid``, the failed query: its reflections compete
  with each other (one reflection per failure: verl gives a lone row its reward as advantage).
  A reflection whose retry was not scored (verifier error) is masked (``pasr_trained`` False):
  no loss and outside its group's statistics, never a 0 (:mod:`recipe.advantages`).
* a query whose first attempt succeeded, or was not scored, trains nothing: its rows are masked
  filler rows (its attempt prompt and the first token of its attempt, score 0), there only because
  ``fit()`` needs the rows. One token keeps verl's log-prob passes over them cheap. verl's
  ``critic/score/*`` and ``response_length/*`` count them; ``rrr/*`` are the step's figures.

A step in which no reflection has a scored retry (every first attempt succeeded, say) leaves every
row masked: the trainer then skips the actor update (``actor/update_skipped``,
:func:`recipe.verl_engine.trainer.nothing_to_train`) and a warning says why.

**Validation** (``meta_info['validate']``; verl's ``_validate``) is the local engine's evaluation:
greedy (``val_kwargs``) attempts and one reflection and retry per failure, each validation row
an attempt. A row's score is whether its question is solved after at most one retry (so
``val-core/<source>/reward`` reads as the local ``eval/acc``); ``first_attempt_acc``,
``retried``, ``recovered`` and ``judge_error`` are its reward extra info.

Every pass is recorded as the local engine records it (variants ``attempt``, ``reflection``,
``retry``; a reflection's ``acc`` is its retry's success) in ``step_NNNNNN.jsonl`` and
``val_step_NNNNNN.jsonl``, and the step's ``rrr/*`` metrics (:func:`recipe.rrr_step.rrr_metrics`
and the engine's own, :meth:`RrrRolloutManager._metrics`) reach the trainer's log through
:meth:`pop_metrics`, as PASR's ``pasr/*`` do.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from data.records import ATTEMPT, REFLECTION, RETRY, RolloutRecord
from recipe.metrics import zero_spread_fraction

# reflection_record: the engines' one reflection record, read by `pasr stats` and the benchmark
from recipe.rrr_config import RrrConfig
from recipe.rrr_step import (
    Attempt,
    Reflection,
    RrrPrompts,
    is_success,
    mean_or_zero,
    reflection_record,
    reflection_requests,
    rrr_metrics,
    select_failures,
)
from recipe.verl_engine.batch_convert import (
    prompt_at_limit,
    prompt_token_ids,
    response_token_ids,
    rollouts_from_rows,
    truncate_responses,
    write_scores,
    write_train_scores,
)
from recipe.verl_engine.plain_rollouts import UID, check_row_order, query_uids, with_messages, with_system_prompt
from recipe.verl_engine.rollout_wrapper import UNTRAINED_TOKENS_KEY, RolloutWrapper, wrapper_settings


@dataclass
class Exchange:
    """One round of attempts, reflections on the failed ones and retries, as verl generated it."""

    attempt_out: Any  # DataProto: the attempt rows as generated, one per attempt
    attempts: list[Attempt]
    attempt_records: list[RolloutRecord]
    attempt_rows: np.ndarray  # per reflection: the row of its attempt in attempt_out
    reflection_out: Any | None  # DataProto: the reflection rows (cut), one per reflection; None: no failure
    reflections: list[Reflection]
    reflection_records: list[RolloutRecord]
    retry_records: list[RolloutRecord]
    truncated_prompts: int  # reflection and retry prompts that filled rollout.prompt_length
    untrained_tokens: int  # prompt + response tokens of the attempts and retries
    timing: dict[str, float] = field(default_factory=dict)

    @property
    def records(self) -> list[RolloutRecord]:
        return self.attempt_records + self.reflection_records + self.retry_records


def _tokens(rows) -> int:
    return int(rows.batch["attention_mask"].sum().item()) if rows is not None and len(rows) else 0


class RrrRolloutManager(RolloutWrapper):
    """The RRR rollout around a verl rollout manager (:class:`RolloutWrapper` for the rest)."""

    def __init__(self, inner, *, cfg: RrrConfig, prompts: RrrPrompts, **settings) -> None:
        super().__init__(inner, prompt_versions=prompts.version(), **settings)
        self.cfg = cfg
        self.prompts = prompts
        tok = self.tokenizer
        self.pad_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id

    # ------------------------------------------------------------------ the three passes
    def _judge(self, rollouts, step: int, timing: dict[str, float]) -> list[RolloutRecord]:
        t0 = time.perf_counter()
        records = self._judge_and_record(rollouts, step)
        timing["rrr_judge"] = timing.get("rrr_judge", 0.0) + time.perf_counter() - t0
        return records

    def _exchange(self, queries, n: int, step: int) -> Exchange:
        """Attempts for the rows of ``queries`` (chats with the attempt system prompt),
        ``n`` reflections per failed attempt, one retry per reflection; judged and recorded."""
        timing: dict[str, float] = {}
        t0 = time.perf_counter()
        attempt_out = self._generate(queries)
        timing["rrr_attempt"] = time.perf_counter() - t0
        attempt_records = self._judge(rollouts_from_rows(queries, attempt_out, self.tokenizer, ATTEMPT), step, timing)
        attempts = [Attempt(r.query_id, r.prompt, r.response, r.acc) for r in attempt_records]
        row_of = {id(a): i for i, a in enumerate(attempts)}
        requests = reflection_requests(select_failures(attempts), self.prompts, n)
        rows = np.array([row_of[id(r.attempt)] for r in requests], dtype=np.int64)
        if not requests:
            return Exchange(
                attempt_out, attempts, attempt_records, rows, None, [], [], [], 0, _tokens(attempt_out), timing
            )

        base = queries.select_idxs(rows)  # the failed query's columns (uid, gold, ...) for each request
        base.meta_info = dict(queries.meta_info)  # validate (greedy) and global_steps go to every pass
        reflection_in = with_messages(base, [r.chat for r in requests])
        t0 = time.perf_counter()
        reflection_out = truncate_responses(self._generate(reflection_in), self.cfg.max_reflection_tokens, self.pad_id)
        timing["rrr_reflection"] = time.perf_counter() - t0
        written = rollouts_from_rows(
            reflection_in, reflection_out, self.tokenizer, REFLECTION, self.cfg.max_reflection_tokens
        )

        retry_in = with_messages(base, [r.retry_chat(self.prompts, w.text) for r, w in zip(requests, written)])
        t0 = time.perf_counter()
        retry_out = self._generate(retry_in)
        if self.cfg.max_retry_tokens:
            retry_out = truncate_responses(retry_out, self.cfg.max_retry_tokens, self.pad_id)
        timing["rrr_retry"] = time.perf_counter() - t0
        # a reflection and its retry are the (attempt sample) * n + (reflection)-th of the query;
        # query id and question are the attempt's (the retry rows' own chat is the retry prompt)
        index = [attempt_records[row].sample_index * n + r.sample_index for row, r in zip(rows, requests)]
        generated = rollouts_from_rows(retry_in, retry_out, self.tokenizer, RETRY, self.cfg.max_retry_tokens)
        retries = [
            dataclasses.replace(r, query_id=req.query_id, question=req.attempt.question, sample_index=k)
            for r, req, k in zip(generated, requests, index)
        ]
        retry_records = self._judge(retries, step, timing)

        reflection_ids = response_token_ids(reflection_out)
        reflections = [
            Reflection(req.query_id, k, p_ids, ids, retry.acc)
            for req, k, p_ids, ids, retry in zip(
                requests, index, prompt_token_ids(reflection_out), reflection_ids, retry_records
            )
        ]
        reflection_records = [
            reflection_record(retry, w.text, ids, w.finish_reason, refl.reward)
            for retry, w, ids, refl in zip(retry_records, written, reflection_ids, reflections)
        ]
        truncated = int(prompt_at_limit(reflection_out).sum() + prompt_at_limit(retry_out).sum())
        return Exchange(
            attempt_out,
            attempts,
            attempt_records,
            rows,
            reflection_out,
            reflections,
            reflection_records,
            retry_records,
            truncated,
            _tokens(attempt_out) + _tokens(retry_out),
            timing,
        )

    # ------------------------------------------------------------------ training
    def generate_sequences(self, gen_batch):
        if gen_batch.meta_info.get("validate", False):
            return self._validate(gen_batch)
        step = int(gen_batch.meta_info.get("global_steps", 0) or 0)
        n = self.cfg.n_reflections
        query_uids(gen_batch, n, size_key="rrr.n_reflections")  # rows in runs of n per query
        queries = with_system_prompt(
            gen_batch.select_idxs(np.arange(0, len(gen_batch), n)), self.prompts.attempt_system
        )
        ex = self._exchange(queries, n, step)

        self.last_records = ex.records
        self._dump_and_check(step, ex.records, judged=ex.attempt_records + ex.retry_records)
        out, scores, mask = self._training_rows(ex, n)
        check_row_order(out, gen_batch.non_tensor_batch[UID])
        self._pending_metrics = self._metrics(ex, out, scores, mask, n)
        self._warn(step, ex, self._pending_metrics)

        # the attempt pass's agent-loop timing, and the wall time of each pass and of the verifier
        timing = {**ex.attempt_out.meta_info.get("timing", {}), **ex.timing}
        out.meta_info = {
            **ex.attempt_out.meta_info,
            **out.meta_info,
            "timing": timing,
            UNTRAINED_TOKENS_KEY: ex.untrained_tokens,
        }
        return out

    def _training_rows(self, ex: Exchange, n: int):
        """``(rows, scores, mask)``: ``n`` rows per query in query order, its reflections or
        masked filler rows (see the module docstring), scored and masked."""
        from verl import DataProto

        n_queries = len(ex.attempts)
        parts = [truncate_responses(ex.attempt_out, 1, self.pad_id)]  # filler: attempt prompt + 1 token
        if ex.reflection_out is not None:
            parts.append(ex.reflection_out.slice(0, None))
        for part in parts:
            part.meta_info = {}  # concat refuses differing meta_info (each pass has its own timing)
        pool = DataProto.concat(parts)

        first = {}  # attempt row -> its first reflection
        for k, row in enumerate(ex.attempt_rows.tolist()):
            first.setdefault(row, k)
        rewards = [r.reward for r in ex.reflections]
        order: list[int] = []
        scores: list[float] = []
        mask: list[bool] = []
        reflection: list[bool] = []
        for i in range(n_queries):
            if i not in first:
                order += [i] * n
                scores += [0.0] * n
                mask += [False] * n
                reflection += [False] * n
                continue
            group = list(range(first[i], first[i] + n))
            scored = [rewards[k] for k in group if rewards[k] is not None]
            # an unscored reflection's score is a placeholder no update uses (it is masked), its
            # group's mean, so summaries over every row do not read it as a 0 (recipe.scoring)
            placeholder = sum(scored) / len(scored) if scored else 0.0
            order += [n_queries + k for k in group]
            scores += [rewards[k] if rewards[k] is not None else placeholder for k in group]
            mask += [rewards[k] is not None for k in group]
            reflection += [True] * n
        rows = pool.select_idxs(np.asarray(order, dtype=np.int64))
        extra = {
            "acc": np.array([s if m else 0.0 for s, m in zip(scores, mask)], dtype=np.float64),
            "is_reflection": np.array(reflection, dtype=np.float64),
            "judge_error": np.array([r and not m for r, m in zip(reflection, mask)], dtype=np.float64),
        }
        return write_train_scores(rows, scores, mask, extra), scores, mask

    def _metrics(self, ex: Exchange, rows, scores: Sequence[float], mask: Sequence[bool], n: int) -> dict[str, float]:
        """:func:`recipe.rrr_step.rrr_metrics` and what only this engine can say: attempt and retry
        lengths (as the local engine logs them), masked rows, the share of reflection groups
        whose scored reflections all earned the same (no gradient), and reflection/retry prompts
        that filled ``rollout.prompt_length`` (verl's agent loop cuts longer ones from the left).
        A group with a single scored reflection (always, with one reflection per failure) is
        not counted: verl's GRPO gives a lone row its reward as advantage."""
        m = rrr_metrics(ex.attempts, ex.reflections)
        m["rrr/response_length/mean"] = mean_or_zero(r.response_tokens for r in ex.attempt_records)
        m["rrr/retry_length/mean"] = mean_or_zero(r.response_tokens for r in ex.retry_records)
        m["rrr/masked_rows"] = float(len(mask) - sum(mask))
        uids = rows.non_tensor_batch.get(UID, np.arange(len(mask)) // n)
        trained = [i for i, keep in enumerate(mask) if keep]
        size = Counter(uids[i] for i in trained)
        grouped = [i for i in trained if size[uids[i]] > 1]
        m["rrr/zero_spread_groups"] = zero_spread_fraction([scores[i] for i in grouped], [uids[i] for i in grouped])
        m["rrr/truncated_prompts"] = float(ex.truncated_prompts)
        return m

    def _warn(self, step: int, ex: Exchange, metrics: dict[str, float]) -> None:
        if metrics["rrr/trained_rows"] == 0:
            print(
                f"RRR WARNING step {step}: nothing to train: {metrics['rrr/failed_queries']:.0f} of {len(ex.attempts)} "
                f"first attempts failed, {len(ex.reflections)} reflections, none with a scored retry; every row is "
                "masked and the actor update is skipped",
                file=sys.stderr,
                flush=True,
            )
        if ex.truncated_prompts:
            print(
                f"RRR WARNING step {step}: {ex.truncated_prompts} reflection/retry prompts filled "
                "rollout.prompt_length and may have been cut from the left (the question first); raise "
                "data.max_prompt_length",
                file=sys.stderr,
                flush=True,
            )

    # ------------------------------------------------------------------ validation
    def _validate(self, gen_batch):
        step = int(gen_batch.meta_info.get("global_steps", 0) or 0)
        ex = self._exchange(with_system_prompt(gen_batch, self.prompts.attempt_system), 1, step)
        for r in ex.records:
            r.dataset = "val"
        self._dump_validation(step, ex.records)
        retry = {int(row): refl.retry_score for row, refl in zip(ex.attempt_rows, ex.reflections)}
        first = [is_success(a.score) for a in ex.attempts]
        retried = [i in retry for i in range(len(first))]
        recovered = [i in retry and is_success(retry[i]) for i in range(len(first))]
        solved = [f or r for f, r in zip(first, recovered)]
        errors = [a.score is None or (i in retry and retry[i] is None) for i, a in enumerate(ex.attempts)]
        if any(errors):
            print(
                f"RRR WARNING validation at step {step}: the judge failed on {sum(errors)} of {len(errors)} "
                "questions (scored 0 in val-core; counted in val-aux/.../judge_error)",
                file=sys.stderr,
                flush=True,
            )
        columns = {
            "acc": solved,
            "first_attempt_acc": first,
            "retried": retried,
            "recovered": recovered,
            "judge_error": errors,
        }
        extra = {k: np.array(v, dtype=np.float64) for k, v in columns.items()}
        return write_scores(ex.attempt_out, [float(s) for s in solved], extra)


def build_rrr_rollout_manager(config, tokenizer, inner) -> RrrRolloutManager:
    """The RRR rollout around ``inner`` from a composed ``pasr_trainer`` config with ``method=rrr``."""
    from recipe.verl_engine.config import rrr_config

    cfg = rrr_config(config)
    return RrrRolloutManager(
        inner, tokenizer=tokenizer, cfg=cfg, prompts=cfg.load_prompts(), **wrapper_settings(config)
    )
