"""Empty refines, refine fixes and breaks (rewards/refine_quality.py) on hand-written responses, and
their per-step rates (recipe/metrics.py)."""

from __future__ import annotations

import pytest

from data.records import RolloutRecord
from recipe.metrics import refine_quality_metrics, refine_quality_rates, step_metrics
from rewards.format import check_format
from rewards.refine_quality import (
    CORRECT_AT,
    RefineQuality,
    assess_refines,
    content_words,
    is_correct,
    is_empty_refine,
    normalize_number,
    normalize_refine_text,
    numbers_in,
    numeric_gold,
)


def resp(think: str, answer: str = "\\boxed{40}") -> str:
    return f"<think>{think}</think>\n<answer>{answer}</answer>"


# ------------------------------------------------------------------ numbers


@pytest.mark.parametrize(
    "raw, norm",
    [
        ("1,000", "1000"),
        ("5.0", "5"),
        ("2.50", "2.5"),
        ("-3", "-3"),
        ("-0", "0"),
        ("007", "7"),
        ("12", "12"),
        ("1,234,567.00", "1234567"),
        ("0.125", "0.125"),
    ],
)
def test_normalize_number(raw, norm):
    assert normalize_number(raw) == norm


def test_numbers_in_text():
    assert numbers_in("81 - 34 = 47") == ["81", "34", "47"]
    assert numbers_in("81-34") == ["81", "34"]  # a minus after a digit is an operator
    assert numbers_in("so x = -5, then (3)-2") == ["-5", "3", "2"]
    assert numbers_in("x1 + a2b = 7.") == ["7"]  # digits glued to a name are not numbers
    assert numbers_in("costs $1,000 or 5.0 dollars, 2.50 each") == ["1000", "5", "2.5"]
    assert numbers_in("3,4 and 1/2") == ["3", "4", "1", "2"]
    assert numbers_in("the 10th day at 5km") == ["10", "5"]
    assert numbers_in("no digits here") == []


@pytest.mark.parametrize(
    "gold, expected",
    [
        ("72", "72"),
        ("1,000", "1000"),
        ("-3", "-3"),
        ("5.0", "5"),
        (" 18 ", "18"),
        ("\\$5", "5"),
        ("10\\%", "10"),
        ("\\boxed{12}", "12"),
        ("\\frac{1}{2}", None),
        ("x = 3", None),
        ("", None),
        (None, None),
        ("(1, 2)", None),
    ],
)
def test_numeric_gold(gold, expected):
    assert numeric_gold(gold) == expected


def test_is_correct():
    assert CORRECT_AT == 1.0
    assert is_correct(1.0) is True and is_correct(0.99) is False and is_correct(None) is None
    assert is_correct(0.6, at=0.5) is True


# ------------------------------------------------------------------ empty refines


def _empty_flags(think: str) -> tuple[bool, ...]:
    return assess_refines(resp(think), "40", True).empty


def test_blank_refine_is_empty():
    assert _empty_flags("a = 3. <refine></refine> b = 4. <refine> \n </refine> ok") == (True, True)


def test_restated_values_are_empty():
    # the prototype's example: every number already stated before the span
    assert _empty_flags("81 - 34 = 57. <refine>Check: 81 - 34 is 57, not 57</refine> So 57.") == (True,)


def test_one_new_value_is_not_empty():
    assert _empty_flags("81 - 34 = 57. <refine>Check: 81 - 34 is 47, not 57</refine> So 47.") == (False,)


def test_numbers_match_in_normal_form():
    assert _empty_flags("Total 1,000 and 5.0 kg. <refine>So 1000 and 5 kg.</refine> ok") == (True,)
    assert _empty_flags("Total 1000 and 5 kg. <refine>So 1,000 and 5.00 kg.</refine> ok") == (True,)
    assert _empty_flags("Total 1000 kg. <refine>So 1,001 kg.</refine> ok") == (False,)


def test_numbers_after_the_span_do_not_count():
    assert _empty_flags("12 * 3 = 35. <refine>12 * 3 = 36.</refine> so 36 + 4 = 40.") == (False,)


def test_earlier_refine_spans_count_as_before():
    think = "7 * 8 = 54. <refine>7 * 8 = 56.</refine> Then 56. <refine>Indeed 7 * 8 = 56.</refine> done"
    assert _empty_flags(think) == (False, True)


def test_words_only_refines():
    # no numbers and only checking vocabulary: nothing new
    assert _empty_flags("x is 3. <refine>Let me re-read the question.</refine> ok") == (True,)
    assert _empty_flags("x is 3. <refine>Wait, let me double-check that step again.</refine> ok") == (True,)
    # a new content word is new content
    assert _empty_flags("Price 20 dollars. <refine>Wait, I forgot the discount.</refine> ok") == (False,)
    assert _empty_flags("Price 20 with a discount. <refine>Wait, I forgot the discount.</refine> ok") == (True,)
    # plural s is ignored when comparing words
    assert _empty_flags("She has apples. <refine>Those are the apple counts? No: apples.</refine>") == (False,)
    assert _empty_flags("She has 3 apples in the basket. <refine>The basket holds the apple.</refine>") == (True,)


