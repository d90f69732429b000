"""Majority vote over sampled answers: best-of-n's ``--select majority`` (self-consistency,
Wang et al., 2023).

A vote counts *answers*, not texts, so two samples vote together when the run's judge would
treat their answers alike; otherwise ``\\boxed{0.5}`` and ``\\frac{1}{2}``, or ``1,000`` and
``1000``, would split a majority. Each sample's answer is extracted exactly as the judge's
is (:func:`rewards.extract.extract_answer`, with the run's ``--fallback-last-number``), then:

* math judges (``rule``, ``hybrid``): the rule judge's normal form
  (:func:`rewards.judges.rule.normalize`: wrappings, currency, thousands separators, unit
  words, percent) groups equal texts at once; two groups whose answers Math-Verify finds
  equal, as the rule judge grades the later one against the earlier one
  (:func:`rewards.judges.rule.verify_one`), are one group;
* ``openai``: the same normal form, case and spacing ignored (an LLM judge compares meaning,
  which no rule reproduces; this only merges what is plainly the same);
* ``countdown``: the equation without its spaces (the verifier scores equations, and two
  different equations are two answers even when both reach the target).

The largest group wins; a tie goes to the group whose first sample came first, and the sample
returned is that group's first. A sample with no answer votes for nothing. When no sample has
an answer the first sample is returned and, when there were several, the fallback is counted
(:class:`Choice`).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

from eval.self_score import Choice

MATH_JUDGES = ("rule", "hybrid")
VERIFY_TIMEOUT_S = 5  # Math-Verify's own time limit per comparison, as the rule judge's default


@dataclass(frozen=True)
class Vote:
    """The outcome: the :class:`Choice`, the sample indices of each distinct answer (groups in
    order of their first sample) and the winning group's size."""

    choice: Choice
    groups: list[list[int]]
    votes: int  # samples in the winning group (0 when no sample had an answer)


def answer_key(answer: str, judge_kind: str) -> str:
    """The text two answers must share to be the same answer without asking Math-Verify."""
    if judge_kind == "countdown":
        return "".join(answer.split())
    from rewards.judges.rule import normalize

    norm = normalize(answer)
    text = " ".join(norm.text.split())
    if judge_kind not in MATH_JUDGES:
        text = text.casefold()
    return text + ("%" if norm.percent else "")


def same_math_answer(earlier: str, later: str) -> bool:
    """Math-Verify's verdict on ``later`` graded against ``earlier``, the rule judge's way. Its
    time limit needs the main thread (``signal.alarm``); elsewhere it runs untimed, as
    :func:`rewards.judges.rule.parses_as_math` does. A comparison that fails is not a match."""
    from rewards.judges.rule import verify_one

    timeout_s = VERIFY_TIMEOUT_S if threading.current_thread() is threading.main_thread() else 0
    score, error = verify_one(earlier, later, timeout_s)
    return error is None and score == 1.0


def vote(answers: Sequence[str | None], judge_kind: str = "rule") -> Vote:
    """Majority vote over one question's extracted answers (None: the sample gave none)."""
    keys: list[str] = []  # one per group
    reps: list[str] = []  # the group's first answer, what later answers are compared with
    groups: list[list[int]] = []
    for i, answer in enumerate(answers):
        if answer is None or not answer.strip():
            continue
        key = answer_key(answer, judge_kind)
        g = next((g for g, k in enumerate(keys) if k == key), None)
        if g is None and judge_kind in MATH_JUDGES:
            g = next((g for g, rep in enumerate(reps) if same_math_answer(rep, answer)), None)
        if g is None:
            keys.append(key)
            reps.append(answer)
            groups.append([i])
        else:
            groups[g].append(i)
    if not groups:
        return Vote(Choice(0, fallback=len(answers) > 1), [], 0)
    winner = max(groups, key=len)  # max keeps the first of equal sizes: the group that began earliest
    return Vote(Choice(winner[0]), groups, len(winner))
