"""The evaluated methods: how one sample's final response is produced from its question.

* ``plain``: the plain system prompt, through the model's chat template, one pass;
* ``pasr``: the refine system prompt (``<think>``/``<refine>``/``<answer>``), one pass. The
  reference repository's evaluation applied neither a system prompt nor the chat template;
  we apply both, the same way training does;
* ``self-refine``: the post-hoc baseline (:mod:`eval.self_refine`), up to four
  feedback/refine rounds after a plain answer;
* ``reflect-retry``: how a Reflect, Retry, Reward model is used (:mod:`eval.reflect_retry`):
  an attempt with RRR's attempt prompt and, when the judge says it failed, one reflection and
  one retry, the retry being scored;
* ``best-of-n``: N plain answers, one chosen by majority vote or by the model's own scores
  (:mod:`eval.best_of_n`).

Methods with several candidate answers choose the scored one as ``--select`` says
(:class:`Selection`, :data:`SELECTS`): Self-Refine its latest answer (Madaan et al.; the
default) or the one the model scores best (``best``, :mod:`eval.self_score`); best-of-n by
``majority`` (default) or ``score``. Scoring is generation, and its tokens count.

Each method takes a batch of questions and a generator callable and returns one
:class:`Produced` per question: the response that is scored, the output tokens of all its
passes, and each pass for the record. ``reflect-retry`` also takes a verifier, since it needs
the judge's verdict between passes, and best-of-n's majority vote a :class:`Selection` saying
how the judge reads and compares answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from data.records import PLAIN, REFINE
from eval.best_of_n import METHOD as BEST_OF_N
from eval.best_of_n import SELECTS as BEST_OF_N_SELECTS
from eval.best_of_n import run_best_of_n
from eval.reflect_retry import METHOD as REFLECT_RETRY
from eval.reflect_retry import RrrPass, Verdict, Verifier, run_reflect_retry
from eval.self_refine import MAX_ROUNDS, Generator, Pass, SelfRefinePrompts, SelfRefineTrace, run_self_refine
from eval.self_score import SCORE_PROMPT, ScorePrompt, pick_best, score_candidates, scores_of
from prompts import PromptSet, prompt_version
from recipe.rrr_config import RrrConfig, RrrPromptsConfig
from recipe.rrr_step import RrrPrompts

METHODS = ("plain", "pasr", "self-refine", REFLECT_RETRY, BEST_OF_N)
# --select per method, the default first; the other methods have one answer and nothing to choose
SELECTS = {"self-refine": ("latest", "best"), BEST_OF_N: BEST_OF_N_SELECTS}
SCORING_SELECTS = ("best", "score")  # the selections that ask the model to score its candidates


@dataclass(frozen=True)
class Selection:
    """How a method with several candidate answers picks the one that is scored (``--select``),
    and what picking needs. The defaults are the plain behaviour: Self-Refine's latest answer."""

    select: str | None = None  # None: the method's default (the first of SELECTS[method])
    candidates: int = 1  # best-of-n: answers sampled per question (--samples N)
    score_tokens: int | None = None  # a scoring pass's new tokens (None: the generator's, --max-new-tokens)
    judge_kind: str = "rule"  # majority: answers compared as this judge compares them (eval.majority_vote)
    fallback_last_number: bool = False  # majority: answers extracted as the judge's are

    def resolved(self, method: str) -> str | None:
        """The selection ``method`` uses; None for a method with nothing to choose."""
        choices = SELECTS.get(method)
        return None if choices is None else (self.select or choices[0])

    def scores(self, method: str) -> bool:
        """Whether ``method`` asks the model to score its candidates."""
        return self.resolved(method) in SCORING_SELECTS


def check_selection(method: str, select: str | None) -> str | None:
    """Why ``--select select`` cannot go with ``--method method`` (one line), or None."""
    if select is None:
        return None
    choices = SELECTS.get(method)
    if choices is None:
        return (
            f"--select applies to --method self-refine ({'|'.join(SELECTS['self-refine'])}) and "
            f"{BEST_OF_N} ({'|'.join(SELECTS[BEST_OF_N])}), not to {method}"
        )
    if select not in choices:
        return (
            f"--select {select} is not a choice of --method {method}: "
            f"{choices[0]} (the default) or {', '.join(choices[1:])}"
        )
    return None


