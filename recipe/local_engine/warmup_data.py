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
* **RRR on the synthetic arithmetic**: the arithmetic traces without a refine, shown with the
  attempt prompt (the task of the data, the prompt of the method), and the same reflection and
  retry shares as Countdown's, with a failed attempt that slipped on one step and a reflection
  that redoes that step digit by digit (:mod:`data.synthetic_reflection_traces`).

Problems come from the train split with ``warmup.seed``, so the warm-up never sees a held-out
problem.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from data.records import PLAIN, REFINE
from prompts import THINK_PREFILL, PromptSet
from recipe.local_engine.config import LocalTrainConfig


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
        from data.countdown import generate_problems as countdown_problems
        from data.countdown_traces import build_countdown_trace, build_reflection_trace

        problems = countdown_problems(w.n_traces, seed=w.seed, difficulty=d.difficulty, split="train")
        return _rrr_examples(cfg, rrr_prompts, problems, build_countdown_trace, build_reflection_trace)

    from data.synthetic import generate_problems
    from data.warmup_traces import build_samples, build_trace

    problems = generate_problems(w.n_traces, seed=w.seed, difficulty=d.difficulty, split="train")
    if cfg.method == "rrr":
        from data.synthetic_reflection_traces import build_reflection_trace as synthetic_reflection

        def attempt(p):  # the plain steps; build_trace draws nothing without a refine
            return build_trace(p, random.Random(0), refine=False)

        return _rrr_examples(cfg, rrr_prompts, problems, attempt, synthetic_reflection)
    # PASR: the prefill is part of the prompt here too, or the model learns to write a second "<think>"
    prefill = THINK_PREFILL if cfg.pasr.prefill_think else ""
    chat = {REFINE: prompts.refine_chat, PLAIN: prompts.plain_chat}
    samples = build_samples(problems, w.refine_fraction, w.refine_style, w.seed, w.plain_fraction)
    return [WarmupExample(chat[s.variant](s.problem.question), prefill, s.trace) for s in samples]


def _rrr_examples(cfg: LocalTrainConfig, rrr_prompts, problems, attempt_trace, reflection_trace) -> list[WarmupExample]:
    """Attempt-prompt traces (``attempt_trace(problem)``); ``warmup.reflection_fraction`` of the
    problems show the reflection prompt on a failed attempt and a checked reflection instead
    (``reflection_trace(problem, rng)``: ``.attempt``, ``.reflection``, or None), and
    ``warmup.retry_fraction`` the retry prompt (that attempt and reflection in context) answered
    with the problem's attempt trace: the retry is a prompt of its own, longer than the
    attempt's, and untaught the model answered it with neither the format nor the numbers
    (Countdown: 0 of 89 greedy retries right after an attempt-only warm-up). RRR never trains
    retry tokens, so what a retry can do comes from here; what RRR learns is which reflection
    makes it succeed."""
    w = cfg.warmup
    rng = random.Random(f"{w.seed}:reflection")
    out = []
    for p in problems:
        draw = rng.random()
        shown = reflection_trace(p, rng) if draw < w.reflection_fraction + w.retry_fraction else None
        if shown is None:
            out.append(WarmupExample(rrr_prompts.attempt_chat(p.question), "", attempt_trace(p)))
        elif draw < w.reflection_fraction:
            out.append(WarmupExample(rrr_prompts.reflection_chat(p.question, shown.attempt), "", shown.reflection))
        else:
            chat = rrr_prompts.retry_chat(p.question, shown.attempt, shown.reflection)
            out.append(WarmupExample(chat, "", attempt_trace(p)))
    return out
