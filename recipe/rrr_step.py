"""The data logic of one Reflect, Retry, Reward step (issue 14), engine-independent and model-free.

Reflect, Retry, Reward (Bensal et al., 2025) trains a model to write useful self-reflections
with nothing but a binary verifier:

1. the model answers each query once (:meth:`RrrPrompts.attempt_chat`); the verifier scores it;
2. first-attempt successes are done: they are **not trained** (:func:`select_failures`);
3. for each failure the model writes ``n`` reflections on its failed attempt, given the binary
   feedback only (:func:`reflection_requests`);
4. each reflection gets one retry with the reflection in context (:meth:`RrrPrompts.retry_chat`),
   scored by the same verifier;
5. a reflection's reward is its retry's success, 1 or 0 (:attr:`Reflection.reward`); the GRPO
   group is the failed query (``uid`` = its query id), so a query's reflections compete with
   each other (:func:`training_rows`; the engine's GRPO over them is the same batch builder as
   PASR's, :func:`recipe.local_engine.policy_update.build_batch`);
6. the update trains **the reflection tokens alone**: a training row is the reflection prompt
   plus the sampled reflection; the retry's tokens never enter a training row. The retry is
   only the measurement of whether the reflection helped.

With one reflection per failure (``n = 1``) verl's GRPO gives a lone row mean 0 and std 1, so
its advantage is its reward: successful reflections are reinforced and failed ones are not,
the paper's rule. With ``n > 1`` reflections compete within their query.

A verifier that fails (score ``None``) is not a wrong answer, as everywhere in this recipe: an
unscored first attempt is neither a success nor a failure (no reflections), and a reflection
whose retry is unscored has no reward and is left out of the rows and of GRPO's statistics.

What the engine does between these functions: tokenise the chats, generate, score with the
verifier (for Countdown :func:`rewards.countdown.countdown_reward`), update the policy on
:func:`training_rows` through ``build_batch`` (packing, outcome reward on the last reflection
token, verl's GRPO estimator grouped by ``uid``), log :func:`rrr_metrics`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean

from data.records import REFLECTION, RolloutRecord
from prompts import build_chat, load_prompt, prompt_version
from rewards.format import check_format

SUCCESS = 1.0  # a score at least this high is a success (the Countdown verifier gives 1.0 or 0.0)
METRIC_PREFIX = "rrr"

_PLACEHOLDER = re.compile(r"\{(question|attempt|feedback|reflection)\}")


def fill(template: str, **values: str) -> str:
    """Substitute ``{question}``/``{attempt}``/``{feedback}``/``{reflection}`` in one pass.

    Not ``str.format`` (as :func:`eval.self_refine.fill`): questions and attempts hold literal
    braces, and a placeholder written *inside* an attempt or reflection stays as written."""
    return _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0), template)


def is_success(score: float | None) -> bool:
    return score is not None and score >= SUCCESS


def final_score(first: float | None, retries: Sequence[float | None]) -> float | None:
    """The score of an exchange's final answer: the first attempt's when it succeeded, was not
    scored, or was not retried; else its best scored retry's; None when no retry was scored
    (an unscored answer is not a wrong one). One rule for the engines' evaluation and
    ``pasr stats``."""
    if first is None or is_success(first) or not retries:
        return first
    scored = [s for s in retries if s is not None]
    return max(scored) if scored else None


@dataclass(frozen=True)
class RrrPrompts:
    """The texts of one RRR run: the first-attempt (and retry) system prompt, the reflection
    and retry templates, and the binary feedback the reflection is given."""

    attempt_system: str
    reflect: str  # template: {question} {attempt} {feedback}
    retry: str  # template: {question} {attempt} {feedback} {reflection}
    feedback: str  # "Your answer was wrong."

    @classmethod
    def load(
        cls,
        attempt: str = "rrr_attempt",
        reflect: str = "rrr_reflect",
        retry: str = "rrr_retry",
        feedback: str = "rrr_feedback",
    ) -> RrrPrompts:
        return cls(load_prompt(attempt), load_prompt(reflect), load_prompt(retry), load_prompt(feedback))

    def version(self) -> str:
        return prompt_version("\x00".join([self.attempt_system, self.reflect, self.retry, self.feedback]))

    def attempt_chat(self, question: str) -> list[dict[str, str]]:
        return build_chat(self.attempt_system, question)

    def reflection_chat(self, question: str, attempt: str) -> list[dict[str, str]]:
        """No system prompt: the attempt prompt asks for an ``<answer>``, a reflection gives none."""
        return build_chat(None, fill(self.reflect, question=question, attempt=attempt.strip(), feedback=self.feedback))

    def retry_chat(self, question: str, attempt: str, reflection: str) -> list[dict[str, str]]:
        user = fill(
            self.retry,
            question=question,
            attempt=attempt.strip(),
            feedback=self.feedback,
            reflection=reflection.strip(),
        )
        return build_chat(self.attempt_system, user)


@dataclass(frozen=True)
class Attempt:
    """A first attempt and its verifier score (1.0 / 0.0; None when the verifier failed)."""

    query_id: str
    question: str
    text: str
    score: float | None


def select_failures(attempts: Sequence[Attempt]) -> list[Attempt]:
    """The attempts to reflect on: scored and not successful. Successes are not trained; an
    unscored attempt is not known to have failed."""
    return [a for a in attempts if a.score is not None and not is_success(a.score)]


@dataclass(frozen=True)
class ReflectionRequest:
    """One reflection to sample: the ``sample_index``-th reflection on a failed attempt."""

    attempt: Attempt
    sample_index: int
    chat: list[dict[str, str]]

    @property
    def query_id(self) -> str:
        return self.attempt.query_id

    def retry_chat(self, prompts: RrrPrompts, reflection: str) -> list[dict[str, str]]:
        """The retry of this request's failed attempt with ``reflection`` (its sampled text) in context."""
        return prompts.retry_chat(self.attempt.question, self.attempt.text, reflection)


