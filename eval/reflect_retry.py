"""Reflect-retry: how a model trained with Reflect, Retry, Reward (issue 14) is evaluated.

Reflect, Retry, Reward (Bensal et al., 2025; :mod:`recipe.rrr_step`) trains a model to write a
useful reflection after a failed attempt. Its evaluation is therefore not one pass but the
exchange it was trained for, greedy and with one reflection per failure, the way the local
engine's held-out evaluation does it (:func:`recipe.local_engine.rrr.evaluate_rrr`):

1. the question is answered once with RRR's attempt prompt (:meth:`RrrPrompts.attempt_chat`);
2. the run's judge scores that attempt. A success (score at least :data:`SUCCESS`) is final;
3. a failure gets ONE reflection (:meth:`RrrPrompts.reflection_chat`, the binary feedback
   only) and ONE retry with the reflection in context (:meth:`RrrPrompts.retry_chat`); the
   retry is the sample's answer, the one scored;
4. an attempt the judge could not score is final as well and stays a judge error: it is not
   known to have failed, so it is not retried (:func:`recipe.rrr_step.select_failures`, as in
   training) and it is never a 0. A rerun judges it again and, if it then failed, reflects
   and retries from the kept attempt (:func:`undecided`, :func:`kept_attempt`).

Every pass's tokens count toward the sample's output tokens, as for Self-Refine, so the
accuracy-vs-tokens comparison with PASR and Self-Refine is fair.

Unlike ``plain`` and ``pasr``, this method needs the judge *between* passes, so it takes a
*verifier* from the caller (:mod:`eval.run` hands one with the run's judge, answer extraction
and judge-error rule, so the attempt is scored exactly as a final answer would be). It stays
batched across questions: one generate call for all attempts, one judge call, one generate
call for the failures' reflections and one for their retries.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from data.records import ATTEMPT, REFLECTION, RETRY, RolloutRecord
from eval.resume import is_judge_error
from recipe.rrr_step import Attempt, RrrPrompts, is_success, reflection_requests, select_failures

METHOD = "reflect-retry"

# (acc, judge error) of one response, as recipe.scoring.acc_and_error gives it: acc None on a failure
Verdict = tuple[float | None, str | None]
# (indices into the questions, responses) -> one Verdict per response
Verifier = Callable[[Sequence[int], Sequence[str]], Sequence[Verdict]]
# chats -> one completion per chat (.text, .n_tokens, optionally .finish_reason), as
# eval.self_refine.Generator; it also takes ``max_new_tokens=N`` for a pass with its own limit
Generator = Callable[..., Sequence]


@dataclass(frozen=True)
class RrrPass:
    """One generated pass: the attempt, the reflection or the retry."""

    variant: str  # attempt | reflection | retry (data.records' RRR variants)
    text: str
    n_tokens: int
    finish_reason: str | None = None

    def to_dict(self) -> dict:
        """The shape of a pass in a record's ``extra["passes"]`` (as Self-Refine's)."""
        return {
            "variant": self.variant,
            "text": self.text,
            "tokens": self.n_tokens,
            "finish_reason": self.finish_reason,
        }

    @classmethod
    def from_dict(cls, d: dict) -> RrrPass:
        return cls(d["variant"], d["text"], int(d["tokens"]), d.get("finish_reason"))


@dataclass
class ReflectRetryTrace:
    """One question's exchange. ``first`` is the judge's verdict on the attempt."""

    question: str
    attempt: RrrPass
    first: Verdict
    reflection: RrrPass | None = None
    retry: RrrPass | None = None

    @property
    def retried(self) -> bool:
        return self.retry is not None

    @property
    def final(self) -> RrrPass:
        """What is scored: the retry when there was one, else the attempt."""
        return self.retry or self.attempt

    @property
    def passes(self) -> list[RrrPass]:
        return [p for p in (self.attempt, self.reflection, self.retry) if p is not None]

    @property
    def total_tokens(self) -> int:
        return sum(p.n_tokens for p in self.passes)

    @property
    def final_verdict(self) -> Verdict | None:
        """The judge's verdict on :attr:`final` when it is already known (the attempt was
        final), so the record reuses it: judging again would cost an LLM judge a call and
        could turn an attempt's judge error into a 0 that was never retried."""
        return None if self.retried else self.first

    def meta(self) -> dict:
        """What the summary needs to tell first-attempt accuracy from final accuracy."""
        acc = self.first[0]
        return {
            "retried": self.retried,
            "first_acc": acc,
            "first_correct": None if acc is None else is_success(acc),
            "final_tokens": self.final.n_tokens,
        }


