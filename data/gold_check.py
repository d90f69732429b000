"""Gold answers checked before ``pasr data prepare`` writes them, with the rule judge's own reading.

A training row's gold is compared with every rollout of its question, so a gold no answer can
equal, or one the judge fails on, spoils every rollout of that row without a word: an empty
gold (``.``, ``\\boxed{}``, ``$$`` once the judge's normalisation strips them), one Math-Verify
reads as no expression (``\\frac{``, ``**``: the rule judge then pays only that very string, or
gives ``gold_unparsable`` for every rollout), one it cannot compare (``\\frac{1}{0}``: a judge
error for every rollout). Each is refused, naming its row.

Only one form is rewritten, since its reading is certain and the judge's is wrong: a number in
e-notation (``1e400``, ``1.5E-3``; a parquet float column writes them), which Math-Verify reads
as Euler's e times a number. It becomes plain digits, or ``m\\times 10^{k}`` when long.

Golds in words (``Paris``, ``\\text{Evelyn}``, an instruction's reference output) are left to the
judge that reads words (an LLM judge, or ``hybrid``'s routing): only an empty one is refused.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from decimal import Decimal

from data.examples import DataFormatError, Example

TIMEOUT_S = 5  # the rule judge's default parse/verify timeout
_PLAIN_NUMBER = re.compile(r"^[-+]?(?:\d+(?:\.\d+)?|\.\d+)$")  # the common gold, checked without Math-Verify
_E_NOTATION = re.compile(r"^([-+]?)(\d+(?:\.\d*)?|\.\d+)[eE]([-+]?\d+)$")
_MAX_PLAIN_DIGITS = 30  # e-notation up to this exponent is written out in digits
# a word of two or more letters that is not a LaTeX command: a gold in words
_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{2,}")
_MATH_WORDS = frozenset(
    "pi sqrt infty inf oo ln log lg exp sin cos tan cot sec csc mod gcd lcm max min det frac dfrac tfrac".split()
)

# where a row is: (file or hub name, line or row number, "line" | "row")
Locate = Callable[[int], tuple[str, int, str]]


def from_e_notation(text: str) -> str:
    """``1e20`` -> ``100000000000000000000``, ``1.5E-3`` -> ``0.0015``, ``1e400`` ->
    ``10^{400}``, ``2.5e-40`` -> ``2.5\\times 10^{-40}``; any other text as it is."""
    m = _E_NOTATION.match(text.strip())
    if not m:
        return text
    sign, mantissa, exponent = m.group(1).replace("+", ""), m.group(2), int(m.group(3))
    value = Decimal(f"{mantissa}e{exponent}").normalize()
    if abs(value.adjusted()) <= _MAX_PLAIN_DIGITS:
        return sign + format(value, "f")
    digits = value.as_tuple().digits
    lead = Decimal(f"{digits[0]}.{''.join(map(str, digits[1:]))}").normalize()
    power = f"10^{{{value.adjusted()}}}"
    return sign + (power if lead == 1 else f"{format(lead, 'f')}\\times {power}")


def _in_words(text: str) -> bool:
    return any(w.lower() not in _MATH_WORDS for w in _WORD.findall(text))


def gold_problem(gold: str) -> str | None:
    """Why no rollout could be scored right against ``gold`` by the rule judge, or None."""
    from math_verify import parse
    from math_verify.errors import TimeoutException

    from rewards.judges.rule import normalize

    if _PLAIN_NUMBER.match(gold):
        return None
    text = normalize(gold).text
    if not text.strip():
        return f"gold answer {gold!r} is empty once the judge takes its wrapping off: no answer can equal it"
    if _in_words(text):
        return None  # for a judge that reads words
    timeout_s = TIMEOUT_S if threading.current_thread() is threading.main_thread() else 0
    try:
        parsed = parse("\\boxed{" + text + "}", parsing_timeout=timeout_s)
    except TimeoutException:
        parsed = None
    if parsed is None:
        return (
            f"Math-Verify cannot read gold answer {gold!r} within {TIMEOUT_S} s: every rollout would be a judge error"
        )
    if not any(not isinstance(p, str) for p in parsed):
        return f"Math-Verify reads no math in gold answer {gold!r}, so the rule judge " + (
            "gives a judge error for every rollout"
            if not parsed
            else "pays no answer but that very text; write it as LaTeX Math-Verify reads"
        )
    if any(_undefined(p) for p in parsed):
        return (
            f"gold answer {gold!r} is undefined (Math-Verify reads {parsed[0]}), which the rule judge cannot "
            "compare: every rollout would be a judge error"
        )
    return None


def _undefined(expr) -> bool:
    """``nan`` or ``zoo`` inside a parsed gold (``\\frac{1}{0}``): Math-Verify refuses to compare it."""
    from sympy import S

    try:
        return bool(expr.has(S.NaN, S.ComplexInfinity))
    except (AttributeError, TypeError):  # a string reading, or an object without .has
        return False


def checked_golds(examples: Sequence[Example], locate: Locate) -> tuple[list[Example], list[tuple[str, str]]]:
    """``examples`` with e-notation golds written out, and the ``(before, after)`` of each rewrite
    (once per distinct gold); a :class:`DataFormatError` at the first gold :func:`gold_problem`
    refuses, naming the row where it is (``locate(index)``) and its id."""
    out: list[Example] = []
    rewritten: dict[str, str] = {}
    verdicts: dict[str, str | None] = {}  # a gold repeats across rows: judged once
    for index, example in enumerate(examples):
        gold = from_e_notation(example.answer)
        if gold != example.answer:
            rewritten[example.answer] = gold
            example = replace(example, answer=gold)
        if gold not in verdicts:
            verdicts[gold] = gold_problem(gold)
        if (problem := verdicts[gold]) is not None:
            where, line, unit = locate(index)
            raise DataFormatError(f"{problem} (id {example.id}); fix or drop the row", where, line, unit)
        out.append(example)
    return out, list(rewritten.items())
