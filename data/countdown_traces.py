"""Supervised warm-up traces for Countdown first attempts (Reflect, Retry, Reward, issue 14).

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
"""

from __future__ import annotations

import ast
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
            value = left + right if op == "+" else left - right if op == "-" else left * right if op == "*" else left / right
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


@dataclass(frozen=True)
class CountdownTrace:
    """One supervised example: a problem and the response to learn for its attempt prompt."""

    problem: CountdownProblem
    trace: str


def build_countdown_traces(problems: list[CountdownProblem]) -> list[CountdownTrace]:
    return [CountdownTrace(p, build_countdown_trace(p)) for p in problems]
