"""The judge kinds, in one place: what ``pasr.judge.kind`` (both engines) and ``pasr eval --judge``
accept and what :func:`rewards.judges.build_judge` builds.

A module of its own outside ``rewards.judges``, so that the configs can check a kind without
importing the judges themselves (the LLM judge's HTTP client costs a third of a second, which the
verl driver's no-GPU answer should not pay).
"""

from __future__ import annotations

# rule: Math-Verify and exact match; openai: an LLM judge behind an OpenAI-compatible endpoint;
# hybrid: rule for math golds, the LLM for the rest; countdown: checks a Countdown equation
JUDGE_KINDS = ("rule", "openai", "hybrid", "countdown")
LLM_JUDGE_KINDS = ("openai", "hybrid")  # the kinds that send a judge prompt to an endpoint
