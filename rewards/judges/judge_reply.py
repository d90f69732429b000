"""Reading an LLM judge's reply: the message text out of a chat completion, and the one score
out of that text (:func:`parse_score`). The HTTP client is :mod:`rewards.judges.openai_judge`;
``eval/self_score.py`` reads a model's own verdicts with the same parser.

A reply is read, never guessed: anything that is not exactly one score in [0, 1], stated the way
the templates ask for it, is None here, which the judge retries and finally counts as a judge
error. That includes a range (``Score: 0.7-0.8``, ``Score: 0.6 to 0.9``, ``Score: between 0.6
and 0.9``), two values (``Score: 0 or 1``) and two labels with different values.

Digits of other scripts (Arabic-Indic ``٠.٨``, fullwidth ``０．５``, Devanagari ``०.८``, ...) are
read as the numbers they are: every Unicode decimal digit becomes its ASCII digit
(``unicodedata.decimal``) and the decimal separators and signs that go with them (``٫``, ``．``,
``／``, ``％``, ``٪``, ``−``) their ASCII forms, before the reply is read. The parser before read
``Score: ٠٫٨`` as 0 and ``Score: ١٫٥`` as 1 (it stopped at the separator it did not know);
``١٬٠`` (with the Arabic thousands separator) is read as ``1,0``: two values, refused.
"""

from __future__ import annotations

import math
import re
import unicodedata

# ---------------------------------------------------------------------------------------------
# The message text of a chat completion


class BadReply(ValueError):
    """A chat-completion body with no message text: not a completion, or its content is not a string."""


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def message_content(body: object) -> str:
    """``choices[0].message.content`` of a decoded chat-completion body, or :class:`BadReply`
    saying why there is none. A content that is not a string (null: the server put everything
    in a reasoning field; a list of parts; a number) is a bad reply, not text to read: ``str()``
    of it would turn ``0.8`` or ``None`` into something the parser could misread."""
    try:
        content = body["choices"][0]["message"]["content"]  # type: ignore[index]
    except (KeyError, IndexError, TypeError):
        raise BadReply("not a chat completion (no choices[0].message.content)") from None
    if not isinstance(content, str):
        raise BadReply(f"the message content is {_kind(content)}, not text")
    return content


# ---------------------------------------------------------------------------------------------
# Digits of other scripts

# The separators and signs that come with digits of other scripts, as their ASCII forms. The
# Arabic thousands separator becomes a comma, so ``١٬٠`` reads as two values (refused), never 1.
_ASCII_FORMS = {
    "\u066b": ".",  # ARABIC DECIMAL SEPARATOR
    "\u066c": ",",  # ARABIC THOUSANDS SEPARATOR
    "\uff0e": ".",  # FULLWIDTH FULL STOP
    "\uff0c": ",",  # FULLWIDTH COMMA
    "\uff0f": "/",  # FULLWIDTH SOLIDUS
    "\uff05": "%",  # FULLWIDTH PERCENT SIGN
    "\u066a": "%",  # ARABIC PERCENT SIGN
    "\uff1a": ":",  # FULLWIDTH COLON
    "\uff0b": "+",  # FULLWIDTH PLUS SIGN
    "\uff0d": "-",  # FULLWIDTH HYPHEN-MINUS
    "\u2212": "-",  # MINUS SIGN
    "\uff5e": "~",  # FULLWIDTH TILDE
}
_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def _ascii_char(match: re.Match[str]) -> str:
    char = match.group()
    digit = unicodedata.decimal(char, None)  # decimal digits only: a superscript "²" is not one
    return str(digit) if digit is not None else _ASCII_FORMS.get(char, char)


def ascii_digits(text: str) -> str:
    """``text`` with every Unicode decimal digit as its ASCII digit and the separators and signs
    of :data:`_ASCII_FORMS` as theirs; other characters unchanged."""
    return text if text.isascii() else _NON_ASCII.sub(_ascii_char, text)


# ---------------------------------------------------------------------------------------------
# The score