def _call(
    generate: Generator, chats: list[list[dict]], variant: str, max_new_tokens: int | None = None
) -> list[RrrPass]:
    if not chats:
        return []
    outs = generate(chats) if max_new_tokens is None else generate(chats, max_new_tokens=max_new_tokens)
    if len(outs) != len(chats):
        raise RuntimeError(f"generator returned {len(outs)} completions for {len(chats)} chats")
    return [RrrPass(variant, o.text, int(o.n_tokens), getattr(o, "finish_reason", None)) for o in outs]


def run_reflect_retry(
    questions: Sequence[str],
    generate: Generator,
    verify: Verifier,
    prompts: RrrPrompts,
    *,
    reflection_tokens: int | None = None,
    attempts: Sequence[RrrPass | None] | None = None,
) -> list[ReflectRetryTrace]:
    """Reflect-retry for every question, batched: at most three generate calls and one judge
    call (see the module docstring).

    ``reflection_tokens`` limits the reflection pass (``rrr.max_reflection_tokens``: a
    reflection is a few sentences); None: the generator's own limit. ``attempts`` holds a kept
    first attempt per question (None: generate it): a rerun continues from an attempt whose
    judge failed instead of generating it again."""
    kept = list(attempts) if attempts is not None else [None] * len(questions)
    if len(kept) != len(questions):
        raise ValueError(f"{len(kept)} kept attempts for {len(questions)} questions")
    if not questions:
        return []
    todo = [i for i, a in enumerate(kept) if a is None]
    for i, p in zip(todo, _call(generate, [prompts.attempt_chat(questions[i]) for i in todo], ATTEMPT)):
        kept[i] = p
    verdicts = list(verify(range(len(questions)), [a.text for a in kept]))
    if len(verdicts) != len(questions):
        raise RuntimeError(f"verifier returned {len(verdicts)} verdicts for {len(questions)} answers")
    traces = [ReflectRetryTrace(q, a, v) for q, a, v in zip(questions, kept, verdicts)]

    # the failures, as training selects them (the query id is the question's index here)
    scored = [Attempt(str(i), t.question, t.attempt.text, t.first[0]) for i, t in enumerate(traces)]
    requests = reflection_requests(select_failures(scored), prompts, n=1)
    reflections = _call(generate, [r.chat for r in requests], REFLECTION, reflection_tokens)
    retries = _call(generate, [r.retry_chat(prompts, p.text) for r, p in zip(requests, reflections)], RETRY)
    for req, reflection, retry in zip(requests, reflections, retries):
        trace = traces[int(req.query_id)]
        trace.reflection, trace.retry = reflection, retry
    return traces


def undecided(rec: RolloutRecord) -> bool:
    """A reflect-retry sample whose first attempt the judge could not score, so whether to retry
    was never decided. A rerun does not merely re-judge it (a failure would then be a 0 that
    was never retried): it judges the kept attempt again and finishes the exchange."""
    return rec.extra.get("method") == METHOD and not rec.extra.get("retried") and is_judge_error(rec)


def kept_attempt(rec: RolloutRecord) -> RrrPass:
    """The first attempt recorded in an :func:`undecided` sample."""
    return RrrPass.from_dict(rec.extra["passes"][0])
