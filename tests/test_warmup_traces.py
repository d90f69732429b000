"""Warm-up traces and prompts: the plain prompt asks for the refine prompt's format without
refine, both are taught, and a 'check' refine really redoes the step."""

from __future__ import annotations

import random
import re

import pytest

from data.records import PLAIN, REFINE
from data.synthetic import Step, apply_op, generate_problems
from data.warmup_traces import build_samples, build_trace, column_check, worked_check
from prompts import PromptSet
from rewards.format import check_format

EQUATION = re.compile(r"(\d+) ([-+*]) (\d+) = (\d+)")


@pytest.mark.parametrize(
    "plain, refine", [("plain_system", "refine_system"), ("plain_system_short", "refine_system_short")]
)
def test_plain_prompt_asks_for_the_same_format_without_refine(plain, refine):
    prompts = PromptSet.load(refine=refine, plain=plain)
    for tag in ("<think>", "</think>", "<answer>", "</answer>"):
        assert tag.strip("<>/") in prompts.plain and tag.strip("<>/") in prompts.refine
    assert "refine" not in prompts.plain.lower()  # only the refine prompt invites <refine>
    assert "<refine>" in prompts.refine


@pytest.mark.parametrize("style", ["check", "column"])
@pytest.mark.parametrize("difficulty", [1, 2, 3])
def test_every_trace_passes_the_format_reward(style, difficulty):
    problems = generate_problems(40, seed=3, difficulty=difficulty, split="train")
    samples = build_samples(problems, refine_fraction=0.6, style=style, seed=5, plain_fraction=0.3)
    for s in samples:
        fmt = check_format(s.trace)
        assert fmt.ok, (s.trace, fmt.reason)
        assert s.trace.endswith(f"<answer>{s.problem.answer}</answer>")
        if s.variant == PLAIN:
            assert fmt.n_refine == 0  # plain traces never refine
    variants = [s.variant for s in samples]
    assert 0 < variants.count(PLAIN) < len(samples) and REFINE in variants


def test_only_the_check_styles_are_built():
    """``fix`` and ``restate`` were retired (the config refuses them: tests/test_retired_keys.py);
    a style the traces do not know is an error, not refine-free traces."""
    problems = generate_problems(5, seed=1, difficulty=1, split="train")
    for style in ("fix", "restate", "sometimes"):
        with pytest.raises(ValueError, match="refine style must be one of check, column"):
            build_samples(problems, 0.5, style, 1)


def test_plain_fraction_bounds():
    problems = generate_problems(50, seed=1, difficulty=1, split="train")
    assert {s.variant for s in build_samples(problems, 0.5, "check", 1, plain_fraction=0.0)} == {REFINE}
    assert {s.variant for s in build_samples(problems, 0.5, "check", 1, plain_fraction=1.0)} == {PLAIN}


@pytest.mark.parametrize(
    ("a", "op", "b", "expected"),
    [
        (76, "-", 27, "76 - 20 = 56, 56 - 7 = 49"),  # second operand split into tens and ones
        (61, "+", 30, "60 + 30 = 90, 90 + 1 = 91"),  # round second operand: split the first
        (61, "-", 5, "60 - 5 = 55, 55 + 1 = 56"),
        (8, "-", 3, "8 - 3 = 5"),  # nothing smaller to do
        (66, "*", 2, "66 + 66 = 132"),
    ],
)
def test_worked_check(a, op, b, expected):
    assert worked_check(Step(op, a, b, apply_op(op, a, b), "")) == expected


def test_check_refines_fix_or_confirm_and_every_worked_equation_is_right():
    rng = random.Random(0)
    fixes = confirms = 0
    for p in generate_problems(200, seed=9, difficulty=2, split="train"):
        trace = build_trace(p, rng, refine=True, style="check")
        span = re.search(r"<refine>(.*?)</refine>", trace).group(1)
        for a, op, b, c in EQUATION.findall(span):
            assert apply_op(op, int(a), int(b)) == int(c), span
        if " is right" in span:
            confirms += 1
        else:
            fixes += 1
            right, wrong = re.search(r"so (\d+), not (\d+)", span).groups()
            assert right != wrong
            before = trace.split("<refine>")[0]
            assert before.rstrip(". ").endswith(f"= {wrong}")  # the wrong value was on the table
            after = trace.split("</refine>")[1]
            assert after.lstrip().split(".")[0].endswith(f"= {right}")  # reasoning goes on from the fixed value
    assert fixes > 50 and confirms > 50  # both kinds are taught


@pytest.mark.parametrize(
    ("a", "op", "b", "expected"),
    [
        (76, "-", 27, "ones 16 - 7 = 9, tens 7 - 2 - 1 = 4"),  # borrow
        (37, "-", 21, "ones 7 - 1 = 6, tens 3 - 2 = 1"),
        (67, "+", 37, "ones 7 + 7 = 14, tens 6 + 3 + 1 = 10"),  # carry into a third digit
        (134, "-", 58, "ones 14 - 8 = 6, tens 13 - 5 - 1 = 7"),  # 134 has 13 tens
        (37, "-", 29, "ones 17 - 9 = 8, tens 3 - 2 - 1 = 0"),
        (7, "+", 5, "ones 7 + 5 = 12, tens 0 + 0 + 1 = 1"),
        (66, "*", 2, "66 + 66 = 132"),  # a multiplication stays repeated addition
    ],
)
def test_column_check(a, op, b, expected):
    assert column_check(Step(op, a, b, apply_op(op, a, b), "")) == expected


COLUMN = re.compile(r"ones (\d+) ([-+]) (\d+) = (\d+), tens (\d+) [-+] (\d+)(?: [-+] 1)? = (\d+)")


def test_column_checks_are_one_digit_facts_that_compose_to_the_result():
    """Every fact in a column check is right, uses one-digit operands (a borrowed ten aside) and
    the tens and ones it finds read as the step's result: the check can only ever be right."""
    for p in generate_problems(300, seed=11, difficulty=3, split="train"):
        for step in p.steps:
            if step.op == "*":
                continue
            top, op, b_ones, ones, a_tens, b_tens, tens = map(int_or_op, COLUMN.fullmatch(column_check(step)).groups())
            assert b_ones < 10 and top < 20 and a_tens < 20 and b_tens < 20
            assert apply_op(op, top, b_ones) == ones
            assert tens * 10 + ones % 10 == step.result


def int_or_op(s: str):
    return s if s in "+-" else int(s)


def test_column_refines_fix_or_confirm_from_the_operands_not_the_first_value():
    rng = random.Random(1)
    for p in generate_problems(100, seed=4, difficulty=1, split="train"):
        trace = build_trace(p, rng, refine=True, style="column")
        span = re.search(r"<refine>(.*?)</refine>", trace).group(1)
        assert span.startswith(column_check(p.steps[0]))
        assert re.search(rf"so {p.steps[0].result}(, not \d+| is right)\.$", span), span