@dataclass
class Produced:
    # plain | refine | self_refine:<pass that gave the final answer> | attempt | retry | best_of_n:sample:<k>
    variant: str
    text: str  # the final response, the one extracted and judged
    n_tokens: int  # output tokens of every pass, scoring passes included
    finish_reason: str | None
    # self-refine, reflect-retry, best-of-n: every pass (variant, text, tokens)
    passes: list[dict] = field(default_factory=list)
    # self-refine: rounds, stop (and with --select best: selected, scores, ...); reflect-retry: retried,
    # first_acc; best-of-n: select, candidates, selected, votes or scores (BestOfNTrace.meta)
    meta: dict = field(default_factory=dict)
    verdict: Verdict | None = None  # the judge's verdict on ``text`` when the method already has it


@dataclass(frozen=True)
class MethodPrompts:
    """The prompt texts every method may use, loaded once per run."""

    prompts: PromptSet
    self_refine: SelfRefinePrompts
    rrr: RrrPrompts
    score: ScorePrompt  # --select best / score: how the model is asked to rate a candidate

    @classmethod
    def load(
        cls,
        refine: str | None = None,
        plain: str | None = None,
        judge: str = "judge_binary",
        rrr: RrrPromptsConfig | None = None,
        score: str = SCORE_PROMPT,
    ):
        """``refine``, ``plain``: None is ``pasr.prompts``'s default (as training's);
        ``rrr``: RRR's template names (default: those training uses, ``recipe/rrr_config.py``);
        ``score``: the self-scoring template (default ``self_score``)."""
        return cls(
            PromptSet.load(refine=refine, plain=plain, judge=judge),
            SelfRefinePrompts.load(plain=plain),
            RrrConfig(prompts=rrr or RrrPromptsConfig()).load_prompts(),
            ScorePrompt.load(score),
        )

    def version(self, method: str, select: str | None = None) -> str:
        """Hash of the prompts ``method`` uses (recorded, and part of the run fingerprint); with a
        scoring ``select`` the scoring template is part of it. Without one each method's hash
        is what it was before ``--select`` existed, so earlier runs still resume."""
        if method == "plain" or method == BEST_OF_N:
            base = prompt_version(self.prompts.plain)
        elif method == "pasr":
            base = prompt_version(self.prompts.refine)
        elif method == REFLECT_RETRY:
            base = self.rrr.version()
        else:
            base = self.self_refine.version()
        if select in SCORING_SELECTS:
            return prompt_version(base + "\x00" + self.score.version())
        return base


def check_method(method: str) -> None:
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}: choose one of {', '.join(METHODS)}")


def produce(
    method: str,
    questions: Sequence[str],
    generate: Generator,
    prompts: MethodPrompts,
    max_rounds: int = MAX_ROUNDS,
    *,
    verify: Verifier | None = None,
    max_reflection_tokens: int | None = None,
    attempts: Sequence[RrrPass | None] | None = None,
    selection: Selection | None = None,
) -> list[Produced]:
    """One :class:`Produced` per question, in order. ``verify``, ``max_reflection_tokens`` and
    ``attempts`` (kept first attempts of a rerun) are reflect-retry's (:func:`run_reflect_retry`);
    ``selection`` is self-refine's and best-of-n's (default: :class:`Selection`'s defaults)."""
    check_method(method)
    selection = selection or Selection()
    problem = check_selection(method, selection.select)
    if problem:
        raise ValueError(problem)
    if method == REFLECT_RETRY:
        return _reflect_retry(questions, generate, prompts, verify, max_reflection_tokens, attempts)
    if method == BEST_OF_N:
        return _best_of_n(questions, generate, prompts, selection)
    if method in ("plain", "pasr"):
        chat = prompts.prompts.plain_chat if method == "plain" else prompts.prompts.refine_chat
        outs = generate([chat(q) for q in questions])
        if len(outs) != len(questions):
            raise RuntimeError(f"generator returned {len(outs)} completions for {len(questions)} chats")
        variant = PLAIN if method == "plain" else REFINE
        return [Produced(variant, o.text, int(o.n_tokens), getattr(o, "finish_reason", None)) for o in outs]
    traces = run_self_refine(questions, generate, prompts.self_refine, max_rounds=max_rounds)
    if selection.scores(method):
        return _self_refine_best(traces, generate, prompts.score, selection.score_tokens)
    out = []
    for t in traces:
        final = t.final
        out.append(
            Produced(
                variant=final.variant,
                text=final.text,
                n_tokens=t.total_tokens,
                finish_reason=final.finish_reason,
                passes=[p.to_dict() for p in t.passes],
                meta={"rounds": t.rounds, "stop": t.stop, "final_tokens": final.n_tokens},
            )
        )
    return out


