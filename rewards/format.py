"""The PASR format reward: one ``<think>`` block, then one ``<answer>`` block, refines inside think.

The paper's reference code checks the layout with a boolean expression whose operator
precedence lets a response with two ``<think>`` blocks pass. We parse instead: the response is
scanned tag by tag with a small state machine, so every rule below is enforced and every
failure has a named reason (which ``pasr stats`` and the metrics count).

Rules (whitespace is allowed before, between and after the blocks):

* exactly one ``<think>...</think>`` followed by exactly one ``<answer>...</answer>``;
* no text outside those two blocks;
* every ``<refine>`` is closed by ``</refine>``, lies inside the think block and is not nested;
* the answer block holds no tags and is not empty;
* tag-like text that is not exactly one of the six tags (``<Think>``, ``<refine />``,
  ``< think>``) is malformed: a model must not be rewarded for near-misses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

TAG_NAMES = ("think", "answer", "refine")
# Anything that looks like one of our tags, including near-misses we reject:
# ``<``, whitespace, an optional ``/`` and whitespace, a tag name, anything up to ``>``.
# Every run is matched atomically (``(?=(X*))\1``: a lookahead does not backtrack, and the
# backreference then consumes exactly what it saw), because giving characters back can never
# help here (a name starts with neither whitespace nor ``/``; ``[^<>]`` excludes ``>``). The
# older ``<\s*/?\s*`` let two ``\s*`` share a whitespace run in every possible split, so
# ``"<" + " " * n`` cost O(n^2): 64k spaces took over a minute. Same language, linear time.
_TAG_LIKE = re.compile(r"<(?=(\s*))\1(?:/(?=(\s*))\2)?(?:think|answer|refine)\b(?=([^<>]*))\3>", re.IGNORECASE)
_EXACT = {f"<{n}>": (n, False) for n in TAG_NAMES} | {f"</{n}>": (n, True) for n in TAG_NAMES}
_REFINE_OPEN, _REFINE_CLOSE = "<refine>", "</refine>"

# Failure reasons, stable strings: metrics and `pasr stats` count them by name.
OK = "ok"
EMPTY = "empty_response"
MALFORMED_TAG = "malformed_tag"
TEXT_BEFORE_THINK = "text_before_think"
MISSING_THINK = "missing_think"
NESTED_THINK = "nested_think"
ANSWER_INSIDE_THINK = "answer_inside_think"
UNCLOSED_THINK = "unclosed_think"
UNPAIRED_REFINE = "unpaired_refine"
NESTED_REFINE = "nested_refine"
UNCLOSED_REFINE = "unclosed_refine"
REFINE_OUTSIDE_THINK = "refine_outside_think"
TEXT_BETWEEN_BLOCKS = "text_between_think_and_answer"
MULTIPLE_THINK = "multiple_think"
MISSING_ANSWER = "missing_answer"
TAG_IN_ANSWER = "tag_in_answer"
UNCLOSED_ANSWER = "unclosed_answer"
EMPTY_ANSWER = "empty_answer"
MULTIPLE_ANSWER = "multiple_answer"
TEXT_AFTER_ANSWER = "text_after_answer"
STRAY_CLOSING_TAG = "stray_closing_tag"


@dataclass(frozen=True)
class RefineSpan:
    """One ``<refine>`` block. Offsets are characters into the think block's content."""

    start: int
    end: int
    text: str


@dataclass(frozen=True)
class FormatResult:
    ok: bool
    reward: float
    reason: str
    refine_spans: tuple[RefineSpan, ...] = field(default_factory=tuple)
    think: str | None = None
    answer: str | None = None

    @property
    def n_refine(self) -> int:
        return len(self.refine_spans)

    @property
    def has_refine(self) -> bool:
        return bool(self.refine_spans)


def _loose_refine_spans(text: str) -> tuple[RefineSpan, ...]:
    """Each ``<refine>`` up to the first ``</refine>`` after it, left to right (what the regex
    ``<refine>(.*?)</refine>`` finds), in linear time: that lazy regex rescanned the rest of the
    text from every unclosed ``<refine>``, O(n^2) on thousands of them. Once no ``</refine>``
    follows an opening, none follows any later one either, so the scan stops there."""
    spans: list[RefineSpan] = []
    pos = 0
    while (open_at := text.find(_REFINE_OPEN, pos)) >= 0:
        start = open_at + len(_REFINE_OPEN)
        end = text.find(_REFINE_CLOSE, start)
        if end < 0:
            break
        spans.append(RefineSpan(start, end, text[start:end]))
        pos = end + len(_REFINE_CLOSE)
    return tuple(spans)


