"""The rule judge: Math-Verify equivalence of the extracted answer and the gold.

What counts as equal (docs/judges_and_data.md states the same rules for users):

* Both sides are normalised before Math-Verify sees them (:func:`normalize`): surrounding
  whitespace, trailing sentence punctuation (``8.``), markdown emphasis (``**8**``), one
  enclosing ``\\boxed{}`` / ``$...$`` / ``\\(...\\)`` / ``\\[...\\]``, a leading currency sign,
  thousands separators (``1,000``), unit words after a number (``43 bananas``,
  ``10\\text{ inches}``), and ``°`` (read as ``^\\circ``, which Math-Verify drops).
* Percent is decided here, not left to LaTeX (where ``%`` starts a comment): a trailing ``%``,
  ``\\%`` or ``percent`` is removed and remembered. Two percents compare their numbers; when only
  one side is a percent, its number *or* its number / 100 may match the other side (``60%``
  matches gold ``60`` and gold ``0.6``; gold ``60\\%`` is matched by ``60`` and ``0.6``).
* Decimals: Math-Verify compares a decimal with an exact value after rounding both to
  ``float_rounding`` places (its default is 6, which paid ``0.444444`` for ``\\frac{4}{9}``).
  This judge uses :data:`FLOAT_ROUNDING` = 10 places: exact decimals (``0.5`` for
  ``\\frac{1}{2}``, ``18.0`` for ``18``) match, 6-digit roundings of fractions do not.
* Equations: an answer that is a false equation between numbers (``6 = 5``, ``x = 2 + 3 = 6``)
  is wrong whatever its right side; otherwise Math-Verify's rules apply (``x = 5`` matches ``5``).
* Raw text: the normalised text is read as one LaTeX expression. A sentence (``The answer is
  8.``) makes no sense that way, so when the text has words in it, or that reading parses to
  nothing, Math-Verify also reads the raw text the way it reads free-form output ("answer is
  X", else the last number) - but only when every number in the text has the same value and
  no word qualifies it ("or", "more", "about"), so that a hedge or a worked calculation in the
  answer block is not paid for its last number.

Math-Verify bounds its parse and verify time with ``signal.alarm``, which only works in the
main thread of a process. In a Ray worker or any other thread the alarm cannot be set (verl's
math scores once became silently 0 in workers for that reason). So this judge verifies inline
when it runs on a main thread, and otherwise in a small process pool whose workers run each
task on their own main thread, where the alarm fires. Either way a timeout comes back as a
judge error (``ok=False, error='timeout'``), never as a 0.
"""

from __future__ import annotations

import asyncio
import atexit
import re
import threading
import weakref
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from rewards.judges.base import JudgeItem, JudgeResult

_CHUNK = 64
FLOAT_ROUNDING = 10  # decimal places a decimal answer must share with an exact gold

# ---------------------------------------------------------------------------------------------
# Normalisation: pure text -> text rules, each undoing one way a right answer gets written.

_TRAILING_PUNCT = ".,;:。"  # not "!" (factorial)
_MAX_LAYERS = 8  # wrappings peeled at most: bounds the work on a hostile answer
# One pair of markers around the whole text, with no such marker inside (so "**a** or **b**"
# and "$1$ or $2$" are not unwrapped into "a** or **b" and "1$ or $2").
_WRAPPERS = [
    re.compile(rf"^{re.escape(a)}((?:(?!{re.escape(a)}|{re.escape(b)}).)+){re.escape(b)}$", re.DOTALL)
    for a, b in (
        ("$$", "$$"),
        ("**", "**"),
        ("__", "__"),
        ("$", "$"),
        ("*", "*"),
        ("`", "`"),
        ("\\(", "\\)"),
        ("\\[", "\\]"),
    )
]
_BOXED_OPEN = re.compile(r"^\\(?:boxed|fbox)\s*\{")
_BRACE = re.compile(r"[{}]")
_CURRENCY = re.compile(r"^(?:\\\$|\$|€|£|¥|₹)\s*(?=[-+]?\.?\d[^$]*$)")
_PERCENT = re.compile(r"(?:\\?%|\\text\s*\{\s*(?:\\?%|percent)\s*\}|\bper\s*cent)$", re.IGNORECASE)
_THOUSANDS = re.compile(r"^[-+]?\d{1,3}(?:(?:,|\{,\})\d{3})+(?:\.\d+)?$")
_NUMBER = r"[-+]?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+|\\[dt]?frac\{\d+\}\{\d+\})"
_UNIT_TEXT = re.compile(rf"^(?P<num>{_NUMBER})\s*\\(?:text|mbox|mathrm)\s*\{{\s*[A-Za-z][A-Za-z\s.'/-]*\}}$")
_UNIT_WORDS = re.compile(rf"^(?P<num>{_NUMBER})\s*(?P<words>[A-Za-z][A-Za-z'/-]*(?:\s+[A-Za-z][A-Za-z'/-]*)*)$")
_MATH_WORDS = frozenset("pi sqrt infty inf oo ln log lg exp sin cos tan cot sec csc mod".split())
# Words that turn "5 <word>" into a different claim ("5 or more"), so are no unit.
_CLAIM_WORDS = frozenset(
    "and or than more less plus minus times over not no least most about approximately approx "
    "around nearly almost roughly under above below at".split()
)
_DEGREE = re.compile(r"°|\\(?:text)?degree\b")


