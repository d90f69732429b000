"""Supervised warm-up traces for the cold start.

The base SmolLM2 never writes the tags (format pass 0.00 with the refine prompt), so a short
supervised phase on synthetic tagged traces comes first. What the traces teach matters: a
refine that only restates a value never helps, so PASR rightly trains it away, and one that
always changes the value teaches the model to "correct" right values too (both styles retired:
:mod:`recipe.retired_keys`, docs/local_engine.md "The cold start"). The refines here redo the
step and either fix a wrong first value or confirm a right one: ``column`` digit by digit
(:func:`column_check`, the default), ``check`` in two larger pieces (:func:`worked_check`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from data.records import PLAIN, REFINE
from data.synthetic import Step, SyntheticProblem


def _wrong_value(rng: random.Random, right: int) -> int:
    for _ in range(20):
        wrong = right + rng.choice([-1, 1]) * rng.randint(1, 10)
        if wrong >= 0 and wrong != right:
            return wrong
    return right + 1


def _equation(step: Step, a: int, result: int) -> str:
    return f"{a} {step.op} {step.b} = {result}"


def worked_check(step: Step) -> str:
    """The step redone in smaller pieces: the second operand split into tens and ones
    (``76 - 27``: ``76 - 20 = 56, 56 - 7 = 49``); a multiplication as repeated addition.

    A small model gets a two-digit carry or borrow wrong far more often than a round-ten or
    one-digit step, so redoing a step this way is a check that can *catch* a wrong value,
    which is what a refine must be able to do for PASR to reward it.
    """
    a, b, op = step.a, step.b, step.op
    if op == "*":
        return " + ".join([str(a)] * b) + f" = {step.result}"
    tens, ones = b - b % 10, b % 10
    if tens and ones:  # 76 - 27: 76 - 20 = 56, 56 - 7 = 49
        mid = a + tens if op == "+" else a - tens
        return f"{a} {op} {tens} = {mid}, {mid} {op} {ones} = {step.result}"
    a_tens, a_ones = a - a % 10, a % 10
    if a_tens and a_ones:  # 61 - 30: 60 - 30 = 30, 30 + 1 = 31 (b is round or one digit)
        mid = a_tens + b if op == "+" else a_tens - b
        if mid >= 0:
            return f"{a_tens} {op} {b} = {mid}, {mid} + {a_ones} = {step.result}"
    return f"{a} {op} {b} = {step.result}"  # one-digit or round numbers: nothing smaller to do


def column_check(step: Step) -> str:
    """The step redone digit by digit, the way it is done on paper: the ones with their carry
    or borrow, then the tens (everything above the ones digit, so 134 has 13 tens):
    ``76 - 27``: ``ones 16 - 7 = 9, tens 7 - 2 - 1 = 4`` (the trace's verdict then reads ``so 49``);
    ``67 + 37``: ``ones 7 + 7 = 14, tens 6 + 3 + 1 = 10`` (``so 104``).
    A multiplication stays repeated addition (:func:`worked_check`).

    Every equation in it is a one-digit fact (with a borrowed ten, or a tens count below 20):
    facts a small model knows far more reliably than a two-digit carry or borrow done in one
    step, so this check is right more often than the first value it checks. That is what makes
    refining pay: on the embedded model :func:`worked_check`'s pieces (``56 - 7 = 49``) kept the
    borrow, and its checks were right about as often as first values.
    """
    a, b, op = step.a, step.b, step.op
    if op == "*":
        return worked_check(step)
    a_tens, a_ones, b_tens, b_ones = a // 10, a % 10, b // 10, b % 10
    if op == "+":
        ones = a_ones + b_ones
        carry = " + 1" if ones >= 10 else ""
        tens = a_tens + b_tens + (ones >= 10)
        return f"ones {a_ones} + {b_ones} = {ones}, tens {a_tens} + {b_tens}{carry} = {tens}"
    borrow = a_ones < b_ones
    top = a_ones + 10 if borrow else a_ones
    tens = a_tens - b_tens - borrow
    return f"ones {top} - {b_ones} = {top - b_ones}, tens {a_tens} - {b_tens}{' - 1' if borrow else ''} = {tens}"


CHECKS = {"check": worked_check, "column": column_check}
REFINE_STYLES = tuple(CHECKS)  # warmup.refine_style


def build_trace(problem: SyntheticProblem, rng: random.Random, refine: bool, style: str = "column") -> str:
    """The assistant response for one problem: ``<think>`` steps ``</think><answer>``.

    With ``refine`` one step's first value is wrong half the time, and the refine redoes the
    step (``style``: :func:`column_check` or :func:`worked_check`) and fixes or confirms it;
    later steps use the right value.
    """
    if style not in CHECKS:
        raise ValueError(f"refine style must be one of {', '.join(REFINE_STYLES)}, got {style!r}")
    steps = problem.steps
    where = rng.randrange(len(steps)) if refine else -1
    lines = []
    for i, step in enumerate(steps):
        if i == where:
            # Half the checked steps were wrong at first and the check fixes them; half were
            # right and the check confirms, so a refine does not teach "always change the value".
            first = _wrong_value(rng, step.result) if rng.random() < 0.5 else step.result
            verdict = f"so {step.result}, not {first}" if first != step.result else f"so {step.result} is right"
            lines.append(f"{_equation(step, step.a, first)}.")
            lines.append(f"<refine>{CHECKS[style](step)}, {verdict}.</refine>")
            if first == step.result:
                continue
        lines.append(f"{step.text}.")
    return "<think>" + " ".join(lines) + "</think><answer>" + problem.answer + "</answer>"


def build_traces(problems: list[SyntheticProblem], refine_fraction: float, style: str, seed: int) -> list[str]:
    """One refine-prompt trace per problem; ``refine_fraction`` of them refine."""
    rng = random.Random(seed)
    return [build_trace(p, rng, rng.random() < refine_fraction, style) for p in problems]


@dataclass(frozen=True)
class WarmupSample:
    """One supervised example: which system prompt it is shown with, and the target response."""

    problem: SyntheticProblem
    variant: str  # refine | plain
    trace: str


def build_samples(
    problems: list[SyntheticProblem], refine_fraction: float, style: str, seed: int, plain_fraction: float = 0.0
) -> list[WarmupSample]:
    """Warm-up samples for both prompts.

    The refine reward compares refine-prompted rollouts with plain-prompted ones of the same
    model, so the plain prompt must be answerable too: ``plain_fraction`` of the problems get a
    plain-prompt trace (the same ``<think>…</think><answer>…</answer>`` format, never a refine),
    the rest a refine-prompt trace from :func:`build_traces` (``refine_fraction`` of which refine).
    Without plain traces the plain prompt scored 0.2% after warm-up, every refine "beat" a
    baseline of 0, and wrong refines all tied at -0.5.
    """
    rng = random.Random(f"{seed}:plain")
    plain = [rng.random() < plain_fraction for _ in problems]
    refine_traces = build_traces(problems, refine_fraction, style, seed)
    plain_rng = random.Random(f"{seed}:plain-traces")
    return [
        WarmupSample(p, PLAIN, build_trace(p, plain_rng, refine=False)) if is_plain else WarmupSample(p, REFINE, trace)
        for p, is_plain, trace in zip(problems, plain, refine_traces)
    ]
