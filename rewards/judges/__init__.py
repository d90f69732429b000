"""Judges: score an extracted answer against its gold (see ``base.py`` for the contract).

``build_judge(cfg.judge, cfg.prompts.judge)`` is how both engines and the evaluation get one.
"""

from __future__ import annotations

import asyncio
from typing import Any

from prompts import DEFAULT_JUDGE
from rewards.judge_kinds import JUDGE_KINDS, LLM_JUDGE_KINDS
from rewards.judges.base import ConcurrentJudge, Judge, JudgeItem, JudgeResult, score_sync
from rewards.judges.countdown_judge import CountdownJudge
from rewards.judges.hybrid import HybridJudge, gold_is_math
from rewards.judges.judge_reply import parse_score
from rewards.judges.openai_judge import OpenAIJudge
from rewards.judges.rule import RuleJudge, parses_as_math
from rewards.judges.score_cache import JudgeStats


def build_judge(cfg: Any, judge_prompt: str = DEFAULT_JUDGE) -> Judge:
    """The judge ``cfg.kind`` names. ``cfg`` is a ``pasr.judge`` section (the fields of
    ``recipe.pasr_config.JudgeConfig``; rewards/ imports no recipe code). ``judge_prompt`` is a
    template name or path (resolved with ``prompts.load_prompt``); the rule judge ignores it."""
    if cfg.kind == "rule":
        return RuleJudge(timeout_s=cfg.rule_timeout_s)
    if cfg.kind == "countdown":  # the exact equation verifier (Reflect, Retry, Reward's task)
        return CountdownJudge()
    if cfg.kind not in JUDGE_KINDS:
        raise ValueError(f"judge kind must be one of {', '.join(JUDGE_KINDS)}, got {cfg.kind!r}")
    if not (cfg.base_url and cfg.model):
        raise ValueError(f"judge kind {cfg.kind!r} needs judge.base_url and judge.model")
    from prompts import load_prompt

    llm = OpenAIJudge.from_config(cfg, template=load_prompt(judge_prompt))
    if cfg.kind == "openai":
        return llm
    return HybridJudge(rule=RuleJudge(timeout_s=cfg.rule_timeout_s), llm=llm)


def ping_judge(cfg: Any, judge_prompt: str = DEFAULT_JUDGE) -> str | None:
    """Why the LLM judge ``cfg`` names cannot score, from one request with the run's own
    endpoint, model, prompt and settings (down, a wrong model name, a template without its
    placeholders, a reply with no score), or None; None without a request for a judge that
    needs no endpoint (rule, countdown). Both engines call it at start, so a judge that is not
    there stops the run in one line before any training, not at the first RL step."""
    if cfg.kind not in LLM_JUDGE_KINDS:
        return None
    try:
        judge = build_judge(cfg, judge_prompt)
    except (ValueError, KeyError, FileNotFoundError) as exc:
        return f"the LLM judge cannot be made: {exc.args[0] if exc.args else exc}"
    llm = judge.llm if isinstance(judge, HybridJudge) else judge
    why = asyncio.run(llm.ping())  # from synchronous code: each engine's start
    if why is None:
        return None
    return (
        f"the LLM judge at {llm.base_url} (pasr.judge.model={llm.model}) did not score a test item: {why}; "
        "start it (e.g. vllm serve MODEL) or fix pasr.judge.base_url / pasr.judge.model"
    )


__all__ = [
    "JUDGE_KINDS",
    "ConcurrentJudge",
    "CountdownJudge",
    "HybridJudge",
    "Judge",
    "JudgeItem",
    "JudgeResult",
    "JudgeStats",
    "OpenAIJudge",
    "RuleJudge",
    "build_judge",
    "gold_is_math",
    "parse_score",
    "parses_as_math",
    "ping_judge",
    "score_sync",
]
