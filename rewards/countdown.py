"""The Countdown verifier: is an equation over the given numbers equal to the target?

Countdown (numbers + a target; write an equation that reaches the target using each number at
most once) is the verifiable task of Reflect, Retry, Reward (issue 14): the reward is exact, so
a retry either succeeds or it does not.

The equation is model text, so it is never ``eval``-ed. It is checked in three stages, each
cheap and bounded, and any failure is a reward of 0, never an exception:

1. **Characters**: only digits, ``+ - * /``, parentheses and whitespace, with an optional
   trailing ``= <integer>``; at most :data:`MAX_EQUATION_CHARS` characters and
   :data:`MAX_PAREN_DEPTH` nested parentheses. This rejects names, calls, attributes and
   strings (``__import__('os')``) before any parser sees them.
2. **Syntax**: Python's ``ast`` parses the expression; only binary ``+ - * /``, unary minus and
   integer literals are accepted (``**`` and ``//`` parse but are refused), so the work of
   evaluating is bounded by the length of the text.
3. **Value**: evaluated with exact :class:`fractions.Fraction` arithmetic (``7 / 2 * 2`` is
   exactly 7; no float rounding can make a wrong equation right); division by zero is invalid.

The numbers written in the equation must be a sub-multiset of the given ones: each given
number may be used at most as many times as it is given, and need not be used at all.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

MAX_EQUATION_CHARS = 256  # a 5-number equation needs about 40; anything longer is not an answer
MAX_PAREN_DEPTH = 16

_ALLOWED = re.compile(r"[0-9+\-*/() \t\n]*")
_CLAIMED = re.compile(r"\s*(\d{1,12})\s*")
_BINARY = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}


@dataclass(frozen=True)
class Equation:
    """A parsed, evaluated equation."""

    expression: str  # the left-hand side, stripped
    value: Fraction  # its exact value
    numbers: tuple[int, ...]  # the integer literals it uses, in reading order
    claimed: int | None  # the ``= N`` right-hand side, None when absent


def _paren_depth_ok(text: str) -> bool:
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
            if depth > MAX_PAREN_DEPTH:
                return False
        elif ch == ")":
            depth -= 1
            if depth < 0:
                return False
    return depth == 0


def _evaluate(node: ast.AST, numbers: list[int]) -> Fraction:
    """The exact value of an accepted node; ``ValueError`` for any other node."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        numbers.append(node.value)
        return Fraction(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_evaluate(node.operand, numbers)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left = _evaluate(node.left, numbers)
        right = _evaluate(node.right, numbers)
        if isinstance(node.op, ast.Add):
            return left + right
        if isinstance(node.op, ast.Sub):
            return left - right
        if isinstance(node.op, ast.Mult):
            return left * right
        if right == 0:
            raise ZeroDivisionError("division by zero")
        return left / right
    raise ValueError(f"{type(node).__name__} is not allowed in an equation")


def parse_equation(text: str) -> Equation | None:
    """Parse and evaluate an arithmetic equation, or return None when it is not a valid one.

    Args:
        text: the equation, e.g. ``"(25 - 5) * 4"`` or ``"(25 - 5) * 4 = 80"``.

    Returns:
        An :class:`Equation`, or ``None`` for anything else: other characters, ``**`` or
        ``//``, unbalanced or too deeply nested parentheses, text longer than
        :data:`MAX_EQUATION_CHARS`, a division by zero, or a right-hand side that is not a
        plain integer.

    Example:
        >>> parse_equation("(25 - 5) * 4 = 80")
        Equation(expression='(25 - 5) * 4', value=Fraction(80, 1), numbers=(25, 5, 4), claimed=80)
        >>> parse_equation("7 / 2").value
        Fraction(7, 2)
        >>> parse_equation("__import__('os')") is None
        True
    """
    if not isinstance(text, str) or len(text) > MAX_EQUATION_CHARS:
        return None
    left, sep, right = text.partition("=")
    claimed = None
    if sep:
        match = _CLAIMED.fullmatch(right)
        if match is None:  # a second "=", an expression or nothing on the right
            return None
        claimed = int(match.group(1))
    expression = left.strip()
    if not expression or not _ALLOWED.fullmatch(expression) or not _paren_depth_ok(expression):
        return None
    numbers: list[int] = []
    try:
        tree = ast.parse(expression, mode="eval")
        value = _evaluate(tree.body, numbers)
    except (SyntaxError, ValueError, ZeroDivisionError, RecursionError, MemoryError, OverflowError):
        return None
    return Equation(expression=expression, value=value, numbers=tuple(numbers), claimed=claimed)


def uses_numbers_at_most_once(used: Sequence[int], numbers: Sequence[int]) -> bool:
    """True when every number in ``used`` appears at most as often as it does in ``numbers``.

    Example:
        >>> uses_numbers_at_most_once([3, 3], [3, 5, 3])
        True
        >>> uses_numbers_at_most_once([3, 3], [3, 5])
        False
    """
    return not (Counter(used) - Counter(numbers))


def equation_text(answer_text: str) -> str:
    """The equation to check: the content of the last complete ``<answer>…</answer>`` block
    when the text has one, else the whole text. Found with two ``rfind`` calls, so a hostile
    text full of unclosed tags costs linear time, not a regex's quadratic backtracking."""
    end = answer_text.rfind("</answer>")
    if end >= 0:
        start = answer_text.rfind("<answer>", 0, end)
        if start >= 0:
            return answer_text[start + len("<answer>") : end].strip()
    return answer_text.strip()


def countdown_reward(answer_text: str, numbers: Sequence[int], target: int) -> float:
    """The Countdown reward: 1.0 for an equation equal to the target that uses each given
    number at most once, 0.0 for anything else (never raises on model text).

    Args:
        answer_text: the model's response (the last ``<answer>…</answer>`` block is read) or the
            bare equation, e.g. ``"(25 - 5) * 4"``; an optional trailing ``= N`` must state the
            target.
        numbers: the numbers the problem gives (a number given twice may be used twice).
        target: the value the equation must reach.

    Returns:
        ``1.0`` when the equation is valid, uses only given numbers (each at most as often as
        given), and its exact value equals ``target``; otherwise ``0.0``.

    Example:
        >>> countdown_reward("<answer>(25 - 5) * 4</answer>", [4, 5, 25, 7], 80)
        1.0
        >>> countdown_reward("(25 - 5) * 4 = 80", [4, 5, 25, 7], 80)
        1.0
        >>> countdown_reward("25 * 4 - 5 * 4", [4, 5, 25, 7], 80)  # 4 used twice
        0.0
        >>> countdown_reward("(25 - 5) * 4 = 81", [4, 5, 25, 7], 80)  # claims another target
        0.0
        >>> countdown_reward("__import__('os').system('ls')", [4, 5, 25, 7], 80)
        0.0
    """
    if not isinstance(answer_text, str):
        return 0.0
    equation = parse_equation(equation_text(answer_text))
    if equation is None:
        return 0.0
    if equation.claimed is not None and equation.claimed != target:
        return 0.0
    if not uses_numbers_at_most_once(equation.numbers, numbers):
        return 0.0
    return 1.0 if equation.value == target else 0.0


_GOLD = re.compile(r"\s*(\d{1,12}(?:\s*,\s*\d{1,12})*)\s*->\s*(\d{1,12})\s*")


def format_gold(numbers: Sequence[int], target: int) -> str:
    """A Countdown problem's gold as one string, as records and judges carry it:
    ``"3, 7, 12 -> 25"`` (the given numbers, then the target).

    Example:
        >>> format_gold([3, 7, 12], 25)
        '3, 7, 12 -> 25'
        >>> parse_gold(format_gold([3, 7, 12], 25))
        ((3, 7, 12), 25)
    """
    return f"{', '.join(map(str, numbers))} -> {target}"


def parse_gold(gold: str) -> tuple[tuple[int, ...], int] | None:
    """``(numbers, target)`` from :func:`format_gold`'s string; None when it is not one."""
    m = _GOLD.fullmatch(gold or "")
    if m is None:
        return None
    return tuple(int(n) for n in m.group(1).split(",")), int(m.group(2))