@dataclass(frozen=True)
class Normalized:
    """An answer or gold ready for Math-Verify: ``text`` (wrapped in ``\\boxed{}`` to parse)
    and whether a trailing percent sign was taken off it."""

    text: str
    percent: bool = False


def _unbox(text: str) -> str | None:
    """The content of a ``\\boxed{...}`` that spans the whole text, else None."""
    opened = _BOXED_OPEN.match(text)
    if not opened or not text.endswith("}"):
        return None
    depth = 1
    for brace in _BRACE.finditer(text, opened.end()):
        depth += 1 if brace.group() == "{" else -1
        if depth == 0:
            return text[opened.end() : brace.start()] if brace.end() == len(text) else None
    return None


def _strip_trailing_punct(text: str) -> str:
    r"""``8.`` -> ``8``; a backslash-escaped mark (``\;``, a LaTeX space) is kept."""
    stripped = text.rstrip(_TRAILING_PUNCT)
    if stripped != text and stripped.endswith("\\"):
        stripped = text[: len(stripped) + 1]
    return stripped.strip()


def _strip_wrapping(text: str) -> str:
    """Peel what surrounds an answer without changing it: whitespace, trailing sentence
    punctuation, markdown emphasis, one box or math delimiter pair; repeated while something
    changes, since they nest (``**$8$**.``)."""
    for _ in range(_MAX_LAYERS):
        before = text
        text = _strip_trailing_punct(text.strip())
        if (inner := _unbox(text)) is not None:
            text = inner
        else:
            text = next((m.group(1) for w in _WRAPPERS if (m := w.match(text))), text)
        if text == before:
            break
    return text


def _drop_units(text: str) -> str:
    """``43 bananas`` -> ``43``: Math-Verify reads trailing words as a product of one-letter
    symbols. Only words of two or more letters after a plain number go, and not math words or
    words that change the claim (``2 x``, ``3 pi``, ``5 or more`` stay as written)."""
    if m := _UNIT_TEXT.match(text):
        return m.group("num")
    if m := _UNIT_WORDS.match(text):
        words = m.group("words").split()
        if all(len(w) >= 2 and w.lower() not in _MATH_WORDS | _CLAIM_WORDS for w in words):
            return m.group("num")
    return text


def normalize(text: str) -> Normalized:
    """The normalised form of an answer or a gold (see the module docstring for the rules)."""
    text = _CURRENCY.sub("", _strip_wrapping(text))
    text = _DEGREE.sub(lambda _: "^\\circ", text)
    percent = False
    if (m := _PERCENT.search(text)) and m.start() > 0:
        text, percent = _strip_wrapping(text[: m.start()]), True
    text = _drop_units(text)
    if _THOUSANDS.match(text):
        text = text.replace("{,}", "").replace(",", "")
    return Normalized(text, percent)


def _latex_readings(norm: Normalized, other_is_percent: bool) -> list[str]:
    """The boxed LaTeX forms one side may take. A percent facing a non-percent may be read as
    its number or as its number / 100; every other case has one reading."""
    readings = ["\\boxed{" + norm.text + "}"]
    if norm.percent and not other_is_percent:
        readings.append("\\boxed{\\frac{" + norm.text + "}{100}}")
    return readings


_PROSE_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{2,}")
_TEXT_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def _is_prose(text: str) -> bool:
    """True when the answer has words in it (not LaTeX commands, not math words)."""
    return any(w.lower() not in _MATH_WORDS for w in _PROSE_WORD.findall(text))


