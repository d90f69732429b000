"""Self-Refine (Madaan et al., 2023), the post-hoc refinement baseline of the PASR paper.

A question is first answered with the plain prompt. Then, for up to ``max_rounds`` rounds, the
model gives feedback on its latest answer and, unless the feedback ends the loop, writes an
improved answer. Every feedback and refine prompt carries the whole history of earlier answers
and feedback. The loop stops early for a question when its feedback says ``NO CHANGE NEEDED``
(the line the feedback template asks for); the final answer is then the latest one.

Every pass's generated tokens count toward the sample's output tokens, which is how the paper
compares Self-Refine's cost with PASR's.

The loop runs over a *generator callable* (a list of chats in, one completion per chat out),
batched across questions: each round makes one call for all still-active questions' feedback
prompts and one for their refine prompts. Tests drive it with a scripted generator.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from prompts import build_chat, load_prompt, prompt_version

MAX_ROUNDS = 4
NO_CHANGE = "NO CHANGE NEEDED"  # the stop line the feedback template asks for (matched in capitals)
VARIANT_PREFIX = "self_refine:"

# History entry templates. They belong in prompts/templates (self_refine_history_attempt.txt and
# self_refine_history_feedback.txt); these built-in texts are used until those files exist.
_HISTORY_TEMPLATES = {
    "self_refine_history_attempt": "Attempt {n}:\n{text}",
    "self_refine_history_feedback": "Feedback on attempt {n}:\n{text}",
}

_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


def fill(template: str, **values: str) -> str:
    """Substitute the ``{name}`` placeholders given (``question``, ``history``, ``n``, ``text``;
    the self-scoring template's ``answer``) in one pass; any other ``{...}`` stays as written.
    Not ``str.format``: templates hold literal braces (``\\boxed{}``), and a question's own
    braces stay untouched."""
    return _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0), template)


def _load_or_builtin(name: str) -> str:
    try:
        return load_prompt(name)
    except (KeyError, FileNotFoundError):
        return _HISTORY_TEMPLATES[name]


@dataclass(frozen=True)
class SelfRefinePrompts:
    answer_system: str  # system prompt of the first answer (the plain prompt)
    feedback: str  # template with {question} and {history}
    refine: str  # template with {question} and {history}
    attempt_entry: str = _HISTORY_TEMPLATES["self_refine_history_attempt"]
    feedback_entry: str = _HISTORY_TEMPLATES["self_refine_history_feedback"]

    @classmethod
    def load(
        cls,
        plain: str | None = None,
        feedback: str = "self_refine_feedback",
        refine: str = "self_refine_refine",
    ) -> SelfRefinePrompts:
        """``plain``: the first answer's system prompt; None is ``pasr.prompts.plain``'s default."""
        from recipe.pasr_config import PromptsConfig

        return cls(
            answer_system=load_prompt(plain or PromptsConfig.plain),
            feedback=load_prompt(feedback),
            refine=load_prompt(refine),
            attempt_entry=_load_or_builtin("self_refine_history_attempt"),
            feedback_entry=_load_or_builtin("self_refine_history_feedback"),
        )

    def version(self) -> str:
        return prompt_version(
            "\x00".join([self.answer_system, self.feedback, self.refine, self.attempt_entry, self.feedback_entry])
        )


@dataclass
class Pass:
    name: str  # "answer" | "feedback:<round>" | "refine:<round>" | "score:<round>" (--select best)
    text: str
    n_tokens: int
    finish_reason: str | None = None

    prefix: ClassVar[str] = VARIANT_PREFIX  # a method's passes share it (best-of-n: "best_of_n:")

    @property
    def variant(self) -> str:
        return self.prefix + self.name

    @property
    def is_answer(self) -> bool:
        return self.name == "answer" or self.name.startswith("refine:")

    def to_dict(self) -> dict:
        return {
            "variant": self.variant,
            "text": self.text,
            "tokens": self.n_tokens,
            "finish_reason": self.finish_reason,
        }


@dataclass
class SelfRefineTrace:
    question: str
    passes: list[Pass] = field(default_factory=list)
    stop: str = "max_rounds"  # no_change | max_rounds

    @property
    def final(self) -> Pass:
        """The latest answer (the first answer or the last refine pass): what gets scored."""
        return next(p for p in reversed(self.passes) if p.is_answer)

    @property
    def answers(self) -> list[Pass]:
        """Every answer in order, the first and then each refine: what ``--select best`` chooses
        from (:mod:`eval.self_score`)."""
        return [p for p in self.passes if p.is_answer]

    @property
    def total_tokens(self) -> int:
        return sum(p.n_tokens for p in self.passes)

    @property
    def rounds(self) -> int:
        """Feedback passes made."""
        return sum(1 for p in self.passes if p.name.startswith("feedback:"))

    def history(self, prompts: SelfRefinePrompts) -> str:
        entries, n = [], 0
        for p in self.passes:
            if p.is_answer:
                n += 1
                entries.append(fill(prompts.attempt_entry, n=str(n), text=p.text.strip()))
            else:
                entries.append(fill(prompts.feedback_entry, n=str(n), text=p.text.strip()))
        return "\n\n".join(entries) + "\n"


def says_no_change(feedback: str) -> bool:
    """True when the feedback declares the latest answer final. Matched in capitals, as the
    template asks, so prose such as "no change needed in step 2" does not end the loop."""
    return NO_CHANGE in feedback


# A list of chats in, one completion per chat out (each with ``.text``, ``.n_tokens`` and
# optionally ``.finish_reason``), e.g. ``lambda chats: backend.generate(chats, params)``.
Generator = Callable[[list[list[dict]]], Sequence]


def _passes(name: str, outs: Sequence) -> list[Pass]:
    return [Pass(name, o.text, int(o.n_tokens), getattr(o, "finish_reason", None)) for o in outs]


def call(generate: Generator, chats: list[list[dict]], max_new_tokens: int | None = None) -> Sequence:
    """``generate(chats)``, checked for one completion per chat. ``max_new_tokens`` is passed on
    only when given (a pass with its own limit, such as a scoring pass), so a generator that
    takes chats alone still works for every other pass."""
    if not chats:
        return []
    outs = generate(chats) if max_new_tokens is None else generate(chats, max_new_tokens=max_new_tokens)
    if len(outs) != len(chats):
        raise RuntimeError(f"generator returned {len(outs)} completions for {len(chats)} chats")
    return outs


def run_self_refine(
    questions: Sequence[str],
    generate: Generator,
    prompts: SelfRefinePrompts,
    max_rounds: int = MAX_ROUNDS,
) -> list[SelfRefineTrace]:
    """Self-Refine for every question, batched: at most ``1 + 2 * max_rounds`` generator calls."""
    if max_rounds < 0:
        raise ValueError(f"max_rounds must be >= 0, got {max_rounds}")
    traces = [SelfRefineTrace(q) for q in questions]
    if not traces:
        return traces
    first = call(generate, [build_chat(prompts.answer_system, q) for q in questions])
    for trace, p in zip(traces, _passes("answer", first)):
        trace.passes.append(p)

    active = list(range(len(traces)))
    for rnd in range(1, max_rounds + 1):
        if not active:
            break
        chats = [
            build_chat(None, fill(prompts.feedback, question=traces[i].question, history=traces[i].history(prompts)))
            for i in active
        ]
        still = []
        for i, p in zip(active, _passes(f"feedback:{rnd}", call(generate, chats))):
            traces[i].passes.append(p)
            if says_no_change(p.text):
                traces[i].stop = "no_change"
            else:
                still.append(i)
        if not still:
            break
        chats = [
            build_chat(None, fill(prompts.refine, question=traces[i].question, history=traces[i].history(prompts)))
            for i in still
        ]
        for i, p in zip(still, _passes(f"refine:{rnd}", call(generate, chats))):
            traces[i].passes.append(p)
        active = still
    return traces