def test_multiple_spans_keep_order():
    think = "Let us compute 7 + 8 = 14. <refine>Let me re-read the question.</refine> <refine>7 + 8 = 15</refine> Done."
    q = assess_refines(resp(think, "15"), "15", True)
    assert q == RefineQuality(2, (True, False), True, draft_ok=False, breaks=False)
    assert q.n_empty == 1


def test_is_empty_refine_agrees_with_assess():
    cases = [
        ("81 - 34 = 57. ", "Check: 81 - 34 is 57, not 57"),
        ("81 - 34 = 57. ", "Check: 81 - 34 is 47"),
        ("Price 20 dollars. ", "Wait, I forgot the discount."),
        ("x is 3. ", "Let me re-read the question."),
        ("x is 3. ", "   "),
    ]
    for before, span in cases:
        q = assess_refines(resp(f"{before}<refine>{span}</refine> end"), "40", True)
        assert q.empty == (is_empty_refine(span, before),), (before, span)


def test_broken_format_spans_are_assessed():
    text = "<think>5 + 5 = 11 <refine>5 + 5 = 10</refine> so 10 <answer>10</answer>"
    fmt = check_format(text)
    assert not fmt.ok and fmt.n_refine == 1
    q = assess_refines(text, "10", True)
    assert q == RefineQuality(1, (False,), True, draft_ok=False, breaks=False)
    text2 = "<think>5 + 5 = 10 <refine>5 + 5 is 10</refine> so 10 <answer>10</answer>"
    assert assess_refines(text2, "10", True) == RefineQuality(1, (True,), False, draft_ok=True, breaks=False)


def test_content_words_skip_filler():
    assert content_words("Let me re-read the question and check the answer again.") == set()
    assert content_words("The discounts and the TAX") == {"discount", "tax"}


# ------------------------------------------------------------------ refine fix


def test_fix_when_wrong_value_then_correct_answer():
    think = "12 * 3 = 35. <refine>Check: 12 * 3 is 36, not 35.</refine> So 36 + 4 = 40."
    assert assess_refines(resp(think), "40", True) == RefineQuality(1, (False,), True, draft_ok=False, breaks=False)


def test_no_fix_when_value_before_refine_was_already_gold():
    think = "81 - 41 = 40. <refine>Check: 81 - 41 is 40, not 40</refine> So 40."
    assert assess_refines(resp(think), "40", True) == RefineQuality(1, (True,), False, draft_ok=True, breaks=False)
    # compared in normal form: 40.0 == 40, 1,000 == 1000
    assert assess_refines(resp("so 40.0 <refine>ok 40</refine>"), "40", True).fix is False
    assert assess_refines(resp("so 1000 <refine>ok 1000</refine>"), "1,000", True).fix is False


def test_fix_uses_last_number_before_first_refine():
    think = "3 + 4 = 40. Hmm 7. <refine>3 + 4 = 7 indeed</refine> Then 40 <refine>so 40</refine>"
    # last number before the first refine is 7 (not the gold 40) -> a fix
    assert assess_refines(resp(think), "40", True).fix is True
    think = "7 then 40. <refine>check 7</refine> 9 <refine>9 not 40</refine>"
    assert assess_refines(resp(think), "40", True).fix is False


def test_wrong_final_answer_is_never_a_fix():
    think = "12 * 3 = 35. <refine>12 * 3 is 36.</refine> So 36 + 4 = 41."
    assert assess_refines(resp(think, "41"), "40", False).fix is False


def test_fix_not_applicable():
    think = "12 * 3 = 35. <refine>12 * 3 is 36.</refine> So 40."
    assert assess_refines(resp(think), "40", None).fix is None  # judge error
    assert assess_refines(resp(think), "\\frac{1}{2}", True).fix is None  # not a numeric gold
    assert assess_refines(resp(think), "\\frac{1}{2}", False).fix is None
    assert assess_refines(resp(think), None, True).fix is None
    q = assess_refines(resp("12 * 3 = 36. So 40."), "40", True)  # no refine
    assert q == RefineQuality(0, (), None) and q.n_empty == 0


def test_no_number_before_first_refine_is_not_a_fix():
    think = "First read it. <refine>The rate is 4 per hour.</refine> 4 * 10 = 40."
    assert assess_refines(resp(think), "40", True).fix is False


def test_precomputed_format_gives_same_result():
    text = resp("12 * 3 = 35. <refine>Check: 36</refine> <refine>again 36</refine> 40")
    assert assess_refines(text, "40", True, fmt=check_format(text)) == assess_refines(text, "40", True)


