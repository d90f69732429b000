"""Warm-up traces and prompts: the plain prompt asks for the refine prompt's format without
refine, both are taught, and a 'check' refine really redoes the step."""

from __future__ import annotations

import random
import re

import pytest

from data.records import PLAIN, REFINE
from data.synthetic import Step, apply_op, generate_problems
from prompts import PromptSet
from data.warmup_traces import build_samples, build_trace, worked_check
from rewards.format import check_format

EQUATION = re.compile(r"(\d+) ([-+*]) (\d+) = (\d+)")


@pytest.mark.parametrize("plain, refine", [("plain_system", "refine_system"), ("plain_system_short", "refine_system_short")])
def test_plain_prompt_asks_for_the_same_format_without_refine(plain, refine):
    prompts = PromptSet.load(refine=refine, plain=plain)
    for tag in ("<think>", "</think>", "<answer>", "</answer>"):
        assert tag.strip("<>/") in prompts.plain and tag.strip("<>/") in prompts.refine
    assert "refine" not in prompts.plain.lower()  # only the refine prompt invites <refine>
    assert "<refine>" in prompts.refine


@pytest.mark.parametrize("style", ["fix", "check", "restate"])
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
