"""What the supervised warm-up trains on: (chat, prefill, target response) triples.

The warm-up teaches the format the RL phase is rewarded in, so what it shows follows the
method and the data:

* **PASR** (synthetic arithmetic, GSM8K, files): tagged arithmetic traces with the refine and
  plain system prompts and the ``<think>`` prefill (:mod:`data.warmup_traces`);
* **Countdown** (``data.source=countdown``): traces built from the reference solutions
  (:mod:`data.countdown_traces`) shown with RRR's first-attempt prompt, no prefill: RRR's
  attempts and retries answer that prompt; ``warmup.reflection_fraction`` of them show the
  reflection prompt on a failed attempt with a reflection that checks it instead, so the
  model still writes reflections, not equations, when asked to reflect, and
  ``warmup.retry_fraction`` the retry prompt answered with the reference solution;
* **RRR on another source**: the arithmetic traces without a refine, shown with the attempt
  prompt (the task of the data, the prompt of the method).

Problems come from the train split with ``warmup.seed``, so the warm-up never sees a held-out
problem.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from data.records import PLAIN, REFINE
from prompts import PromptSet
from recipe.local_engine.config import LocalTrainConfig
from recipe.local_engine.rollout import THINK_PREFILL


@dataclass(frozen=True)
class WarmupExample:
    """One supervised example: the chat shown, the assistant prefill that belongs to the prompt
    (rollouts start with it), and the full target response (prefill included)."""

    chat: list[dict[str, str]]
    prefill: str
    trace: str

    @property
    def target(self) -> str:
        """The part of the trace the model is trained to write."""
        return self.trace[len(self.prefill) :]


def uses_attempt_prompt(cfg: LocalTrainConfig) -> bool:
    """Countdown data, or the RRR method: the warm-up answers RRR's attempt prompt."""
    return cfg.data.source == "countdown" or cfg.method == "rrr"


def warmup_examples(cfg: LocalTrainConfig, prompts: PromptSet, rrr_prompts=None) -> list[WarmupExample]:
    """The warm-up set of this config (``rrr_prompts``, a :class:`recipe.rrr_step.RrrPrompts`,
    is needed exactly when :func:`uses_attempt_prompt`)."""
    w, d = cfg.warmup, cfg.data
    if d.source == "countdown":
        return _countdown_examples(cfg, rrr_prompts)

    from data.synthetic import generate_problems
    from data.warmup_traces import build_samples, build_trace

    problems = generate_problems(w.n_traces, seed=w.seed, difficulty=d.difficulty, split="train")
    if cfg.method == "rrr":
        rng = random.Random(f"{w.seed}:attempt-traces")
        return [WarmupExample(rrr_prompts.attempt_chat(p.question), "", build_trace(p, rng, refine=False)) for p in problems]
    # PASR: the prefill is part of the prompt here too, or the model learns to write a second "<think>"
    prefill = THINK_PREFILL if cfg.rollout.prefill_think else ""
    chat = {REFINE: prompts.refine_chat, PLAIN: prompts.plain_chat}
    samples = build_samples(problems, w.refine_fraction, w.refine_style, w.seed, w.plain_fraction)
    return [WarmupExample(chat[s.variant](s.problem.question), prefill, s.trace) for s in samples]


def _countdown_examples(cfg: LocalTrainConfig, rrr_prompts) -> list[WarmupExample]:
    """Attempt-prompt traces; ``warmup.reflection_fraction`` of the problems show the
    reflection prompt on a failed attempt and a checked reflection instead, and
    ``warmup.retry_fraction`` the retry prompt (that attempt and reflection in context) answered
    with the reference solution's trace: the retry is a prompt of its own, longer than the
    attempt's, and untaught the model answered it with neither the format nor the numbers
    (0 of 89 greedy retries right after an attempt-only warm-up). RRR never trains retry tokens,
    so what a retry can do comes from here; what RRR learns is which reflection makes it succeed."""
    from data.countdown import generate_problems
    from data.countdown_traces import build_countdown_trace, build_reflection_trace

    w, d = cfg.warmup, cfg.data
    rng = random.Random(f"{w.seed}:reflection")
    out = []
    for p in generate_problems(w.n_traces, seed=w.seed, difficulty=d.difficulty, split="train"):
        draw = rng.random()
        shown = build_reflection_trace(p, rng) if draw < w.reflection_fraction + w.retry_fraction else None
        if shown is None:
            out.append(WarmupExample(rrr_prompts.attempt_chat(p.question), "", build_countdown_trace(p)))
        elif draw < w.reflection_fraction:
            out.append(WarmupExample(rrr_prompts.reflection_chat(p.question, shown.attempt), "", shown.reflection))
        else:
            chat = rrr_prompts.retry_chat(p.question, shown.attempt, shown.reflection)
            out.append(WarmupExample(chat, "", build_countdown_trace(p)))
    return out