def test_normalize_refine_text():
    assert normalize_refine_text("  Check: 81 - 34 is 57,\n  NOT 1,000.5 ") == "check: <n> - <n> is <n>, not <n>"
    assert normalize_refine_text("x" * 500) == "x" * 200


def test_draft_is_judged_whatever_the_final_answer():
    """The draft verdict does not depend on correctness: a wrong draft stays wrong when the
    answer is wrong too or unknown, and there is no draft without a number or a numeric gold."""
    think = "12 * 3 = 35. <refine>Check: 12 * 3 is 36, not 35.</refine> So 36 + 4 = 40."
    assert assess_refines(resp(think), "40", False).draft_ok is False
    assert assess_refines(resp(think), "40", None).draft_ok is False
    assert assess_refines(resp("40 it is. <refine>so 40</refine>"), "40", None).draft_ok is True
    assert assess_refines(resp("Let me see. <refine>12 * 3 = 36</refine> 40"), "40", True).draft_ok is None
    assert assess_refines(resp(think), "\\frac{1}{2}", True).draft_ok is None
    assert assess_refines(resp("no refine, 40"), "40", True).draft_ok is None


# ------------------------------------------------------------------ refine break


def test_break_when_right_draft_then_wrong_answer():
    think = "12 * 3 = 36. So 40. <refine>Check: 12 * 3 is 37, not 36.</refine> So 37 + 4 = 41."
    q = assess_refines(resp(think, "41"), "40", False)
    assert q == RefineQuality(1, (False,), False, draft_ok=True, breaks=True)
    # compared in normal form, like the fix: a right draft of 1,000 broken into a wrong answer
    assert assess_refines(resp("so 1,000 <refine>no, 999</refine>", "999"), "1000", False).breaks is True


def test_no_break_when_right_draft_stays_right_or_draft_was_wrong():
    kept = "81 - 41 = 40. <refine>Check: 81 - 41 is 40.</refine> So 40."
    assert assess_refines(resp(kept), "40", True).breaks is False
    wrong = "12 * 3 = 35. <refine>12 * 3 is 34.</refine> So 34 + 4 = 38."
    assert assess_refines(resp(wrong, "38"), "40", False).breaks is False  # nothing right to break
    fixed = "12 * 3 = 35. <refine>12 * 3 is 36.</refine> So 40."
    assert assess_refines(resp(fixed), "40", True).breaks is False  # a fix, not a break


def test_break_not_applicable():
    think = "81 - 41 = 40. <refine>81 - 41 is 41.</refine> So 41."
    assert (
        assess_refines(resp("Let me see. <refine>it is 41</refine> 41", "41"), "40", False).breaks is None
    )  # no draft
    assert assess_refines(resp(think, "41"), "\\frac{1}{2}", False).breaks is None  # not a numeric gold
    assert assess_refines(resp(think, "41"), "40", None).breaks is None  # judge error
    assert assess_refines(resp("81 - 41 = 41. So 41.", "41"), "40", False).breaks is None  # no refine


def _rec(response: str, gold: str, acc: float | None) -> RolloutRecord:
    fmt = check_format(response)
    return RolloutRecord(
        run_id="r",
        query_id="q",
        data_source="gsm8k",
        variant="refine",
        prompt="q?",
        response=response,
        response_tokens=len(response) // 4,
        format_ok=fmt.ok,
        format_reason=fmt.reason,
        n_refine=fmt.n_refine,
        extracted_answer=None,
        gold=gold,
        acc=acc,
        total_reward=acc,
        refine_reward=0.0,
    )


def test_break_rate_metric():
    """Breaks / refining responses whose break is known, beside the fix rate; 0 when undefined."""
    records = [
        _rec(resp("40. <refine>no, 41</refine> 41", "41"), "40", 0.0),  # right draft, wrong answer: break
        _rec(resp("40. <refine>yes, 40</refine> 40"), "40", 1.0),  # right draft kept
        _rec(resp("35. <refine>no, 40</refine> 40"), "40", 1.0),  # a fix
        _rec(resp("Hmm. <refine>it is 40</refine> 40"), "40", 1.0),  # no draft: fix False, break unknown
        _rec(resp("40. <refine>no, 41</refine> 41", "41"), "40", None),  # judge error: unknown
        _rec(resp("40 and no refine"), "40", 0.0),  # no refine: not counted
    ]
    rates = refine_quality_rates(records)
    assert rates.breaks == pytest.approx(1 / 3) and rates.fix == pytest.approx(1 / 4)
    m = refine_quality_metrics(records)
    assert m["pasr/refine_break_rate"] == pytest.approx(1 / 3) and m["pasr/refine_fix_rate"] == pytest.approx(1 / 4)
    assert step_metrics(records)["pasr/refine_break_rate"] == pytest.approx(1 / 3)  # what both engines log
    assert refine_quality_rates(records[3:]).breaks is None
    assert refine_quality_metrics(records[3:], prefix="eval")["eval/refine_break_rate"] == 0.0