def _fail(reason: str, text: str) -> FormatResult:
    # Refine spans are still reported for a broken response (well-paired ones only), so that
    # refine statistics and the refine reward see them; the format reward alone punishes.
    return FormatResult(ok=False, reward=-1.0, reason=reason, refine_spans=_loose_refine_spans(text))


def check_format(text: str) -> FormatResult:
    """The format reward of one response: +1 for the PASR layout, -1 with a named reason.

    Args:
        text: the response as decoded (with the ``<think>`` a prefilled prompt started it with).

    Returns:
        A :class:`FormatResult`: ``ok``, ``reward`` (+1 / -1), ``reason`` (``"ok"`` or the rule
        that failed), the ``<refine>`` spans (also for a broken layout, when well paired), and
        the think and answer texts of a well-formed response.

    Example:
        >>> r = check_format("<think>2+2=5 <refine>no: 2+2=4</refine></think> <answer>4</answer>")
        >>> (r.ok, r.reward, r.n_refine, r.refine_spans[0].text, r.answer)
        (True, 1.0, 1, 'no: 2+2=4', '4')
        >>> check_format("<think>a</think><answer>1</answer><think>b</think>").reason
        'multiple_think'
        >>> check_format("<Think>a</Think><answer>1</answer>").reason  # a near-miss tag
        'malformed_tag'
    """
    if not text or not text.strip():
        return _fail(EMPTY, text or "")

    state = "start"  # start -> think -> (refine -> think)* -> between -> answer -> done
    pos = 0
    think_start = think_end = answer_start = answer_end = -1
    refine_open = -1
    refine_bounds: list[tuple[int, int]] = []

    for match in _TAG_LIKE.finditer(text):
        raw = match.group(0)
        if raw not in _EXACT:
            return _fail(MALFORMED_TAG, text)
        name, closing = _EXACT[raw]
        gap = text[pos : match.start()]
        pos = match.end()

        if state == "start":
            if gap.strip():
                return _fail(TEXT_BEFORE_THINK, text)
            if name != "think" or closing:
                return _fail(MISSING_THINK if name != "think" else STRAY_CLOSING_TAG, text)
            state, think_start = "think", match.end()
        elif state == "think":
            if name == "refine" and not closing:
                state, refine_open = "refine", match.end()
            elif name == "think" and closing:
                state, think_end = "between", match.start()
            elif name == "think":
                return _fail(NESTED_THINK, text)
            elif name == "answer":
                return _fail(ANSWER_INSIDE_THINK, text)
            else:  # </refine> with no <refine>
                return _fail(UNPAIRED_REFINE, text)
        elif state == "refine":
            if name == "refine" and closing:
                refine_bounds.append((refine_open, match.start()))
                state = "think"
            elif name == "refine":
                return _fail(NESTED_REFINE, text)
            elif name == "think" and closing:
                return _fail(UNCLOSED_REFINE, text)
            elif name == "think":
                return _fail(NESTED_THINK, text)
            else:
                return _fail(ANSWER_INSIDE_THINK, text)
        elif state == "between":
            if gap.strip():
                return _fail(TEXT_BETWEEN_BLOCKS, text)
            if name == "answer" and not closing:
                state, answer_start = "answer", match.end()
            elif name == "think" and not closing:
                return _fail(MULTIPLE_THINK, text)
            elif name == "refine":
                return _fail(REFINE_OUTSIDE_THINK, text)
            else:
                return _fail(STRAY_CLOSING_TAG, text)
        elif state == "answer":
            if name == "answer" and closing:
                state, answer_end = "done", match.start()
            elif name == "refine":
                return _fail(REFINE_OUTSIDE_THINK, text)
            else:
                return _fail(TAG_IN_ANSWER, text)
        else:  # done
            if name == "answer":
                return _fail(MULTIPLE_ANSWER, text)
            if name == "think":
                return _fail(MULTIPLE_THINK, text)
            return _fail(REFINE_OUTSIDE_THINK, text)

    tail = text[pos:]
    if state == "start":
        return _fail(MISSING_THINK, text)
    if state in ("think", "refine"):
        return _fail(UNCLOSED_REFINE if state == "refine" else UNCLOSED_THINK, text)
    if state == "between":
        return _fail(TEXT_BETWEEN_BLOCKS if tail.strip() else MISSING_ANSWER, text)
    if state == "answer":
        return _fail(UNCLOSED_ANSWER, text)
    if tail.strip():
        return _fail(TEXT_AFTER_ANSWER, text)

    answer = text[answer_start:answer_end]
    if not answer.strip():
        return _fail(EMPTY_ANSWER, text)
    think = text[think_start:think_end]
    spans = tuple(RefineSpan(s - think_start, e - think_start, text[s:e]) for s, e in refine_bounds)
    return FormatResult(ok=True, reward=1.0, reason=OK, refine_spans=spans, think=think, answer=answer)
