"""Supervised warm-up traces for Countdown first attempts and reflections (Reflect, Retry, Reward, issue 14).

RRR learns only from failed first attempts whose retries sometimes succeed, so the model must
first answer in the attempt prompt's form (:meth:`recipe.rrr_step.RrrPrompts.attempt_chat`): a
little reasoning, then only the equation in ``<answer> </answer>``. The base SmolLM2 does not,
so a short supervised phase comes first, on traces built from each problem's reference
solution:

    25 - 5 = 20. 20 * 4 = 80.<answer>(25 - 5) * 4</answer>

The steps are the solution's operations in the order they are computed, each with its value,
so what the model imitates is "compute a step, carry its value on, land on the target": the
reasoning a retry can then correct. The solution is walked with :mod:`ast` and evaluated with
exact fractions (the construction only divides exactly); nothing is ever ``eval``-ed.

**Reflections.** Warmed up on attempts alone, the 135M model forgot how to do anything else:
asked to reflect on a failed attempt, it wrote another equation in 89 of 89 greedy reflections
(held-out, difficulty 1). RRR then has no reflection to train. So a share of the warm-up
(``warmup.reflection_fraction``) shows the reflection prompt on a *failed* attempt of the kind
the model makes (:func:`failed_attempt`: an equation that misses the target, half of the time
with a step that claims the target anyway) and a reflection that checks it
(:func:`checked_reflection`): it recomputes the steps, names the first wrong one or the value the
equation really has, and says what to do next time. Like PASR's worked checks, it teaches a
reflection that *can* find the mistake; which reflections help the retry is RRR's to learn.
"""

from __future__ import annotations

import ast
import random
from dataclasses import dataclass
from fractions import Fraction

from data.countdown import CountdownProblem

_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}


