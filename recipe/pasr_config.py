"""Typed ``pasr.*`` config shared by both engines and the evaluation.

The local engine's YAML and the verl Hydra config both carry a ``pasr:`` section with exactly
these keys; :func:`load_pasr_config` validates a section against the dataclasses, so an unknown
or mistyped key fails with a message that names it instead of being silently ignored.

This is the one place the defaults live: config files and run scripts set only what differs
(the verl config gets these dataclasses as its schema, ``recipe.verl_engine.config``), and the
reward functions in ``rewards/`` take every value as an argument.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from recipe.retired_keys import is_retired_key, retired_settings
from rewards.judge_kinds import JUDGE_KINDS
from rewards.pasr import RewardWeights
from rewards.refine import COMPARE_MODES

DRAFT_CREDIT_MODES = ("outcome", "value")  # pasr.draft_credit; see recipe.draft_credit


@dataclass
class JudgeConfig:
    kind: str = "rule"  # rule | openai | hybrid | countdown (the exact Countdown verifier)
    base_url: str | None = None  # OpenAI-compatible endpoint, e.g. http://judge:8000/v1 (vllm serve)
    model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"  # the key is read from this environment variable
    concurrency: int = 64
    timeout_s: float = 30.0
    retries: int = 3
    backoff_s: float = 0.5
    cache_path: str | None = None  # optional JSONL cache on disk; an in-memory cache is always on
    rule_timeout_s: int = 5  # Math-Verify parse/verify bound
    max_tokens: int | None = None  # cap on the judge's reply length
    # extra request fields, e.g. {chat_template_kwargs: {enable_thinking: false}} for a Qwen3 judge on vLLM
    extra_body: dict[str, Any] = field(default_factory=dict)


@dataclass
class PromptsConfig:
    refine: str = "refine_system"  # built-in template name or a path to a .txt file
    plain: str = "plain_system"
    judge: str = "judge_continuous"


@dataclass
class PasrConfig:
    n_refine: int = 8  # group size: refine-prompted rollouts per query (trained on)
    n_plain: int = 8  # plain-prompted rollouts per query (the refine reward's baseline; never trained on)
    tie_value: float = -0.5  # refine reward of a tie (paper: -0.5; 0.0 = neutral); see rewards/refine.py
    zeta: float = 1e-6  # tie tolerance on accuracy differences
    # refine reward of a rollout whose refine spans all add nothing, right or wrong (None: the
    # paper, paid like any refine; 0.0: an empty refine is no refine); see rewards/refine.py
    empty_refine_value: float | None = None
    # sign (the paper: +1 better / -1 worse) | margin (acc - baseline: unbiased where the model is
    # right less than half the time); see rewards/refine.py
    refine_compare: str = "sign"
    # outcome (the paper: every token of a response gets its advantage) | value (the draft, the
    # last number before the first refine, never gets an advantage against its own correctness:
    # not positive when wrong, not negative when right; not the paper; math with numeric golds
    # only, elsewhere a no-op); see recipe.draft_credit
    draft_credit: str = "outcome"
    # w_f, w_a, w_r of reward = w_f * format + w_a * acc + w_r * refine
    weights: RewardWeights = field(default_factory=lambda: RewardWeights(format=1.0, acc=1.0, refine=1.0))
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    prompts: PromptsConfig = field(default_factory=PromptsConfig)

    def validate(self) -> "PasrConfig":
        refuse_non_finite(self, "pasr")
        problems = []
        if self.n_refine < 1:
            problems.append(f"pasr.n_refine must be >= 1, got {self.n_refine}")
        if self.n_plain < 1:
            problems.append(f"pasr.n_plain must be >= 1 (the refine reward needs a plain baseline), got {self.n_plain}")
        if self.zeta < 0:
            problems.append(f"pasr.zeta must be >= 0, got {self.zeta}")
        if self.refine_compare not in COMPARE_MODES:
            problems.append(f"pasr.refine_compare must be {' or '.join(COMPARE_MODES)}, got {self.refine_compare!r}")
        if self.draft_credit not in DRAFT_CREDIT_MODES:
            problems.append(f"pasr.draft_credit must be {' or '.join(DRAFT_CREDIT_MODES)}, got {self.draft_credit!r}")
        if self.judge.kind not in JUDGE_KINDS:
            problems.append(f"pasr.judge.kind must be {'|'.join(JUDGE_KINDS)}, got {self.judge.kind!r}")
        if self.judge.kind in ("openai", "hybrid") and not (self.judge.base_url and self.judge.model):
            problems.append(f"pasr.judge.kind={self.judge.kind} needs pasr.judge.base_url and pasr.judge.model")
        if self.judge.concurrency < 1 or self.judge.retries < 0 or self.judge.timeout_s <= 0:
            problems.append("pasr.judge.concurrency must be >= 1, retries >= 0 and timeout_s > 0")
        if problems:
            raise ConfigError("; ".join(problems))
        return self


class ConfigError(ValueError):
    """A config value or key that is not accepted; the message names it."""


def _non_finite_settings(node: Any, prefix: str = "") -> list[str]:
    """``key=value`` for every NaN or infinite float under ``node`` (a config dataclass, and the
    dicts and lists in it), keys spelled as overrides (``pasr.weights.acc=inf``)."""
    if dataclasses.is_dataclass(node):
        items = [(f.name, getattr(node, f.name)) for f in dataclasses.fields(node)]
    elif isinstance(node, Mapping):
        items = list(node.items())
    elif isinstance(node, (list, tuple)):
        items = list(enumerate(node))
    else:
        return [f"{prefix}={node}"] if isinstance(node, float) and not math.isfinite(node) else []
    return [bad for key, value in items for bad in _non_finite_settings(value, f"{prefix}.{key}" if prefix else str(key))]


def refuse_non_finite(config: Any, prefix: str = "") -> None:
    """Raise a :class:`ConfigError` naming every non-finite float of ``config`` at once.

    OmegaConf and Hydra read ``nan`` and ``inf`` as floats, and the range checks of the
    ``validate`` methods are comparisons: ``if x < 0`` lets NaN through (every comparison with NaN
    is false), ``if not x > 0`` lets infinity through. ``algo.lr=inf`` wrote a NaN checkpoint,
    ``pasr.weights.format=nan`` skipped every row and exited 0. Run first, so those checks can
    take every number to be a real one, and over the whole config, so a float key added later is
    covered without a check of its own."""
    bad = _non_finite_settings(config, prefix)
    if bad:
        raise ConfigError(f"not a finite number (NaN or infinity): {', '.join(bad)}")


def unknown_keys(schema: Any, section: Any, prefix: str = "") -> list[str]:
    """Every key of ``section`` (a mapping) that the dataclass ``schema`` does not have, as full
    dotted names with the closest known key, so a config with several typos is fixed in one go
    (OmegaConf's merge stops at the first). A retired key is not listed: it has a message of
    its own (:mod:`recipe.retired_keys`)."""
    import dataclasses
    import difflib
    import typing

    if not dataclasses.is_dataclass(schema) or not isinstance(section, (dict, DictConfig)):
        return []
    hints = typing.get_type_hints(schema if isinstance(schema, type) else type(schema))
    known = {f.name for f in dataclasses.fields(schema)}
    out = []
    for key in section:
        name = f"{prefix}.{key}" if prefix else str(key)
        if key not in known:
            if is_retired_key(name):
                continue
            close = difflib.get_close_matches(str(key), sorted(known), n=1)
            out.append(name + (f" (did you mean {prefix + '.' if prefix else ''}{close[0]}?)" if close else ""))
        else:
            out += unknown_keys(hints.get(key), section[key], name)
    return out


def merge_structured(schema: Any, section: Any, prefix: str) -> DictConfig:
    """Merge ``section`` into the structured ``schema``; retired keys and values
    (:mod:`recipe.retired_keys`) and unknown keys, all of them at once, and wrong types raise
    :class:`ConfigError` naming the full key (``pasr.judge.timout_s``)."""
    problems = retired_settings(section, prefix)
    unknown = unknown_keys(schema, section, prefix)
    if unknown:
        problems.append(f"invalid config key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}: not a known key")
    if problems:
        raise ConfigError("; ".join(problems))
    base = OmegaConf.structured(schema)
    try:
        return OmegaConf.merge(base, section if section is not None else {})
    except OmegaConfBaseException as exc:
        key = getattr(exc, "full_key", None) or ""
        msg = (getattr(exc, "msg", None) or str(exc)).splitlines()[0]
        name = (f"{prefix}.{key}" if prefix else key) if key else prefix
        raise ConfigError(f"invalid config key {name}: {msg}") from None


def load_pasr_config(section: Any) -> PasrConfig:
    """A validated :class:`PasrConfig` from a ``pasr:`` DictConfig/dict (or None for defaults)."""
    merged = merge_structured(PasrConfig, section, "pasr")
    cfg: PasrConfig = OmegaConf.to_object(merged)  # type: ignore[assignment]
    return cfg.validate()
