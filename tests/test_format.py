"""The format reward, including adversarial outputs that a sloppy check lets through."""

import pytest

from rewards import format as F
from rewards.format import check_format

GOOD = [
    "<think>2+2=4</think><answer>4</answer>",
    "  \n<think>a</think>\n\n<answer>4</answer>\n ",
    "<think>x=3 <refine>no, x=4</refine> so 4</think> <answer>\\boxed{4}</answer>",
    "<think><refine>r1</refine><refine>r2</refine></think><answer>ok</answer>",
    "<think></think><answer>4</answer>",  # an empty think is still one think block
]


@pytest.mark.parametrize("text", GOOD)
def test_good_layouts_pass(text):
    res = check_format(text)
    assert res.ok and res.reward == 1.0 and res.reason == F.OK


BAD = [
    ("", F.EMPTY),
    ("   \n", F.EMPTY),
    ("4", F.MISSING_THINK),
    ("<answer>4</answer>", F.MISSING_THINK),
    ("hello <think>a</think><answer>4</answer>", F.TEXT_BEFORE_THINK),
    # the reference code's precedence bug let duplicated think blocks pass:
    ("<think>a</think><think>b</think><answer>4</answer>", F.MULTIPLE_THINK),
    ("<think>a</think><answer>4</answer><think>b</think>", F.MULTIPLE_THINK),
    ("<think>a<think>b</think></think><answer>4</answer>", F.NESTED_THINK),
    ("<think>a</think><answer>4</answer><answer>5</answer>", F.MULTIPLE_ANSWER),
    ("<think>a</think> so <answer>4</answer>", F.TEXT_BETWEEN_BLOCKS),
    ("<think>a</think><answer>4</answer> trailing", F.TEXT_AFTER_ANSWER),
    ("<think>a</think>", F.MISSING_ANSWER),
    ("<think>a</think> the answer is 4", F.TEXT_BETWEEN_BLOCKS),
    ("<think>a", F.UNCLOSED_THINK),
    ("<think>a</think><answer>4", F.UNCLOSED_ANSWER),
    ("<think>a</think><answer> </answer>", F.EMPTY_ANSWER),
    ("<think>a <answer>4</answer></think><answer>4</answer>", F.ANSWER_INSIDE_THINK),
    ("<think>a <refine>b</think><answer>4</answer>", F.UNCLOSED_REFINE),
    ("<think>a </refine> b</think><answer>4</answer>", F.UNPAIRED_REFINE),
    ("<think><refine>a<refine>b</refine></refine></think><answer>4</answer>", F.NESTED_REFINE),
    ("<think>a</think><refine>b</refine><answer>4</answer>", F.REFINE_OUTSIDE_THINK),
    ("<think>a</think><answer><refine>b</refine>4</answer>", F.REFINE_OUTSIDE_THINK),
    ("<think>a</think><answer>4</answer><refine>b</refine>", F.REFINE_OUTSIDE_THINK),
    ("<refine>b</refine><think>a</think><answer>4</answer>", F.MISSING_THINK),
    ("<think>a</think><answer>4</think></answer>", F.TAG_IN_ANSWER),
    ("</think><think>a</think><answer>4</answer>", F.STRAY_CLOSING_TAG),
    ("<think>a</think></answer>", F.STRAY_CLOSING_TAG),
    # near-miss tags are not tags: no reward for almost-right syntax
    ("<Think>a</Think><answer>4</answer>", F.MALFORMED_TAG),
    ("<think >a</think><answer>4</answer>", F.MALFORMED_TAG),
    ("<think>a<refine/>b</think><answer>4</answer>", F.MALFORMED_TAG),
    ("<think>a</think><answer>4</answer >", F.MALFORMED_TAG),
]


@pytest.mark.parametrize("text,reason", BAD)
def test_bad_layouts_fail_with_reason(text, reason):
    res = check_format(text)
    assert not res.ok
    assert res.reward == -1.0
    assert res.reason == reason


def test_refine_spans_are_offsets_into_think():
    text = "<think>x=3 <refine>no, x=4</refine> then <refine>ok</refine></think><answer>4</answer>"
    res = check_format(text)
    assert res.n_refine == 2 and res.has_refine
    assert [s.text for s in res.refine_spans] == ["no, x=4", "ok"]
    assert all(res.think[s.start : s.end] == s.text for s in res.refine_spans)
    assert res.answer == "4"


def test_broken_format_still_reports_paired_refines():
    res = check_format("<think>a <refine>fix</refine></think> junk")
    assert not res.ok and res.n_refine == 1 and res.refine_spans[0].text == "fix"


def test_no_refine():
    res = check_format("<think>a</think><answer>1</answer>")
    assert res.ok and res.n_refine == 0 and not res.has_refine


# --- hostile text: every response must check in linear time -------------------------------------
# Each of these took 1 s to minutes before the tag regex and the loose refine scan were made
# linear (``<\s*/?\s*`` backtracked over every split of a whitespace run; the lazy
# ``<refine>(.*?)</refine>`` rescanned the rest of the text from each unclosed ``<refine>``).

HOSTILE = [
    ("<think>a <" + " " * 8000 + "</think><answer>1</answer>", F.OK),
    ("<think>a <" + " " * 20000 + "</think><answer>1</answer>", F.OK),
    ("<" + " " * 64000, F.MISSING_THINK),
    ("</" + "\t" * 64000 + "x", F.MISSING_THINK),
    ("<think>" + "<refine>" * 5000 + "</think><answer>1</answer>", F.NESTED_REFINE),
    ("<think>a</think><answer>1</answer>" + "<refine>" * 5000, F.REFINE_OUTSIDE_THINK),
    ("<refine>x" * 7000 + "</think>", F.MISSING_THINK),
]


def _best_of(n: int, fn) -> float:
    import time

    best = float("inf")
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


@pytest.mark.parametrize("text,reason", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_text_checks_fast(text, reason):
    assert check_format(text).reason == reason
    # 10 ms is the requirement; 50 ms (best of 3) leaves room for a loaded CI box and is still
    # far below the seconds the quadratic scans took.
    assert _best_of(3, lambda: check_format(text)) < 0.05


def test_broken_format_spans_with_unclosed_refines():
    # the linear scan pairs exactly as the lazy regex did: each opening with the first closing
    res = check_format("<think><refine>a<refine>b</refine> c <refine>d</think> <refine>e</refine>")
    assert not res.ok
    assert [s.text for s in res.refine_spans] == ["a<refine>b", "d</think> <refine>e"]
