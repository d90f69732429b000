"""Refine quality: is a ``<refine>`` span empty, and did refining fix a wrong value (or break a right one)?

Pure functions, text in, numbers out. Both training engines use them for their per-step
``pasr/empty_refine_rate``, ``pasr/refine_fix_rate`` and ``pasr/refine_break_rate`` metrics, and
``pasr stats`` for its report, so the definitions below are written once, here.

**Numbers.** A number is a run of digits with an optional sign, thousands separators and
decimal part (``-3``, ``1,000``, ``2.50``). It is compared in normal form: separators dropped,
trailing zeros of the decimal part dropped (``1,000`` -> ``1000``, ``5.0`` -> ``5``,
``2.50`` -> ``2.5``). A minus counts as a sign only when it does not follow a digit, a letter or
a closing bracket, so ``81-34`` states ``81`` and ``34``; digits glued to a letter or a ``.``
before them (``x1``, ``a2``, ``.5``) are not read as numbers. Fractions state their parts (``1/2`` -> ``1``, ``2``).

**Empty refine.** A span is empty when it adds nothing new to the reasoning *before it* (the
think text up to the span's ``<refine>``, earlier refine spans included; for a response whose
format is broken, the response text up to the span):

* its text is blank; or
* it states at least one number, and every number it states already appears before it
  (``Check: 81 - 34 is 57, not 57`` after ``81 - 34 = 57``). A span that states at least one
  new value is not empty, whatever its words; or
* it states no number, and has no new *content word* relative to the text before it
  (``Let me re-read the question.``, ``Wait, let me double-check that.``). Content words are
  alphabetic words of three or more letters that are not in :data:`FILLER_WORDS`, a fixed list
  of function words and checking vocabulary (check, verify, again, question, answer, mistake,
  ...); a trailing plural ``s`` is ignored when comparing (``apples`` matches ``apple``). So
  ``Wait, I forgot the discount.`` is not empty unless "discount" was already mentioned.

**Refine fix** (math data). ``fix`` is None when not applicable: the response has no refine
span, the gold answer is not a plain number (``72``, ``-3``, ``1,000``, ``0.5``; LaTeX such as
``\\frac{1}{2}`` is not), or correctness is unknown (``correct=None``, a judge error). Otherwise
``fix`` is True exactly when the final answer is correct and the last number stated before the
first refine span differs from the gold (the model had a wrong value on the table, then refined
and ended right). A wrong final answer is never a fix; neither is a response that states no
number before its first refine (there was no wrong value to fix).

**Refine break** (math data), the other half: ``breaks`` is None when ``fix`` or ``draft_ok``
is (no refine span, no numeric gold, unknown correctness, no number before the first refine
span). Otherwise it is True exactly when the draft equals the gold and the final answer is
not correct (the model had the right value on the table, then refined and ended wrong). The
accuracy of refining responses moves by fixes minus breaks: fewer breaks with fixes level is
progress too.

**Draft** (math data). The *draft* of a refining response is that same last number before its
first refine span: the value the model had before it refined. ``draft_ok`` says whether it equals
the numeric gold (None when there is no refine, no numeric gold or no number before the first
refine). It does not depend on the final answer, so it shows whether first attempts hold up
while the refines improve (``pasr/draft_acc``).

"Correct" for a judge score is :func:`is_correct`: ``acc >= CORRECT_AT`` (1.0), the same bar the
training metrics use, so a continuous judge's 0.9 is not counted correct.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import lru_cache

from rewards.format import FormatResult, check_format

CORRECT_AT = 1.0

# A number: either a "-" sign that does not follow a letter, digit, "." or closing bracket and is
# followed by a digit, or a digit that does not follow a letter, digit or "."; then digits,
# thousands groups of exactly three digits, optional decimals. The pattern starts with a
# character class so the regex engine can skip to candidate characters quickly (~5x faster
# than leading with the look-behind).
NUMBER_RE = re.compile(
    r"[-0-9](?:(?<=-)(?<![\w.)\]}]-)(?=[0-9])|(?<=[0-9])(?<![\w.][0-9]))"
    r"[0-9]*(?:,[0-9]{3}(?![0-9]))*(?:\.[0-9]+)?"
)
_WORD_RE = re.compile(r"[a-z]+")
_SPACE_RE = re.compile(r"\s+")
_GOLD_STRIP_RE = re.compile(r"[\s,$%]|\\[$%!,;]|\\text\{\s*\}")
_GOLD_NUMBER_RE = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")

# Function words and checking vocabulary: saying them does not add content to a refine.
FILLER_WORDS = frozenset(
    """
    the and but for nor not yet are was were has had have having its it's all any can could did
    does doing done get got let lets see saw now yes out our use used way too how why who whom
    may say says said off own per via one this that these those with from which there here their
    them they then than what when where will would should shall must might also into just only
    some more most much many about each been being very really still same such both either
    neither other others another again once over back given since because therefore thus hence
    so well okay fine good great sure need needs want wants like mean means meant
    check checks checked checking recheck rechecking double verify verifies verified verifying
    verification confirm confirms confirmed confirming review reviewing look looks looking
    read reread reading question questions problem problems task step steps calculation
    calculations calculate calculated calculating recalculate recalculating recalculation
    compute computed computing computation recompute arithmetic math work working worked
    correct correctly correction incorrect right wrong answer answers think thinking thought
    reconsider reconsidering carefully careful everything anything something nothing indeed
    actually wait hmm hmmm seems seem seemed appears appear previous previously earlier above
    below result results mistake mistakes error errors value values number numbers statement
    reasoning approach method part first second last final original refine refined refinement
    improve improved update updated stated state states told tells asks asked ask instead
    rather missed miss overlooked overlook forgot forget make makes made sense holds hold valid
    consistent consistency match matches matched agrees agree sum total equals equal gives give
    yields yield get gets getting now let's i'm we're that's it's there's don't didn't isn't
    """.split()
)


def normalize_number(raw: str) -> str:
    """``1,000`` -> ``1000``, ``5.0`` -> ``5``, ``2.50`` -> ``2.5``, ``-0`` -> ``0``."""
    if raw.isdigit() and (raw[0] != "0" or len(raw) == 1):
        return raw  # the common case, already normal
    return _normalize_slow(raw)


@lru_cache(maxsize=1 << 14)
def _normalize_slow(raw: str) -> str:
    s = raw.replace(",", "")
    if len(s) > 60:  # degenerate digit runs: compare as written (int() of huge values is refused)
        return s
    try:
        d = Decimal(s)
    except InvalidOperation:
        return s
    if d == d.to_integral_value():
        return str(int(d))
    return format(d.normalize(), "f")


def numbers_in(text: str) -> list[str]:
    """Every number stated in ``text``, in order, in normal form."""
    return [normalize_number(m) for m in NUMBER_RE.findall(text)]


def _last_number(text: str, end: int) -> re.Match[str] | None:
    """The last number in ``text[:end]``: the draft, when ``end`` is where the first refine
    starts."""
    last = None
    for match in NUMBER_RE.finditer(text, 0, end):
        last = match
    return last


def numeric_gold(gold: str | None) -> str | None:
    """The gold answer as a normalised number, or None when it is not a plain number."""
    if gold is None:
        return None
    s = _GOLD_STRIP_RE.sub("", str(gold))
    if s.startswith("\\boxed{") and s.endswith("}"):
        s = s[7:-1]
    if not _GOLD_NUMBER_RE.fullmatch(s):
        return None
    return normalize_number(s)


def is_correct(acc: float | None, at: float = CORRECT_AT) -> bool | None:
    """Judge score -> correct (``acc >= at``); None stays None (judge error)."""
    return None if acc is None else acc >= at


def _stem(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def content_words(text: str) -> set[str]:
    """Alphabetic words of 3+ letters outside :data:`FILLER_WORDS`, lowercased, plural ``s`` off."""
    return {_stem(w) for w in _WORD_RE.findall(text.lower()) if len(w) >= 3 and w not in FILLER_WORDS}


def is_empty_refine(span_text: str, before: str) -> bool:
    """Whether a refine span with text ``span_text`` adds nothing to ``before`` (module docstring)."""
    return _adds_nothing(span_text, lambda: set(numbers_in(before)), lambda: content_words(before))


def _adds_nothing(span_text: str, numbers_before: Callable[[], set[str]], words_before: Callable[[], set[str]]) -> bool:
    """The empty-refine rule, written once. What came before is asked for lazily (and only
    the part the rule needs), so :func:`assess_refines` can keep running sets over a long
    response instead of re-reading it for every span."""
    if not span_text.strip():
        return True
    nums = numbers_in(span_text)
    if nums:
        seen = numbers_before()
        return all(n in seen for n in nums)
    new_words = content_words(span_text)
    return not new_words or new_words <= words_before()


def normalize_refine_text(text: str, max_chars: int = 200) -> str:
    """For counting common refines: lowercase, numbers -> ``<n>``, whitespace collapsed."""
    s = NUMBER_RE.sub("<n>", text.lower())
    s = _SPACE_RE.sub(" ", s).strip()
    return s[:max_chars]


@dataclass(frozen=True)
class RefineQuality:
    n_refine: int
    empty: tuple[bool, ...]  # per refine span
    fix: bool | None  # None when not applicable (no refine, no numeric gold, unknown correctness)
    # the draft (the last number before the first refine span) equals the numeric gold; None
    # when not applicable (no refine, no numeric gold, no number before the first refine)
    draft_ok: bool | None = None
    # the draft was right and the final answer is wrong; None when fix or draft_ok is None
    breaks: bool | None = None

    @property
    def n_empty(self) -> int:
        return sum(self.empty)


def assess_refines(
    response: str,
    gold: str | None,
    correct: bool | None,
    *,
    fmt: FormatResult | None = None,
) -> RefineQuality:
    """Empty flags per refine span and the refine-fix and refine-break verdicts of one response.

    ``fmt`` is ``check_format(response)`` when the caller already has it (saves a parse).
    """
    if fmt is None:
        fmt = check_format(response)
    spans = fmt.refine_spans
    if not spans:
        return RefineQuality(0, (), None)
    # Offsets are into the think content for a well-formed response, into the text otherwise.
    base = fmt.think if fmt.think is not None else response
    seen: set[str] = set()  # numbers stated before the current span
    words: set[str] | None = None  # content words before the current span, built when needed
    words_upto = 0
    pos = 0
    empty = []
    for span in spans:
        # the text between the previous span's start and this one holds no part of a number
        # that crosses the boundary: both ends sit right after a ">" of a <refine> tag
        found = NUMBER_RE.findall(base, pos, span.start)
        if found:
            distinct = set(found)
            seen |= distinct  # plain digit strings are already normal; raw others are harmless extras
            for raw in distinct:
                if not raw.isdigit() or (raw[0] == "0" and len(raw) > 1):
                    seen.add(_normalize_slow(raw))
        pos = span.start

        def words_before(end: int = span.start) -> set[str]:
            nonlocal words, words_upto
            words = (words or set()) | content_words(base[words_upto:end])
            words_upto = end
            return words

        empty.append(_adds_nothing(span.text, lambda seen=seen: seen, words_before))

    gold_n = numeric_gold(gold)
    draft = _last_number(base, spans[0].start) if gold_n is not None else None
    draft_ok = None if draft is None else normalize_number(draft.group()) == gold_n
    fix: bool | None = None
    if gold_n is not None and correct is not None:
        fix = bool(correct) and draft_ok is False
    breaks = None if fix is None or draft_ok is None else draft_ok and not correct
    return RefineQuality(len(spans), tuple(empty), fix, draft_ok, breaks)