def reflection_record(
    retry: RolloutRecord, text: str, ids: list[int], finish: str, reward: float | None
) -> RolloutRecord:
    """A reflection as a record, the same in both engines: its own text and tokens, the rest
    (query, gold, step, run) from its retry's record; ``acc`` and ``total_reward`` are its reward
    (its retry's success), None with the retry's judge error when that was unscored."""
    fmt = check_format(text)
    return RolloutRecord(
        run_id=retry.run_id,
        query_id=retry.query_id,
        data_source=retry.data_source,
        variant=REFLECTION,
        prompt=retry.prompt,
        response=text,
        response_tokens=len(ids),
        format_ok=fmt.ok,
        format_reason=fmt.reason,
        n_refine=fmt.n_refine,
        extracted_answer=None,
        gold=retry.gold,
        acc=reward,
        judge_error=retry.judge_error,
        total_reward=reward,
        step=retry.step,
        dataset=retry.dataset,
        sample_index=retry.sample_index,
        engine=retry.engine,
        prompt_version=retry.prompt_version,
        finish_reason=finish,
    )


def reflection_requests(failures: Sequence[Attempt], prompts: RrrPrompts, n: int) -> list[ReflectionRequest]:
    """``n`` reflection chats per failed attempt, query by query (the order of a batched generate)."""
    if n < 1:
        raise ValueError(f"n (reflections per failure) must be >= 1, got {n}")
    return [
        ReflectionRequest(attempt=a, sample_index=i, chat=prompts.reflection_chat(a.question, a.text))
        for a in failures
        for i in range(n)
    ]


@dataclass(frozen=True)
class Reflection:
    """A sampled reflection and the verifier score of the retry that had it in context."""

    query_id: str
    sample_index: int
    prompt_ids: list[int]  # the reflection chat, tokenised with the generation prompt
    reflection_ids: list[int]  # the sampled reflection tokens, EOS included
    retry_score: float | None  # None: the retry's verifier failed

    @property
    def reward(self) -> float | None:
        """1.0 when the retry succeeded, 0.0 when it failed, None when it was not scored."""
        if self.retry_score is None:
            return None
        return 1.0 if is_success(self.retry_score) else 0.0


@dataclass(frozen=True)
class ReflectionRow:
    """One training row: reflection prompt + reflection, rewarded by its retry. The fields are
    those of the local engine's ``TrainRollout``, so its ``build_batch`` takes these rows as
    they are; there is no field for retry tokens, so none can reach the update."""

    uid: str  # the GRPO group: the failed query
    prompt_ids: list[int]
    response_ids: list[int]  # the reflection tokens, and only those
    reward: float


def training_rows(reflections: Sequence[Reflection]) -> list[ReflectionRow]:
    """The rows to train on: every reflection whose retry was scored, grouped by query."""
    return [
        ReflectionRow(
            uid=r.query_id, prompt_ids=list(r.prompt_ids), response_ids=list(r.reflection_ids), reward=r.reward
        )
        for r in reflections
        if r.reward is not None
    ]


def mean_or_zero(values) -> float:
    """The mean, or 0.0 for no values (a rate with nothing to count, as logging wants a number)."""
    values = list(values)
    return float(fmean(values)) if values else 0.0


def rrr_metrics(attempts: Sequence[Attempt], reflections: Sequence[Reflection]) -> dict[str, float]:
    """The ``rrr/*`` metrics of one step (0.0 where a rate has nothing to count).

    * ``first_attempt_acc``: share of scored first attempts that succeeded;
    * ``retry_acc``: share of scored retries that succeeded;
    * ``reflection_length/mean``: reflection tokens, EOS included;
    * ``recovered_rate``: share of failed queries with at least one successful retry;
    * ``trained_rows``: reflection rows handed to the update;
    * ``failed_queries``, ``verifier_errors`` (unscored attempts and retries): counts.
    """
    failed = {a.query_id for a in select_failures(attempts)}
    recovered = {r.query_id for r in reflections if r.query_id in failed and r.reward == 1.0}
    p = METRIC_PREFIX
    return {
        f"{p}/first_attempt_acc": mean_or_zero(is_success(a.score) for a in attempts if a.score is not None),
        f"{p}/retry_acc": mean_or_zero(r.reward for r in reflections if r.reward is not None),
        f"{p}/reflection_length/mean": mean_or_zero(len(r.reflection_ids) for r in reflections),
        f"{p}/recovered_rate": len(recovered) / len(failed) if failed else 0.0,
        f"{p}/trained_rows": float(len(training_rows(reflections))),
        f"{p}/failed_queries": float(len(failed)),
        f"{p}/verifier_errors": float(
            sum(a.score is None for a in attempts) + sum(r.retry_score is None for r in reflections)
        ),
    }
