"""The evaluated methods: how one sample's final response is produced from its question.

* ``plain``: the plain system prompt, through the model's chat template, one pass;
* ``pasr``: the refine system prompt (``<think>``/``<refine>``/``<answer>``), one pass. The
  reference repository's evaluation applied neither a system prompt nor the chat template;
  we apply both, the same way training does;
* ``self-refine``: the post-hoc baseline (:mod:`eval.self_refine`), up to four
  feedback/refine rounds after a plain answer;
* ``reflect-retry``: how a Reflect, Retry, Reward model is used (:mod:`eval.reflect_retry`):
  an attempt with RRR's attempt prompt and, when the judge says it failed, one reflection and
  one retry, the retry being scored.

Each method takes a batch of questions and a generator callable and returns one
:class:`Produced` per question: the response that is scored, the output tokens of all its
passes, and each pass for the record. ``reflect-retry`` also takes a verifier, since it needs
the judge's verdict between passes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from data.records import PLAIN, REFINE
from eval.reflect_retry import METHOD as REFLECT_RETRY
from eval.reflect_retry import RrrPass, Verdict, Verifier, run_reflect_retry
from eval.self_refine import MAX_ROUNDS, Generator, SelfRefinePrompts, run_self_refine
from prompts import PromptSet, prompt_version
from recipe.rrr_config import RrrConfig, RrrPromptsConfig
from recipe.rrr_step import RrrPrompts

METHODS = ("plain", "pasr", "self-refine", REFLECT_RETRY)


@dataclass
class Produced:
    variant: str  # plain | refine | self_refine:<pass that gave the final answer> | attempt | retry
    text: str  # the final response, the one extracted and judged
    n_tokens: int  # output tokens of every pass
    finish_reason: str | None
    passes: list[dict] = field(default_factory=list)  # self-refine, reflect-retry: every pass (variant, text, tokens)
    meta: dict = field(default_factory=dict)  # self-refine: rounds, stop; reflect-retry: retried, first_acc
    verdict: Verdict | None = None  # the judge's verdict on ``text`` when the method already has it


@dataclass(frozen=True)
class MethodPrompts:
    """The prompt texts every method may use, loaded once per run."""

    prompts: PromptSet
    self_refine: SelfRefinePrompts
    rrr: RrrPrompts

    @classmethod
    def load(
        cls,
        refine: str = "refine_system",
        plain: str = "plain_system",
        judge: str = "judge_binary",
        rrr: RrrPromptsConfig | None = None,
    ):
        """``rrr``: RRR's template names (default: those training uses, ``recipe/rrr_config.py``)."""
        return cls(
            PromptSet.load(refine=refine, plain=plain, judge=judge),
            SelfRefinePrompts.load(plain=plain),
            RrrConfig(prompts=rrr or RrrPromptsConfig()).load_prompts(),
        )

    def version(self, method: str) -> str:
        """Hash of the prompts ``method`` uses (recorded, and part of the run fingerprint)."""
        if method == "plain":
            return prompt_version(self.prompts.plain)
        if method == "pasr":
            return prompt_version(self.prompts.refine)
        if method == REFLECT_RETRY:
            return self.rrr.version()
        return self.self_refine.version()


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
) -> list[Produced]:
    """One :class:`Produced` per question, in order. ``verify``, ``max_reflection_tokens`` and
    ``attempts`` (kept first attempts of a rerun) are reflect-retry's (:func:`run_reflect_retry`)."""
    check_method(method)
    if method == REFLECT_RETRY:
        return _reflect_retry(questions, generate, prompts, verify, max_reflection_tokens, attempts)
    if method in ("plain", "pasr"):
        chat = prompts.prompts.plain_chat if method == "plain" else prompts.prompts.refine_chat
        outs = generate([chat(q) for q in questions])
        if len(outs) != len(questions):
            raise RuntimeError(f"generator returned {len(outs)} completions for {len(questions)} chats")
        variant = PLAIN if method == "plain" else REFINE
        return [Produced(variant, o.text, int(o.n_tokens), getattr(o, "finish_reason", None)) for o in outs]
    traces = run_self_refine(questions, generate, prompts.self_refine, max_rounds=max_rounds)
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


def _reflect_retry(questions, generate, prompts: MethodPrompts, verify, reflection_tokens, attempts) -> list[Produced]:
    if verify is None:
        raise ValueError(f"method {REFLECT_RETRY} needs a verifier: it judges the attempt before deciding to retry")
    traces = run_reflect_retry(
        questions, generate, verify, prompts.rrr, reflection_tokens=reflection_tokens, attempts=attempts
    )
    return [
        Produced(
            variant=t.final.variant,
            text=t.final.text,
            n_tokens=t.total_tokens,
            finish_reason=t.final.finish_reason,
            passes=[p.to_dict() for p in t.passes],
            meta=t.meta(),
            verdict=t.final_verdict,
        )
        for t in traces
    ]