def _states_one_value(text: str) -> bool:
    """The text names one value and does not qualify it: every number in it is the same, and
    no word like "or", "more", "about" (``Janet makes $18 a day`` yes; ``5 or 6``, ``5 or
    more``, ``16 - 3 - 4 = 9 eggs`` no). Only then may the raw text be read for its number,
    which Math-Verify would otherwise pick from several, or strip of its qualifier."""
    values = {float(n) for n in _TEXT_NUMBER.findall(text.replace(",", ""))}
    words = {w.lower() for w in _PROSE_WORD.findall(text)}
    return len(values) <= 1 and not words & _CLAIM_WORDS


# ---------------------------------------------------------------------------------------------
# Verification


def _relations(expr):
    """The relations of a parsed equation or chain of them (``a = b = c`` parses as an And)."""
    from latex2sympy2_extended.logic import And
    from sympy.core.relational import Relational

    if isinstance(expr, And):
        for arg in getattr(expr, "_unsorted_args", expr.args):
            yield from _relations(arg)
    elif isinstance(expr, Relational):
        yield expr


def contradicts(parsed: Sequence, float_rounding: int = FLOAT_ROUNDING) -> bool:
    """True when a parsed answer states a false equation between numbers (``6 = 5``).
    Math-Verify reads an equation answer by its right side, so ``6 = 5`` would match gold 5;
    an answer that contradicts itself is wrong instead."""
    from math_verify.grader import sympy_expr_eq
    from sympy import Eq

    for expr in parsed:
        for rel in _relations(expr):
            if isinstance(rel, Eq) and not rel.free_symbols and not _equal(rel, float_rounding, sympy_expr_eq):
                return True
    return False


def _equal(rel, float_rounding: int, sympy_expr_eq) -> bool:
    """Both sides of ``rel`` equal by Math-Verify's own comparison. A side that is undefined
    (``\\frac{1}{0}``: Math-Verify refuses to compare ``zoo`` and ``nan``) equals nothing."""
    from sympy import S

    if any(side.has(S.NaN, S.ComplexInfinity) for side in (rel.lhs, rel.rhs)):
        return False
    try:
        return sympy_expr_eq(rel.lhs, rel.rhs, float_rounding, 15)
    except Exception:
        return True  # not decidable here: verify() has the last word


def parses_as_math(text: str, timeout_s: int = 5) -> bool:
    """True when Math-Verify reads ``text`` as a math expression (used by the hybrid judge)."""
    from math_verify import parse

    try:
        boxed = _latex_readings(normalize(text), other_is_percent=True)[0]
        return bool(parse(boxed, parsing_timeout=timeout_s if _on_main_thread() else None))
    except Exception:
        return False


def _on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _has_expr(parsed: Sequence) -> bool:
    """Math-Verify returns its raw string match as a fallback: only a sympy object is a parse."""
    return any(not isinstance(p, str) for p in parsed)


def _answer_parses(answer: str, norm: Normalized, gold_is_percent: bool, timeout_s: int) -> list[list]:
    """Math-Verify's parses of every reading of ``answer``: the normalised text (and its
    percent reading), then the raw text where that is the better reading (module docstring)."""
    from math_verify import parse

    parses = [parse(r, parsing_timeout=timeout_s, raise_on_error=True) for r in _latex_readings(norm, gold_is_percent)]
    if (_is_prose(norm.text) or not _has_expr(parses[0])) and _states_one_value(answer):
        parses.append(parse(answer, parsing_timeout=timeout_s, raise_on_error=True))
    return [p for p in parses if p]


def verify_one(
    gold: str, answer: str | None, timeout_s: int, float_rounding: int = FLOAT_ROUNDING
) -> tuple[float | None, str | None]:
    """(score, error) for one pair. Must run on a main thread when ``timeout_s`` > 0."""
    from math_verify import parse, verify
    from math_verify.errors import TimeoutException
    from math_verify.utils import timeout

    if answer is None or not answer.strip():
        return 0.0, None  # no answer given: wrong, not a judge failure
    try:
        gold_norm, answer_norm = normalize(gold), normalize(answer)
        gold_parsed = [
            p
            for r in _latex_readings(gold_norm, answer_norm.percent)
            for p in parse(r, parsing_timeout=timeout_s, raise_on_error=True)
        ]
        if not gold_parsed:
            return None, "gold_unparsable"
        answer_parses = _answer_parses(answer, answer_norm, gold_norm.percent, timeout_s)
        if not answer_parses:
            return 0.0, None
        if any(timeout(timeout_s)(contradicts)(p, float_rounding) for p in answer_parses):
            return 0.0, None
        ok = any(
            verify(gold_parsed, p, float_rounding=float_rounding, timeout_seconds=timeout_s, raise_on_error=True)
            for p in answer_parses
        )
        return (1.0 if ok else 0.0), None
    except TimeoutException:
        return None, "timeout"
    except Exception as exc:  # a sympy crash on odd input: an error, counted, not a silent 0
        return None, f"verify_error: {type(exc).__name__}: {exc}"[:200]


