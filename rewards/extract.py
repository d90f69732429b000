"""Answer extraction: what the judge compares with the gold answer.

Handing a whole response to Math-Verify fails quietly (``<answer>27</answer>`` parses to
nothing), so the answer text is cut out first: the content of the last ``<answer>`` block,
and inside it the last ``\\boxed{...}`` when there is one. Responses without an answer block
(the plain prompt of the baselines, Self-Refine passes) fall back to their last ``\\boxed{}``.
"""

from __future__ import annotations

import re

_ANSWER_BLOCK = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_BOXED_START = re.compile(r"\\(?:boxed|fbox)\s*\{")
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (brace-matched, so ``\\boxed{\\frac{1}{2}}`` works)."""
    starts = [m.end() for m in _BOXED_START.finditer(text)]
    for start in reversed(starts):
        depth, i = 1, start
        while i < len(text) and depth:
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
            i += 1
        if depth == 0:
            return text[start : i - 1].strip()
    return None


def answer_block(text: str) -> str | None:
    """Content of the last ``<answer>...</answer>`` block, or None."""
    blocks = _ANSWER_BLOCK.findall(text)
    return blocks[-1] if blocks else None


def extract_answer(text: str, fallback_last_number: bool = False) -> str | None:
    """The answer string to judge, or None when the response gives none.

    ``fallback_last_number`` takes the last number of the response when there is neither an
    answer block nor a box; off by default because it rewards answers the model never gave.
    """
    block = answer_block(text)
    if block is not None:
        return last_boxed(block) or block.strip() or None
    boxed = last_boxed(text)
    if boxed is not None:
        return boxed
    if fallback_last_number:
        numbers = _NUMBER.findall(text)
        if numbers:
            return numbers[-1].replace(",", "")
    return None


def gsm8k_gold(solution: str) -> str:
    """GSM8K's gold: the text after ``####``, commas removed (``#### 1,000`` -> ``1000``)."""
    if "####" not in solution:
        raise ValueError("GSM8K solution has no '#### <answer>' line")
    return solution.rsplit("####", 1)[1].strip().replace(",", "")
