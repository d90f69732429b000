"""The evaluated methods: how one sample's final response is produced from its question.

* ``plain``: the plain system prompt, through the model's chat template, one pass;
* ``pasr``: the refine system prompt (``<think>``/``<refine>``/``<answer>``), one pass. The
  reference repository's evaluation applied neither a system prompt nor the chat template;
  we apply both, the same way training does;
* ``self-refine``: the post-hoc baseline (:mod:`eval.self_refine`), up to four
  feedback/refine rounds after a plain answer.

Each method takes a batch of questions and a generator callable and returns one
:class:`Produced` per question: the response that is scored, the output tokens of all its
passes, and each pass for the record.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from data.records import PLAIN, REFINE
from eval.self_refine import MAX_ROUNDS, Generator, SelfRefinePrompts, run_self_refine
from prompts import PromptSet, prompt_version

METHODS = ("plain", "pasr", "self-refine")


@dataclass
class Produced:
    variant: str  # plain | refine | self_refine:<pass that gave the final answer>
    text: str  # the final response, the one extracted and judged
    n_tokens: int  # output tokens of every pass
    finish_reason: str | None
    passes: list[dict] = field(default_factory=list)  # self-refine: every pass (variant, text, tokens)
    meta: dict = field(default_factory=dict)  # self-refine: rounds, stop


@dataclass(frozen=True)
class MethodPrompts:
    """The prompt texts every method may use, loaded once per run."""

    prompts: PromptSet
    self_refine: SelfRefinePrompts

    @classmethod
    def load(cls, refine: str = "refine_system", plain: str = "plain_system", judge: str = "judge_binary"):
        return cls(PromptSet.load(refine=refine, plain=plain, judge=judge), SelfRefinePrompts.load(plain=plain))

    def version(self, method: str) -> str:
        """Hash of the prompts ``method`` uses (recorded, and part of the run fingerprint)."""
        if method == "plain":
            return prompt_version(self.prompts.plain)
        if method == "pasr":
            return prompt_version(self.prompts.refine)
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
) -> list[Produced]:
    """One :class:`Produced` per question, in order."""
    check_method(method)
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
