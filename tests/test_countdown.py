"""Countdown: the seeded generator (data/countdown.py) and the exact verifier (rewards/countdown.py)."""

from __future__ import annotations

import time
from fractions import Fraction

import pytest

from data.countdown import DATA_SOURCE, LEVELS, generate_countdown, generate_problems
from data.synthetic import split_of
from rewards.countdown import (
    MAX_EQUATION_CHARS,
    countdown_reward,
    equation_text,
    format_gold,
    parse_equation,
    parse_gold,
)

# ---------------------------------------------------------------- generator


def test_same_arguments_same_problems_and_seeds_differ():
    a = generate_countdown(50, seed=3, difficulty=2, split="train")
    b = generate_countdown(50, seed=3, difficulty=2, split="train")
    assert [e.to_dict() for e in a] == [e.to_dict() for e in b]
    other = generate_countdown(50, seed=4, difficulty=2, split="train")
    assert [e.question for e in a] != [e.question for e in other]


def test_fixed_first_problem_pins_cross_machine_determinism():
    """String-seeded random.Random is the same on every machine and Python version; this pins
    it, so a change to the generator that reshuffles every data set is a visible decision."""
    first = generate_problems(1, seed=0, difficulty=1)[0]
    assert (first.numbers, first.target, first.solution) == ((8, 16, 19), 3, "19 - 16")


@pytest.mark.parametrize("difficulty", sorted(LEVELS))
def test_rows_match_their_level_and_reference_solutions_verify(difficulty):
    level = LEVELS[difficulty]
    for e in generate_countdown(200, seed=1, difficulty=difficulty):
        numbers, target = e.extra["numbers"], e.extra["target"]
        assert e.data_source == DATA_SOURCE and e.answer == format_gold(e.extra["numbers"], target)
        assert len(numbers) == level.count
        assert all(level.low <= x <= level.high for x in numbers)
        assert 1 <= target <= level.max_target and target not in numbers
        assert countdown_reward(e.extra["solution"], numbers, target) == 1.0
        assert f"equals {target}" in e.question and ", ".join(map(str, numbers)) in e.question
        assert "<answer>" in e.question


def test_splits_never_share_a_problem_even_across_seeds():
    def keys(split, seed):
        return {
            (tuple(sorted(e.extra["numbers"])), e.extra["target"])
            for e in generate_countdown(300, seed=seed, split=split)
        }

    train = keys("train", 0) | keys("train", 1)
    test = keys("test", 0) | keys("test", 1)
    assert len(test) > 100 and not train & test


def test_split_is_decided_by_the_canonical_key_not_the_listed_order():
    p = generate_problems(1, seed=5, difficulty=3, split="test")[0]
    assert split_of(p.key) == "test"
    reordered = f"countdown:{','.join(map(str, sorted(reversed(p.numbers))))}:{p.target}"
    assert reordered == p.key


def test_problems_are_distinct_within_a_call():
    problems = generate_problems(500, seed=2, difficulty=1)
    assert len({p.key for p in problems}) == 500


def test_bad_arguments_are_errors():
    with pytest.raises(ValueError, match="difficulty"):
        generate_countdown(1, difficulty=4)
    with pytest.raises(ValueError, match="split"):
        generate_countdown(1, split="validation")
    with pytest.raises(ValueError, match="n must"):
        generate_countdown(-1)


# ---------------------------------------------------------------- verifier

NUMBERS = [4, 5, 25, 7]


@pytest.mark.parametrize(
    "text",
    [
        "(25 - 5) * 4",
        "4 * (25 - 5)",
        "(25-5)*4 = 80",
        "<think>try 25 - 5 = 20</think> <answer> (25 - 5) * 4 </answer>",
        "<answer>1 + 1</answer> then <answer>(25 - 5) * 4</answer>",  # the last block counts
        "((25 - 5)) * (4)",
    ],
)
def test_right_equations_score_one(text):
    assert countdown_reward(text, NUMBERS, 80) == 1.0


def test_exact_fractions_and_unused_numbers():
    assert countdown_reward("7 / 4 * 4", [4, 7, 4], 7) == 1.0  # 7/4 is exact, no rounding
    assert countdown_reward("(4 + 4) / 7", [4, 7, 4], 1) == 0.0  # 8/7 is not 1
    assert countdown_reward("25 - 7 * 4 + 5", NUMBERS, 2) == 1.0  # all four numbers
    assert countdown_reward("25", NUMBERS, 25) == 1.0  # fewer numbers are allowed
    assert countdown_reward("-4 + 25 - 7", NUMBERS, 14) == 1.0  # unary minus


def test_number_reuse_and_foreign_numbers_score_zero():
    assert countdown_reward("25 * 4 - 5 * 4", NUMBERS, 80) == 0.0  # 4 twice, given once
    assert countdown_reward("25 * 4 - 5 * 4", [4, 4, 5, 25], 80) == 1.0  # given twice: allowed
    assert countdown_reward("(26 - 6) * 4", NUMBERS, 80) == 0.0  # 26 and 6 are not given
    assert countdown_reward("(25 - 05) * 4", NUMBERS, 80) == 0.0  # 05 is not a number here


def test_wrong_target_scores_zero():
    assert countdown_reward("(25 - 5) * 4", NUMBERS, 81) == 0.0
    assert countdown_reward("(25 - 5) * 4 = 81", NUMBERS, 80) == 0.0  # claims another value
    assert countdown_reward("(25 - 5) * 4 = 80 = 80", NUMBERS, 80) == 0.0
    assert countdown_reward("(25 - 5) * 4 = 4 * 20", NUMBERS, 80) == 0.0  # only an integer on the right


