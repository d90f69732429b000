"""Best-of-N: N independent answers to a question, one of which becomes the sample's answer.

The baseline that spends extra tokens on breadth where Self-Refine and PASR spend them on
revision. Each of the N candidates is a plain-prompt answer (``--plain-prompt``, the chat as
``--method plain`` sends it), all questions' candidates in one generate call. ``--samples N``
is N here: the run has one scored sample per question, not mean@N, and sampling defaults to
temperature 0.6 / top-p 0.95 for N > 1 (greedy would give N copies of one answer).

How the answer is chosen (``--select``):

* ``majority`` (default): the answer most candidates give, answers compared as the run's judge
  compares them (:mod:`eval.majority_vote`); a tie goes to the earliest candidate. With no
  answer in any candidate the first is returned, and counted as a fallback;
* ``score``: the model rates each candidate (:mod:`eval.self_score`) and the best-rated one is
  returned, a tie to the earlier one; a reply without a score is a failed score that cannot
  win, and with no score at all the first candidate is returned, counted as a fallback.

Tokens: the sample's output tokens are those of all N candidates, plus every scoring reply's
with ``--select score``. Choosing is part of the method's cost, so it is counted, as
Self-Refine's feedback passes are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from eval.majority_vote import vote
from eval.self_refine import Generator, Pass, call
from eval.self_score import Choice, ScorePrompt, pick_best, score_candidates, scores_of
from prompts import build_chat

METHOD = "best-of-n"
SELECTS = ("majority", "score")  # the first is the default
VARIANT_PREFIX = "best_of_n:"


@dataclass
class SamplePass(Pass):
    """A best-of-n pass: ``sample:<k>`` (candidate k, from 0) or ``score:<k>`` (its rating)."""

    prefix: ClassVar[str] = VARIANT_PREFIX


@dataclass
class BestOfNTrace:
    """One question's candidates and the choice among them."""

    question: str
    samples: list[SamplePass]
    select: str
    choice: Choice
    answers: list[str | None] = field(default_factory=list)  # majority: each candidate's extracted answer
    votes: int | None = None  # majority: candidates that gave the chosen answer
    scores: list[float | None] = field(default_factory=list)  # score: each candidate's (None: failed)
    score_passes: list[SamplePass] = field(default_factory=list)

    @property
    def final(self) -> SamplePass:
        return self.samples[self.choice.index]

    @property
    def passes(self) -> list[SamplePass]:
        return self.samples + self.score_passes

    @property
    def total_tokens(self) -> int:
        """Every candidate's and every scoring reply's output tokens."""
        return sum(p.n_tokens for p in self.passes)

    def meta(self) -> dict:
        """What a record keeps of the choice (``extra``), and the summary counts."""
        m: dict = {
            "select": self.select,
            "candidates": len(self.samples),
            "selected": self.choice.index,
            "selection_fallback": self.choice.fallback,
            "final_tokens": self.final.n_tokens,
        }
        if self.select == "majority":
            m.update(answers=self.answers, votes=self.votes)
        else:
            m.update(scores=self.scores, score_failures=sum(s is None for s in self.scores))
        return m


def run_best_of_n(
    questions: Sequence[str],
    generate: Generator,
    answer_system: str,
    n: int,
    select: str = SELECTS[0],
    *,
    extract: Callable[[str], str | None] | None = None,
    judge_kind: str = "rule",
    score_prompt: ScorePrompt | None = None,
    score_tokens: int | None = None,
) -> list[BestOfNTrace]:
    """Best-of-``n`` for every question, batched: one generate call for every candidate and,
    with ``select="score"``, one for every rating (see the module docstring).

    ``extract`` (majority) reads a candidate's answer as the judge will (the run passes
    :func:`rewards.extract.extract_answer` with its ``--fallback-last-number``), and
    ``judge_kind`` says how answers compare (:func:`eval.majority_vote.vote`).
    ``score_prompt`` and ``score_tokens`` (score) are the rating template and its pass's limit."""
    if n < 1:
        raise ValueError(f"best-of-n needs n >= 1 candidates, got {n}")
    if select not in SELECTS:
        raise ValueError(f"unknown best-of-n selection {select!r}: choose one of {', '.join(SELECTS)}")
    if not questions:
        return []
    chats = [build_chat(answer_system, q) for q in questions for _ in range(n)]
    outs = call(generate, chats)
    samples = [
        [
            SamplePass(f"sample:{k}", o.text, int(o.n_tokens), getattr(o, "finish_reason", None))
            for k, o in enumerate(outs[i * n : (i + 1) * n])
        ]
        for i in range(len(questions))
    ]
    if select == "majority":
        if extract is None:
            from rewards.extract import extract_answer as extract
        traces = []
        for q, cands in zip(questions, samples):
            answers = [extract(p.text) for p in cands]
            v = vote(answers, judge_kind)
            traces.append(BestOfNTrace(q, cands, select, v.choice, answers=answers, votes=v.votes))
        return traces

    replies = score_candidates(
        questions,
        [[p.text for p in cands] for cands in samples],
        generate,
        score_prompt or ScorePrompt.load(),
        score_tokens,
    )
    traces = []
    for q, cands, rs in zip(questions, samples, replies):
        scores = scores_of(rs, len(cands))
        passes = [SamplePass(f"score:{r.candidate}", r.text, r.n_tokens, r.finish_reason) for r in rs]
        traces.append(BestOfNTrace(q, cands, select, pick_best(scores, fallback=0), scores=scores, score_passes=passes))
    return traces
