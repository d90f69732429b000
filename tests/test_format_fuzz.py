"""Fuzzing ``check_format`` with random tag soup: it must stay fast and self-consistent on any
text a policy can emit (up to 64k characters), and tokenise exactly as the original regexes did.

The reference patterns below are the ones ``rewards/format.py`` used before they were made
linear; on short inputs (where their quadratic cost does not matter) they are the oracle for
"the format semantics did not change".
"""

from __future__ import annotations

import random
import re
import time

from rewards import format as F
from rewards.format import check_format

REFERENCE_TAG_LIKE = re.compile(r"<\s*/?\s*(?:think|answer|refine)\b[^<>]*>", re.IGNORECASE)
REFERENCE_LOOSE_REFINE = re.compile(r"<refine>(.*?)</refine>", re.DOTALL)

TOKENS = [
    "<think>",
    "</think>",
    "<refine>",
    "</refine>",
    "<answer>",
    "</answer>",
    "<",
    ">",
    "/",
    "</",
    " ",
    "  ",
    "\t",
    "\n",
    "\r\n",
    "\u3000",
    "\u00a0",
    "\u200b",
    "think",
    "refine",
    "answer",
    "THINK",
    "<Think>",
    "< think>",
    "</ refine >",
    "<refine/>",
    "<answer >",
    "<thinking>",
    "<refinement>",
    "<<",
    ">>",
    "< /",
    "＜",
    "＞",
    "＜think＞",
    "＜/think＞",
    "‹think›",
    "〈answer〉",
    "a",
    "x=3",
    "42",
    "\\boxed{4}",
    "é",
    "😀",
]
MAX_CHARS = 64_000


def _soup(rng: random.Random, n_tokens: int) -> str:
    return "".join(rng.choice(TOKENS) for _ in range(n_tokens))


def _hostile(rng: random.Random) -> str:
    """Long runs of one or two tokens (what defeats backtracking), padded to at most 64k."""
    head = _soup(rng, rng.randint(0, 8))
    run = rng.choice(TOKENS) + rng.choice(["", " ", "\r\n", "\u3000", rng.choice(TOKENS)])
    body = run * (MAX_CHARS // (2 * len(run)))
    return (head + body + _soup(rng, rng.randint(0, 8)))[:MAX_CHARS]


def _whitespace_runs(rng: random.Random) -> str:
    ws = rng.choice([" ", "\t", "\n", "\r\n", "\u3000"])
    opener = rng.choice(["<", "</", "< /", "<think", "<refine", "＜"])
    return ("<think>a " + opener + ws * (MAX_CHARS // len(ws)))[:MAX_CHARS]


def _check_consistent(text: str, res: F.FormatResult) -> None:
    assert res.reward in (1.0, -1.0)
    assert res.ok == (res.reason == F.OK) == (res.reward == 1.0)
    if res.ok:
        assert res.answer is not None and res.answer.strip()
        assert res.think is not None and f"<think>{res.think}</think>" in text
        assert f"<answer>{res.answer}</answer>" in text
        for span in res.refine_spans:
            assert res.think[span.start : span.end] == span.text
    else:
        assert res.think is None and res.answer is None
        for span in res.refine_spans:
            assert text[span.start : span.end] == span.text


def test_fuzz_matches_reference_tokenisation_on_short_soup():
    rng = random.Random(1234)
    for _ in range(1500):
        text = _soup(rng, rng.randint(0, 40))
        assert [m.span() for m in F._TAG_LIKE.finditer(text)] == [
            m.span() for m in REFERENCE_TAG_LIKE.finditer(text)
        ], text
        res = check_format(text)
        _check_consistent(text, res)
        if not res.ok:
            assert [(s.start, s.end) for s in res.refine_spans] == [
                m.span(1) for m in REFERENCE_LOOSE_REFINE.finditer(text)
            ], text


def test_fuzz_long_hostile_inputs_are_fast_and_consistent():
    rng = random.Random(20240612)
    texts = [_hostile(rng) for _ in range(60)] + [_whitespace_runs(rng) for _ in range(20)]
    texts += [_soup(rng, 9000)[:MAX_CHARS] for _ in range(10)]
    worst, total = 0.0, 0.0
    for text in texts:
        assert len(text) <= MAX_CHARS
        t0 = time.perf_counter()
        res = check_format(text)
        elapsed = time.perf_counter() - t0
        total, worst = total + elapsed, max(worst, elapsed)
        _check_consistent(text, res)
    # The requirement is < 10 ms per response; the bounds are loose so that a busy CI box does
    # not flake, and still far below the seconds the quadratic regexes took on such inputs.
    assert total / len(texts) < 0.05, f"mean {total / len(texts) * 1000:.1f} ms"
    assert worst < 1.0, f"worst {worst * 1000:.1f} ms"


def test_lookalikes_and_crlf_are_not_tags():
    # fullwidth and angle-quote lookalikes are plain text, not (near-miss) tags
    assert check_format("＜think＞a＜/think＞<answer>1</answer>").reason == F.TEXT_BEFORE_THINK
    assert check_format("<think>a ＜refine＞b</think><answer>1</answer>").ok
    assert check_format("<think>〈answer〉</think><answer>1</answer>").ok
    # CRLF is whitespace like any other between and around the blocks
    res = check_format("\r\n<think>\r\na <refine>b</refine>\r\n</think>\r\n<answer>1</answer>\r\n")
    assert res.ok and res.n_refine == 1 and res.answer == "1"
    assert check_format("<think>a</think>\r\nso\r\n<answer>1</answer>").reason == F.TEXT_BETWEEN_BLOCKS