def _round_of(answer: Pass) -> int:
    """0 for the first answer, r for ``refine:r``: the round a scoring pass is named after."""
    return 0 if answer.name == "answer" else int(answer.name.split(":", 1)[1])


def _self_refine_best(
    traces: list[SelfRefineTrace], generate: Generator, score_prompt: ScorePrompt, score_tokens: int | None
) -> list[Produced]:
    """Self-Refine ``--select best``: every answer of the loop (the first and each refine) is
    scored by the model (:mod:`eval.self_score`) and the best-scored one is the sample's answer,
    the earlier on a tie; with no score at all, the latest (today's answer), counted as a
    fallback. The scoring passes (``score:<round>``) are recorded and their tokens count."""
    answers = [t.answers for t in traces]
    replies = score_candidates(
        [t.question for t in traces], [[p.text for p in a] for a in answers], generate, score_prompt, score_tokens
    )
    out = []
    for t, cands, rs in zip(traces, answers, replies):
        scores = scores_of(rs, len(cands))
        choice = pick_best(scores, fallback=len(cands) - 1)
        final = cands[choice.index]
        score_passes = [Pass(f"score:{_round_of(cands[r.candidate])}", r.text, r.n_tokens, r.finish_reason) for r in rs]
        out.append(
            Produced(
                variant=final.variant,
                text=final.text,
                n_tokens=t.total_tokens + sum(p.n_tokens for p in score_passes),
                finish_reason=final.finish_reason,
                passes=[p.to_dict() for p in t.passes + score_passes],
                meta={
                    "rounds": t.rounds,
                    "stop": t.stop,
                    "final_tokens": final.n_tokens,
                    "select": "best",
                    "selected": final.name,
                    "scores": scores,
                    "score_failures": sum(s is None for s in scores),
                    "selection_fallback": choice.fallback,
                },
            )
        )
    return out


def _best_of_n(questions, generate, prompts: MethodPrompts, selection: Selection) -> list[Produced]:
    from rewards.extract import extract_answer

    def extract(text: str) -> str | None:
        return extract_answer(text, fallback_last_number=selection.fallback_last_number)

    traces = run_best_of_n(
        questions,
        generate,
        prompts.prompts.plain,
        selection.candidates,
        selection.resolved(BEST_OF_N),
        extract=extract,
        judge_kind=selection.judge_kind,
        score_prompt=prompts.score,
        score_tokens=selection.score_tokens,
    )
    return [_from_trace(t) for t in traces]


def _from_trace(t, **extra) -> Produced:
    """The sample of a multi-pass trace (best-of-n's, reflect-retry's): its final pass's text,
    every pass's tokens, every pass recorded, the trace's own ``meta()``."""
    return Produced(
        variant=t.final.variant,
        text=t.final.text,
        n_tokens=t.total_tokens,
        finish_reason=t.final.finish_reason,
        passes=[p.to_dict() for p in t.passes],
        meta=t.meta(),
        **extra,
    )


def _reflect_retry(questions, generate, prompts: MethodPrompts, verify, reflection_tokens, attempts) -> list[Produced]:
    if verify is None:
        raise ValueError(f"method {REFLECT_RETRY} needs a verifier: it judges the attempt before deciding to retry")
    traces = run_reflect_retry(
        questions, generate, verify, prompts.rrr, reflection_tokens=reflection_tokens, attempts=attempts
    )
    return [_from_trace(t, verdict=t.final_verdict) for t in traces]