def _warm_worker() -> None:
    """Pool initializer: import Math-Verify and its parsers and verify one pair, untimed.

    A fresh worker's first pair pays sympy's and the LaTeX parser's imports inside the alarm;
    on a loaded machine that took over a second and a right ``18.0`` came back as a timeout.
    The timeout is for a pair that will not verify, not for a worker that is still starting."""
    verify_one("1", "1", 0)


def _verify_chunk(
    pairs: list[tuple[str, str | None]], timeout_s: int, float_rounding: int = FLOAT_ROUNDING
) -> list[tuple[float | None, str | None]]:
    return [verify_one(g, a, timeout_s, float_rounding) for g, a in pairs]


# ---------------------------------------------------------------------------------------------
# The judge


@dataclass
class RuleJudge:
    """Math-Verify judge. ``mode``: ``auto`` (inline on a main thread, else process pool),
    ``inline`` or ``process``. ``float_rounding``: decimal places a decimal answer must share
    with an exact gold.

    The pool is created on first use and must be shut down: ``close()``, or use the judge as
    a context manager. A pool still open at interpreter exit is shut down by an ``atexit`` hook
    (registered with the pool, removed by ``close``), so its workers are joined while the
    interpreter can still run their shutdown instead of being torn down mid-exit."""

    timeout_s: int = 5
    mode: str = "auto"
    workers: int = 2
    name: str = "rule"
    float_rounding: int = FLOAT_ROUNDING

    def __post_init__(self) -> None:
        if self.mode not in ("auto", "inline", "process"):
            raise ValueError(f"RuleJudge mode must be auto|inline|process, got {self.mode!r}")
        self._pool: ProcessPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    def __getstate__(self) -> dict:
        """Picklable (to ship to a Ray worker): the pool and its lock stay behind."""
        return {k: v for k, v in self.__dict__.items() if k not in ("_pool", "_pool_lock", "_exit_hook")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._pool = None
        self._pool_lock = threading.Lock()

    def __enter__(self) -> RuleJudge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _use_pool(self) -> bool:
        return self.mode == "process" or (self.mode == "auto" and not _on_main_thread())

    def _executor(self) -> ProcessPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                import multiprocessing as mp

                self._pool = ProcessPoolExecutor(
                    self.workers, mp_context=mp.get_context("spawn"), initializer=_warm_worker
                )
                # A weak reference to the judge: the hook must not keep it alive.
                self._exit_hook = _exit_hook(weakref.ref(self))
                atexit.register(self._exit_hook)
            return self._pool

    def close(self) -> None:
        """Shut the process pool down and wait for its workers (idempotent)."""
        with self._pool_lock:
            pool, self._pool = self._pool, None
            hook = self.__dict__.pop("_exit_hook", None)
        if hook is not None:
            atexit.unregister(hook)
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    def score_pairs(self, pairs: Sequence[tuple[str, str | None]]) -> list[JudgeResult]:
        """Synchronous batch scoring of (gold, answer) pairs."""
        if not pairs:
            return []
        if self._use_pool():
            pool = self._executor()
            chunks = [list(pairs[i : i + _CHUNK]) for i in range(0, len(pairs), _CHUNK)]
            futures = [pool.submit(_verify_chunk, c, self.timeout_s, self.float_rounding) for c in chunks]
            raw = [r for fut in futures for r in fut.result()]
        else:
            raw = _verify_chunk(list(pairs), self.timeout_s, self.float_rounding)
        return [JudgeResult(s) if err is None else JudgeResult.failed(err) for s, err in raw]

    async def score(self, question: str, gold: str, answer: str | None) -> JudgeResult:
        return (await self.score_many([JudgeItem(question, gold, answer)]))[0]

    async def score_many(self, items: Sequence[JudgeItem]) -> list[JudgeResult]:
        pairs = [(i.gold, i.answer) for i in items]
        if self._use_pool():
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(None, self.score_pairs, pairs)
        # Inline on the main thread: CPU-bound and fast (~ms per pair); the alarm works here.
        return self.score_pairs(pairs)


def _exit_hook(judge_ref: weakref.ref[RuleJudge]):
    def close_at_exit() -> None:
        judge = judge_ref()
        if judge is not None:
            judge.close()

    return close_at_exit