_NUM = r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?"
# The templates ask for ``Score: <x>``. The label may carry markdown (``**Score:** 1``,
# ``Score: **1**``); the value is a number, optionally ``a/b``, ``a out of b`` or ``a%``, and
# must end there (``Score: 1st`` is not a score; a sentence's full stop may follow).
_DECOR = r"[*_`\s]*"
_SCORE_RE = re.compile(
    rf"\bscore{_DECOR}:{_DECOR}(?P<num>{_NUM})"
    rf"(?:\s*(?:/|\bout\s+of\b)\s*(?P<den>{_NUM}))?(?P<pct>\s*%)?(?!\.?\w)",
    re.IGNORECASE,
)
_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
# A second value right after a score, on its line: two values (``Score: 0 or 1``, ``Score: 1, 0``,
# ``Score: 1 0``) or a range (``Score: 0.7-0.8``, ``Score: 0.7 - 0.8``, ``Score: 0.6 to 0.9``,
# ``Score: 0.7 (0.6-0.8)``, ``Score: 0.7, or maybe 0.8``), or a bare number on the next line. (A
# full stop ends the verdict: ``Score: 1. 2 steps were checked`` states one.) Words before the
# next number keep it apart: ``Score: 1, since 12 equals 12`` is one score. Possessive repeats:
# a reply of 30000 dots or dashes after a score is read in linear time.
_GAP = r"[ \t*_`]*+"
_JOINER = r"(?:[,;|/~(\[\-\u2010-\u2015]|\.\.++|\u2026|\b(?:or|and|to|through|vs\.?|versus)\b)"
_HEDGE = r"(?:(?:maybe|perhaps|possibly|probably|about|around|roughly|approximately)\b" + _GAP + ")?"
_SECOND_VALUE = re.compile(
    rf"(?<!\.){_GAP}(?:(?:{_JOINER}{_GAP})++{_HEDGE})?{_NUM}(?!\.?\w)"
    # or a line that holds only a number right below the score: ``Score: 0.7\n0.8``
    rf"|{_GAP}\r?\n{_GAP}{_NUM}[ \t*_`.]*+(?:\r?\n|$)",
    re.IGNORECASE,
)


def _value(match: re.Match[str]) -> float | None:
    """The labelled value, or None when it is not a score in [0, 1]: a value outside the range
    (``Score: 7``, on some 0-10 scale the prompt never asked for) is not clamped, since reading
    it as 1.0 would be a guess. A denominator is a whole number (``8/10``, ``0.8/1.0``):
    ``0.7/0.8`` states two values, not 0.875."""
    try:
        value = float(match.group("num"))
        if match.group("den") is not None:
            den = float(match.group("den"))
            if den <= 0 or not den.is_integer():
                return None
            value /= den
        elif match.group("pct"):
            value /= 100.0
    except (OverflowError, ValueError):
        return None
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        return None
    return value


def _drop_reasoning(text: str) -> str:
    """The reply without its ``<think>`` reasoning: closed blocks are removed; with only a
    closing ``</think>`` (chat templates that open the block in the prompt) the text after the
    last one is kept; an unclosed ``<think>`` (cut off while reasoning) drops everything from it."""
    if "</think>" in text.lower():
        text = _THINK_BLOCK.sub(" ", text)
        low = text.lower()
        if "</think>" in low:
            text = text[low.rfind("</think>") + len("</think>") :]
    low = text.lower()
    if "<think>" in low:
        text = text[: low.find("<think>")]
    return text


def parse_score(text: str | None) -> float | None:
    """The judge's score in [0, 1] read from its reply, or None when the reply states none, or
    more than one.

    Only a score stated the way the templates ask for it counts: ``Score: x`` (case-insensitive,
    markdown around the label or the value allowed), outside any ``<think>`` reasoning. ``x``
    may be a fraction (``8/10``, ``8 out of 10``) or a percentage (``80%``), in the digits of
    any script (:func:`ascii_digits`). The label may appear several times if it gives the same
    value each time.

    Everything else is None, which the caller retries and finally reports as a judge error:
    a reply is never read by guessing. That covers a reply with no label (the parser before
    took its last number, so "The answer 12 does not match the reference 15." scored 1.0, as
    did "Error 503: upstream overloaded" and "7 out of 10"), a value outside [0, 1] or not
    finite, a zero or fractional denominator, a reply that is not text, and a reply stating
    two scores or a range: two values after one label (``Score: 0 or 1``, ``Score: 0.7-0.8``,
    ``Score: 0.6 to 0.9``; ``Score: between 0.6 and 0.9`` has no value after its label) or
    labels with different values (``Score: 0.2 ... Score: 0.8``), of which taking either one
    would be a guess.
    """
    if not text or not isinstance(text, str):
        return None
    text = ascii_digits(_drop_reasoning(text))
    values = set()
    for match in _SCORE_RE.finditer(text):
        if _SECOND_VALUE.match(text, match.end()):
            return None
        values.add(_value(match))
    return values.pop() if len(values) == 1 else None
