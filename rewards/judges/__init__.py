"""Judges: score an extracted answer against its gold (see ``base.py`` for the contract).

``build_judge(cfg.judge, cfg.prompts.judge)`` is how both engines and the evaluation get one.
"""

from __future__ import annotations

from typing import Any

from rewards.judge_kinds import JUDGE_KINDS
from rewards.judges.base import ConcurrentJudge, Judge, JudgeItem, JudgeResult, score_sync
from rewards.judges.countdown_judge import CountdownJudge
from rewards.judges.hybrid import HybridJudge, gold_is_math
from rewards.judges.openai_judge import JudgeStats, OpenAIJudge, parse_score
from rewards.judges.rule import RuleJudge, parses_as_math


def build_judge(cfg: Any, judge_prompt: str = "judge_continuous") -> Judge:
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
    "score_sync",
]
