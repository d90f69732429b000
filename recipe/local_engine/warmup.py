"""Supervised warm-up traces for the cold start.

The base SmolLM2 never writes the tags (format pass 0.00 with the refine prompt), so a short
supervised phase on synthetic tagged traces comes first. What the traces teach matters: a
prototype warmed up on refines that only restated a value ("Check: 81 - 34 is 57, not 57":
58 of 74 spans empty); PASR's comparison reward then correctly trained refinement away,
because it never helped. So the default traces (``refine_style: fix``) contain a *real*
mistake, a wrong intermediate value, which the refine corrects before reasoning continues from
the right value. ``restate`` reproduces the prototype's traces for comparison.
"""

from __future__ import annotations

import random

from data.synthetic import Step, SyntheticProblem


def _wrong_value(rng: random.Random, right: int) -> int:
    for _ in range(20):
        wrong = right + rng.choice([-1, 1]) * rng.randint(1, 10)
        if wrong >= 0 and wrong != right:
            return wrong
    return right + 1


def _equation(step: Step, a: int, result: int) -> str:
    return f"{a} {step.op} {step.b} = {result}"


def build_trace(problem: SyntheticProblem, rng: random.Random, refine: bool, style: str = "fix") -> str:
    """The assistant response for one problem: ``<think>`` steps ``</think><answer>``.

    With ``refine`` and ``style='fix'`` one step is first computed wrongly, then corrected in a
    ``<refine>`` span that states the right value; later steps use the corrected value. With
    ``style='restate'`` the refine only repeats a right step.
    """
    steps = problem.steps
    where = rng.randrange(len(steps)) if refine else -1
    lines = []
    for i, step in enumerate(steps):
        if i == where and style == "fix":
            wrong = _wrong_value(rng, step.result)
            lines.append(f"{_equation(step, step.a, wrong)}.")
            lines.append(f"<refine>{step.a} {step.op} {step.b} is {step.result}, not {wrong}.</refine>")
        lines.append(f"{step.text}.")
        if i == where and style == "restate":
            lines.append(f"<refine>Check: {step.a} {step.op} {step.b} = {step.result}.</refine>")
    return "<think>" + " ".join(lines) + "</think><answer>" + problem.answer + "</answer>"


def build_traces(problems: list[SyntheticProblem], refine_fraction: float, style: str, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [build_trace(p, rng, rng.random() < refine_fraction, style) for p in problems]