@pytest.mark.parametrize(
    "text",
    [
        "5 ** 2 + 55",  # power
        "400 // 5",  # floor division
        "(25 - 5) x 4",
        "(25 − 5) * 4",  # a unicode minus
        "(25 - 5) * 4.0",
        "1e2 - 20",
        "(25 - 5) * 4;",
        "+80",  # unary plus is not in the grammar
        "(25 - 5)(4)",
        "25 5",
        "",
        "<answer></answer>",
        "no equation here",
    ],
)
def test_disallowed_tokens_score_zero(text):
    assert countdown_reward(text, NUMBERS + [80, 2, 55, 400], 80) == 0.0


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('echo pwned')",
        "<answer>__import__('os').system('echo pwned')</answer>",
        "(lambda: 80)()",
        "[80][0]",
        "80 if True else 0",
        "exec('x = 80')",
        "80  # comment",
        "'80'",
        "(25 - 5) * 4\nimport os",
    ],
)
def test_injection_attempts_score_zero_and_are_never_run(text, monkeypatch):
    import builtins

    def refuse(*args, **kwargs):  # ast.parse may compile to an AST; nothing may run the text
        raise AssertionError("model text reached eval/exec/__import__")

    for name in ("eval", "exec"):
        monkeypatch.setattr(builtins, name, refuse)
    assert countdown_reward(text, NUMBERS + [80, 0], 80) == 0.0


def test_division_by_zero_is_invalid_not_an_error():
    assert parse_equation("4 / (5 - 5)") is None
    assert countdown_reward("4 / (5 - 5) + 80", [4, 5, 5, 80], 80) == 0.0


def test_parse_equation_reports_value_numbers_and_claim():
    eq = parse_equation(" (7 - 4) / 5 = 1 ")
    assert eq is not None
    assert (eq.expression, eq.value, eq.numbers, eq.claimed) == ("(7 - 4) / 5", Fraction(3, 5), (7, 4, 5), 1)


def test_equation_text_takes_the_last_complete_answer_block():
    assert equation_text("<answer>1</answer> <answer> 2 + 3 </answer>") == "2 + 3"
    assert equation_text("  4 * 5 ") == "4 * 5"
    assert equation_text("<answer>unclosed 4 * 5") == "<answer>unclosed 4 * 5"


@pytest.mark.parametrize(
    "text",
    [
        "1 + " * 200_000 + "1",  # very long
        "<answer>" * 200_000,  # many unclosed tags: linear, not a regex's quadratic scan
        "<answer>" + "(" * 100_000 + "4" + ")" * 100_000 + "</answer>",  # deep nesting, long
        "(" * 100 + "4" + ")" * 100,  # deep nesting within the length bound
        "-" * (MAX_EQUATION_CHARS - 1) + "4",  # the longest chain of unary minus
        "9" * 5000,  # beyond int's string-conversion limit
        "*".join(["99"] * 80),  # products of large literals: bounded by the length cap
        "(" * 20 + "1" + ")" * 19,  # unbalanced
        None,
        12345,
    ],
)
def test_hostile_input_scores_zero_quickly(text):
    start = time.perf_counter()
    assert countdown_reward(text, [4, 99, 9], 80) == 0.0
    assert time.perf_counter() - start < 0.5


def test_every_length_up_to_the_cap_is_accepted():
    eq = "(" * 16 + "25 - 5" + ")" * 16 + " * 4"
    assert len(eq) <= MAX_EQUATION_CHARS and countdown_reward(eq, NUMBERS, 80) == 1.0
    padded = "(25 - 5)" + " " * (MAX_EQUATION_CHARS - 11) + "* 4"  # inner spaces: not stripped
    assert len(padded) == MAX_EQUATION_CHARS and countdown_reward(padded, NUMBERS, 80) == 1.0
    longer = padded.replace("* 4", " * 4")
    assert countdown_reward(longer, NUMBERS, 80) == 0.0  # one character over


def test_gold_round_trip_and_refusals():
    assert parse_gold(format_gold((3, 7, 12), 25)) == ((3, 7, 12), 25)
    assert parse_gold(" 4,5 ->9 ") == ((4, 5), 9)
    for bad in ("25", "", "3, 7 -> ", "a, b -> c", "3 7 -> 25"):
        assert parse_gold(bad) is None


def test_countdown_judge_scores_through_the_judge_interface():
    from recipe.pasr_config import JudgeConfig
    from rewards.judges import JudgeItem, build_judge, score_sync

    judge = build_judge(JudgeConfig(kind="countdown"))
    gold = format_gold((25, 5, 4), 80)
    out = score_sync(
        judge,
        [
            JudgeItem("q", gold, "(25 - 5) * 4"),
            JudgeItem("q", gold, "25 * 4"),  # 100: wrong
            JudgeItem("q", gold, None),  # no answer: wrong, not an error
            JudgeItem("q", "80", "(25 - 5) * 4"),  # not a Countdown gold: an error, never a 0
        ],
    )
    assert [r.score for r in out[:3]] == [1.0, 0.0, 0.0] and all(r.ok for r in out[:3])
    assert not out[3].ok and out[3].score is None and "Countdown gold" in out[3].error


def test_countdown_loads_as_a_known_source():
    from data.loaders import DatasetError, load_examples

    rows = load_examples("countdown", split="test", limit=5, difficulty=2, seed=3)
    assert len(rows) == 5 and all(r.data_source == DATA_SOURCE and r.extra["split"] == "test" for r in rows)
    assert rows == generate_countdown(5, seed=3, difficulty=2, split="test")
    with pytest.raises(DatasetError, match="countdown"):
        load_examples("countdown", shape="gsm8k")
