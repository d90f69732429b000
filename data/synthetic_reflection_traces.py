"""Supervised warm-up traces for Reflect, Retry, Reward on the synthetic arithmetic.

RRR learns which reflection makes a retry succeed, so the warm-up must teach the three prompts
it uses (:class:`recipe.rrr_step.RrrPrompts`): the attempt (the plain steps of
:func:`data.warmup_traces.build_trace`), the reflection on a failed attempt, and the retry with
that attempt and reflection in context. On Countdown an attempt-only warm-up left reflections
that were equations and retries that were right 0 times in 89 (:mod:`data.countdown_traces`).

The failed attempts are the kind the warmed-up model makes here: every error on this data is an
arithmetic one (a step's value off by a few, carried on to the answer), so a reflection *can*
name it. The reflection redoes the wrong step digit by digit, as PASR's ``column`` refines do
(:func:`data.warmup_traces.column_check`: one-digit facts a small model knows more reliably than
a two-digit carry), and says what to do next time. Whether the model's own reflections find the
error is what RRR's reward then trains.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from data.synthetic import Step, SyntheticProblem, apply_op
from data.warmup_traces import _wrong_value, column_check


@dataclass(frozen=True)
class SyntheticReflectionTrace:
    """One supervised reflection: a problem, a failed attempt at it, and the reflection to learn."""

    problem: SyntheticProblem
    attempt: str
    reflection: str


def failed_attempt(problem: SyntheticProblem, rng: random.Random) -> tuple[str, Step, int]:
    """A wrong attempt: one step's value off by 1-10, later steps computed right from it, so
    the answer is wrong. Returns the attempt's text, the step it got wrong and the wrong value.

    Example:
        >>> from data.synthetic import generate_problems
        >>> p = generate_problems(1, seed=3)[0]
        >>> text, step, wrong = failed_attempt(p, random.Random(0))
        >>> wrong != step.result and text.endswith(f"<answer>{wrong}</answer>")
        True
    """
    where = rng.randrange(len(problem.steps))
    value, parts = None, []
    wrong_step, wrong = problem.steps[where], 0
    for i, step in enumerate(problem.steps):
        a = step.a if value is None else value
        result = apply_op(step.op, a, step.b)
        if i == where:
            wrong_step, wrong = step, _wrong_value(rng, result)
            result = wrong
        parts.append(f"{a} {step.op} {step.b} = {result}.")
        value = result
    # one step: the wrong value is the answer; more steps: the last value carries the error
    return "<think>" + " ".join(parts) + f"</think><answer>{value}</answer>", wrong_step, wrong


def checked_reflection(step: Step, wrong: int) -> str:
    """The reflection that finds the slip: the step as written, the step redone digit by digit,
    and what to do next time.

    Example:
        >>> checked_reflection(Step("-", 76, 27, 49, "76 - 27 = 49"), 53)  # doctest: +NORMALIZE_WHITESPACE
        'I wrote 76 - 27 = 53, but ones 16 - 7 = 9, tens 7 - 2 - 1 = 4, so 76 - 27 = 49, not 53.
        Next time I will redo every step digit by digit before I answer.'
    """
    redone = column_check(step)
    return (
        f"I wrote {step.a} {step.op} {step.b} = {wrong}, but {redone}, so {step.a} {step.op} {step.b} = "
        f"{step.result}, not {wrong}. Next time I will redo every step digit by digit before I answer."
    )


def build_reflection_trace(problem: SyntheticProblem, rng: random.Random) -> SyntheticReflectionTrace:
    attempt, step, wrong = failed_attempt(problem, rng)
    return SyntheticReflectionTrace(problem, attempt, checked_reflection(step, wrong))
