"""The model scores its own candidate answers: how ``--select best`` (Self-Refine) and
``--select score`` (best-of-n) choose which candidate is the sample's answer.

No judge and no gold are involved: choosing with the judge would be an oracle, not a method.
The *same* model, through the same backend and sampling settings, is asked with one template
(``prompts/templates/self_score.txt``, ``--score-prompt`` to override) to rate a candidate
answer to the question as a number between 0 and 1, ending with ``Score: <number>``. The reply
is read by the LLM judge's own parser (:func:`rewards.judges.judge_reply.parse_score`): the
last ``Score:`` label outside any ``<think>`` block, a number in [0, 1] (``0.8``, ``8/10``,
``80%``).

A reply with no such score (no label, a value outside [0, 1], cut off before the label) is a
*failed score*: recorded with its text and counted, never read by guessing. A failed candidate
cannot win; when no candidate of a question has a score, the method's fallback is returned
(the latest answer for Self-Refine, the first sample for best-of-n) and the fallback is
counted (:func:`pick_best`). The best score wins and a tie goes to the earlier candidate.

Scoring is generation, so it costs tokens: every scoring reply's output tokens count toward the
sample's output tokens, like every other pass, and the accuracy-vs-tokens comparison stays fair.
A question with a single candidate has nothing to choose from and is not scored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from eval.self_refine import Generator, call, fill
from prompts import build_chat, load_prompt, prompt_version
from rewards.judges.judge_reply import parse_score

SCORE_PROMPT = "self_score"  # prompts/templates/self_score.txt


@dataclass(frozen=True)
class ScorePrompt:
    """The scoring template (``{question}`` and ``{answer}``), sent as a user message with no
    system prompt, as Self-Refine's feedback is."""

    template: str

    @classmethod
    def load(cls, name: str = SCORE_PROMPT) -> ScorePrompt:
        return cls(load_prompt(name))

    def chat(self, question: str, answer: str) -> list[dict[str, str]]:
        return build_chat(None, fill(self.template, question=question, answer=answer.strip()))

    def version(self) -> str:
        return prompt_version(self.template)


@dataclass(frozen=True)
class ScoreReply:
    """The model's rating of one candidate: its reply as generated and the score read from it
    (None: a failed score)."""

    candidate: int  # index into the question's candidates
    text: str
    n_tokens: int
    finish_reason: str | None
    score: float | None


@dataclass(frozen=True)
class Choice:
    """The candidate a selection returns, and whether it is the fallback because no candidate
    could be chosen (no score for any, or no answer for any in a majority vote)."""

    index: int
    fallback: bool = False


def score_candidates(
    questions: Sequence[str],
    candidates: Sequence[Sequence[str]],
    generate: Generator,
    prompt: ScorePrompt,
    max_new_tokens: int | None = None,
) -> list[list[ScoreReply]]:
    """The replies rating each question's candidates (texts), in candidate order; one generate
    call for all of them. A question with fewer than two candidates gets none (nothing to
    choose). ``max_new_tokens``: the scoring pass's limit (None: the generator's own)."""
    if len(candidates) != len(questions):
        raise ValueError(f"{len(candidates)} candidate lists for {len(questions)} questions")
    todo = [(qi, ci) for qi, cands in enumerate(candidates) if len(cands) > 1 for ci in range(len(cands))]
    outs = call(generate, [prompt.chat(questions[qi], candidates[qi][ci]) for qi, ci in todo], max_new_tokens)
    replies: list[list[ScoreReply]] = [[] for _ in questions]
    for (qi, ci), o in zip(todo, outs):
        replies[qi].append(
            ScoreReply(ci, o.text, int(o.n_tokens), getattr(o, "finish_reason", None), parse_score(o.text))
        )
    return replies


def pick_best(scores: Sequence[float | None], fallback: int) -> Choice:
    """The candidate with the highest score, the earlier one on a tie; a failed score (None)
    never wins. With no score at all (or no candidates scored), ``fallback``, flagged as a
    fallback only when there were scores to fail (a single candidate is not a fallback)."""
    best: int | None = None
    for i, s in enumerate(scores):
        if s is not None and (best is None or s > scores[best]):
            best = i
    if best is None:
        return Choice(fallback, fallback=bool(scores))
    return Choice(best)


def scores_of(replies: Sequence[ScoreReply], n_candidates: int) -> list[float | None]:
    """One score per candidate (None: failed), from a question's :func:`score_candidates` replies;
    an empty list when the question was not scored."""
    if not replies:
        return []
    by_candidate: list[float | None] = [None] * n_candidates
    for r in replies:
        by_candidate[r.candidate] = r.score
    return by_candidate