def _number(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


def solution_steps(solution: str) -> list[str]:
    """The operations of ``solution`` in evaluation order, as ``"a op b = v"`` with the values
    of the operands (not their sub-expressions), e.g. ``"(25 - 5) * 4"`` gives
    ``["25 - 5 = 20", "20 * 4 = 80"]``.

    Raises ``ValueError`` for anything but integers, ``+ - * /`` and parentheses (a reference
    solution is always such an expression; this is not a verifier for model text).

    Example:
        >>> solution_steps("(25 - 5) * 4")
        ['25 - 5 = 20', '20 * 4 = 80']
        >>> solution_steps("12 / (7 - 4) + 3")
        ['7 - 4 = 3', '12 / 3 = 4', '4 + 3 = 7']
    """
    steps: list[str] = []

    def walk(node: ast.AST) -> Fraction:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return Fraction(node.value)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            left, right = walk(node.left), walk(node.right)
            op = _OPS[type(node.op)]
            if op == "/" and right == 0:
                raise ValueError(f"division by zero in {solution!r}")
            value = (
                left + right
                if op == "+"
                else left - right
                if op == "-"
                else left * right
                if op == "*"
                else left / right
            )
            steps.append(f"{_number(left)} {op} {_number(right)} = {_number(value)}")
            return value
        raise ValueError(f"{type(node).__name__} in reference solution {solution!r}")

    walk(ast.parse(solution, mode="eval").body)
    return steps


def build_countdown_trace(problem: CountdownProblem) -> str:
    """The target response to the attempt prompt: the solution's steps, then the equation.

    Example:
        >>> from data.countdown import CountdownProblem
        >>> build_countdown_trace(CountdownProblem("p", (4, 5, 25, 7), 80, "(25 - 5) * 4"))
        '25 - 5 = 20. 20 * 4 = 80.<answer>(25 - 5) * 4</answer>'
    """
    reasoning = " ".join(f"{step}." for step in solution_steps(problem.solution))
    return f"{reasoning}<answer>{problem.solution}</answer>"


# --------------------------------------------------------------------------- reflections
@dataclass(frozen=True)
class Step:
    """One computed operation: ``left op right = value`` (``claimed`` is what the attempt wrote)."""

    left: int
    op: str
    right: int
    value: int
    claimed: int

    def text(self, value: int) -> str:
        return f"{self.left} {self.op} {self.right} = {value}"


@dataclass(frozen=True)
class FailedAttempt:
    """A synthetic wrong first attempt: its steps (as written) and its equation."""

    steps: tuple[Step, ...]
    equation: str
    value: int  # what the equation really equals (never the target)

    @property
    def text(self) -> str:
        return " ".join(f"{s.text(s.claimed)}." for s in self.steps) + f"<answer>{self.equation}</answer>"


def _apply(a: int, op: str, b: int) -> int:
    return a + b if op == "+" else a - b if op == "-" else a * b if op == "*" else a // b


def failed_attempt(problem: CountdownProblem, rng: random.Random, tries: int = 50) -> FailedAttempt | None:
    """A wrong attempt at ``problem``: two or three of its numbers combined left to right
    (``(a op b) op c``, positive integer values only), whose value misses the target. Half of
    the time the last step claims the target anyway (``15 - 13 = 11``), the slip the warmed-up
    model makes most. None when no wrong equation is found (practically never)."""
    for _ in range(tries):
        k = rng.choice([n for n in (2, 3) if n <= len(problem.numbers)])
        numbers = [problem.numbers[i] for i in rng.sample(range(len(problem.numbers)), k)]
        value, text, steps = numbers[0], str(numbers[0]), []
        for n in numbers[1:]:
            ops = ["+", "*"] + (["-"] if value > n else []) + (["/"] if n > 1 and value % n == 0 else [])
            op = rng.choice(ops)
            new = _apply(value, op, n)
            steps.append(Step(value, op, n, new, new))
            text = f"({text}) {op} {n}" if len(steps) > 1 else f"{text} {op} {n}"
            value = new
        if value == problem.target:
            continue
        if rng.random() < 0.5:  # the slip: the last step claims the target
            last = steps[-1]
            steps[-1] = Step(last.left, last.op, last.right, last.value, problem.target)
        return FailedAttempt(tuple(steps), text, value)
    return None


def checked_reflection(problem: CountdownProblem, attempt: FailedAttempt) -> str:
    """A reflection that checks the failed attempt: the first step whose written value is
    wrong, or (all steps right) the value the equation really has, or the step that had already
    reached the target; then what to do next time.

    Example:
        >>> from data.countdown import CountdownProblem
        >>> p = CountdownProblem("p", (2, 11, 3), 8, "11 - 3")
        >>> slip = FailedAttempt((Step(11, "-", 2, 9, 8),), "11 - 2", 9)
        >>> slip.text
        '11 - 2 = 8.<answer>11 - 2</answer>'
        >>> checked_reflection(p, slip)  # doctest: +NORMALIZE_WHITESPACE
        'I wrote 11 - 2 = 8, but 11 - 2 = 9, so my equation equals 9, not 8.
        Next time I will check every step and answer only when the last step really equals 8.'
    """
    target = problem.target
    wrong = next((s for s in attempt.steps if s.claimed != s.value), None)
    early = next((s for s in attempt.steps[:-1] if s.value == target and wrong is None), None)
    if early is not None:  # a step reached the target and the attempt went on
        found = (
            f"My equation equals {attempt.value}, not {target}, "
            f"but its step {early.text(early.value)} already reached {target}."
        )
        plan = f"Next time I will answer as soon as a step equals {target}."
    elif wrong is not None:
        found = (
            f"I wrote {wrong.text(wrong.claimed)}, but {wrong.text(wrong.value)}, "
            f"so my equation equals {attempt.value}, not {target}."
        )
        plan = f"Next time I will check every step and answer only when the last step really equals {target}."
    else:
        found = f"My steps are right, but my equation equals {attempt.value}, not {target}."
        listed = ", ".join(map(str, problem.numbers))
        plan = f"Next time I will try other operations on {listed} until a step reaches {target}."
    return f"{found} {plan}"


@dataclass(frozen=True)
class CountdownReflectionTrace:
    """One supervised reflection: a problem, a failed attempt at it, and the reflection to learn."""

    problem: CountdownProblem
    attempt: str
    reflection: str


def build_reflection_trace(problem: CountdownProblem, rng: random.Random) -> CountdownReflectionTrace | None:
    attempt = failed_attempt(problem, rng)
    if attempt is None:
        return None
    return CountdownReflectionTrace(problem, attempt.text, checked_reflection(problem, attempt))
