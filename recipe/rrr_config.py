"""The training method switch and the typed ``rrr.*`` config, shared by both engines.

``method: pasr`` (the default) trains Proactive Self-Refinement; ``method: rrr`` trains
Reflect, Retry, Reward (:mod:`recipe.rrr_step`) on the same data, judges, records, metrics and
checkpoints. Both engines read ``method`` and the ``rrr:`` section through
:func:`load_rrr_config`, so an unknown key fails the same way in either.

RRR's judge must be binary and exact: the recipe uses it on Countdown (``data.source=countdown``
with ``pasr.judge.kind=countdown``) and on math with the rule judge.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import OmegaConf

from recipe.pasr_config import ConfigError, merge_reporting, prompt_problems

METHODS = ("pasr", "rrr")
JUDGES = ("rule", "countdown")  # binary and exact: a reflection's reward is whether its retry succeeded


@dataclass
class RrrPromptsConfig:
    """Template names (``prompts/templates``) or paths to ``.txt`` files."""

    attempt: str = "rrr_attempt"  # system prompt of first attempts and retries
    reflect: str = "rrr_reflect"  # {question} {attempt} {feedback}
    retry: str = "rrr_retry"  # {question} {attempt} {feedback} {reflection}
    feedback: str = "rrr_feedback"  # the binary feedback a reflection is given


@dataclass
class RrrConfig:
    n_reflections: int = 4  # reflections per failed first attempt: the GRPO group
    max_reflection_tokens: int = 128  # a reflection is a few sentences
    max_retry_tokens: int | None = None  # None: the rollout's max_new_tokens
    prompts: RrrPromptsConfig = field(default_factory=RrrPromptsConfig)

    def problems(self) -> list[str]:
        """Every problem of the section at once, each naming its ``rrr.*`` key."""
        problems = []
        if self.n_reflections < 1:
            problems.append(f"rrr.n_reflections must be >= 1, got {self.n_reflections}")
        if self.max_reflection_tokens < 1:
            problems.append(f"rrr.max_reflection_tokens must be >= 1, got {self.max_reflection_tokens}")
        if self.max_retry_tokens is not None and self.max_retry_tokens < 1:
            problems.append(f"rrr.max_retry_tokens must be >= 1 or null, got {self.max_retry_tokens}")
        return problems + prompt_problems(self.prompts, "rrr.prompts")

    def validate(self) -> RrrConfig:
        if problems := self.problems():
            raise ConfigError("; ".join(problems))
        return self

    def load_prompts(self):
        """The :class:`recipe.rrr_step.RrrPrompts` these names point to."""
        from recipe.rrr_step import RrrPrompts

        p = self.prompts
        return RrrPrompts.load(attempt=p.attempt, reflect=p.reflect, retry=p.retry, feedback=p.feedback)


def method_problem(method: str) -> str | None:
    """Why ``method`` is not a training method, or None."""
    return None if method in METHODS else f"method must be one of {' | '.join(METHODS)}, got {method!r}"


def check_method(method: str) -> str:
    if problem := method_problem(method):
        raise ConfigError(problem)
    return method


def judge_problem(kind: str) -> str | None:
    """Why ``pasr.judge.kind`` cannot score RRR (None when it can); both engines refuse the run."""
    if kind in JUDGES:
        return None
    return (
        f"method=rrr needs a binary, exact judge (a reflection's reward is its retry's success): "
        f"pasr.judge.kind={kind}; use countdown (Countdown data) or rule (math)"
    )


def load_rrr_config(section: Any) -> RrrConfig:
    """A validated :class:`RrrConfig` from an ``rrr:`` DictConfig/dict (or None for defaults)."""
    merged, problems = merge_reporting(RrrConfig, section, "rrr")
    cfg: RrrConfig = OmegaConf.to_object(merged)  # type: ignore[assignment]
    problems += cfg.problems()
    if problems:
        raise ConfigError("; ".join(problems))
    return cfg
