"""Typed ``pasr.*`` config shared by both engines and the evaluation.

The local engine's YAML and the verl Hydra config both carry a ``pasr:`` section with exactly
these keys; :func:`load_pasr_config` validates a section against the dataclasses, so an unknown
or mistyped key fails with a message that names it instead of being silently ignored.

This is the one place the defaults live, the paper's, for both engines and ``pasr eval``: config
files, presets (the local engine's ``cpu``, recipe/config/local_cpu.yaml) and run scripts set
only what differs (the verl config gets these dataclasses as its schema,
``recipe.verl_engine.config``), and the reward functions in ``rewards/`` take every value as an
argument.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException

from prompts.loader import DEFAULT_JUDGE, DEFAULT_PLAIN, DEFAULT_REFINE
from recipe.judge_errors import (
    DEFAULT_MAX_JUDGE_ERROR_RATE,
    max_judge_error_rate_problem,
)
from recipe.judge_errors import (
    SETTING as MAX_JUDGE_ERROR_RATE,
)
from recipe.retired_keys import is_retired_key, retired_settings
from rewards.judge_kinds import JUDGE_KINDS, LLM_JUDGE_KINDS
from rewards.pasr import RewardWeights
from rewards.refine import COMPARE_MODES


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
    refine: str = DEFAULT_REFINE  # built-in template name or a path to a .txt file
    plain: str = DEFAULT_PLAIN
    judge: str = DEFAULT_JUDGE


@dataclass
class PasrConfig:
    """``pasr.*``: the paper's settings are the defaults; each alternative says when to use it
    (rewards/refine.py; the CPU preset recipe/config/local_cpu.yaml sets them for a 135M model)."""

    n_refine: int = 8  # group size: refine-prompted rollouts per query (trained on)
    n_plain: int = 8  # plain-prompted rollouts per query (the refine reward's baseline; never trained on)
    # refine reward of a tie (the paper: -0.5). 0.0: a neutral tie, for a model that always (or
    # never) solves many training questions, where -0.5 trains refining away
    tie_value: float = -0.5
    zeta: float = 1e-6  # tie tolerance on accuracy differences (widen it for a continuous judge)
    # refine reward of a rollout whose refine spans all only restate, right or wrong (None: the
    # paper, paid like any refine). 0.0: an empty refine is no refine, for a model that learns to
    # restate a step instead of checking it
    empty_refine_value: float | None = None
    # sign (the paper: +1 better / -1 worse) | margin (acc - baseline), for a model right less
    # than half the time, where the sign's mean punishes refining whatever it does
    refine_compare: str = "sign"
    # w_f, w_a, w_r of reward = w_f * format + w_a * acc + w_r * refine
    weights: RewardWeights = field(default_factory=lambda: RewardWeights(format=1.0, acc=1.0, refine=1.0))
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    # stop the run when the judge failed on more than this fraction of a training step's
    # rollouts (after dumping them) instead of training on masked rows; 1.0 never stops
    # (recipe/judge_errors.py)
    max_judge_error_rate: float = DEFAULT_MAX_JUDGE_ERROR_RATE
    prompts: PromptsConfig = field(default_factory=PromptsConfig)
    # start PASR's rollouts (refine and plain, and the evaluations) with "<think>" already in the
    # prompt (prompts.THINK_PREFILL), in both engines. Off by default: the paper's model writes the
    # tag itself, and a model that does so after a prefill writes a second one (a format failure).
    # The cpu preset turns it on: its warm-up teaches the format with the prefill, and a model warmed
    # up with it mostly does not open its think block without it (demo warm-up: 61% -> 10% right)
    prefill_think: bool = False

    def problems(self) -> list[str]:
        """Every problem of the section at once (non-finite numbers, ranges, prompts), each
        naming its ``pasr.*`` key; empty when the section runs."""
        return non_finite_problems(self, "pasr") + self.value_problems()

    def value_problems(self) -> list[str]:
        """:meth:`problems` without the non-finite check (a whole config runs that once)."""
        problems = []
        if self.n_refine < 1:
            problems.append(f"pasr.n_refine must be >= 1, got {self.n_refine}")
        if self.n_plain < 1:
            problems.append(f"pasr.n_plain must be >= 1 (the refine reward needs a plain baseline), got {self.n_plain}")
        if self.zeta < 0:
            problems.append(f"pasr.zeta must be >= 0, got {self.zeta}")
        if self.refine_compare not in COMPARE_MODES:
            problems.append(f"pasr.refine_compare must be {' or '.join(COMPARE_MODES)}, got {self.refine_compare!r}")
        if self.judge.kind not in JUDGE_KINDS:
            problems.append(f"pasr.judge.kind must be {'|'.join(JUDGE_KINDS)}, got {self.judge.kind!r}")
        if self.judge.kind in LLM_JUDGE_KINDS and not (self.judge.base_url and self.judge.model):
            problems.append(f"pasr.judge.kind={self.judge.kind} needs pasr.judge.base_url and pasr.judge.model")
        if self.judge.concurrency < 1:
            problems.append(f"pasr.judge.concurrency must be >= 1, got {self.judge.concurrency}")
        if self.judge.retries < 0:
            problems.append(f"pasr.judge.retries must be >= 0, got {self.judge.retries}")
        if not self.judge.timeout_s > 0:
            problems.append(f"pasr.judge.timeout_s must be > 0, got {self.judge.timeout_s}")
        if problem := max_judge_error_rate_problem(MAX_JUDGE_ERROR_RATE, self.max_judge_error_rate):
            problems.append(problem)
        problems += prompt_problems(self.prompts, "pasr.prompts")
        default_judge_prompt = PromptsConfig.judge
        if (
            self.judge.kind in JUDGE_KINDS
            and self.judge.kind not in LLM_JUDGE_KINDS
            and self.prompts.judge != default_judge_prompt
        ):
            problems.append(
                f"pasr.prompts.judge={self.prompts.judge} has no effect with pasr.judge.kind={self.judge.kind}: "
                f"only an LLM judge ({', '.join(LLM_JUDGE_KINDS)}) sends a judge prompt; drop it, "
                "or set pasr.judge.kind=openai with pasr.judge.base_url and pasr.judge.model"
            )
        return problems

    def validate(self) -> PasrConfig:
        if problems := self.problems():
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
    return [
        bad for key, value in items for bad in _non_finite_settings(value, f"{prefix}.{key}" if prefix else str(key))
    ]


def non_finite_problems(config: Any, prefix: str = "") -> list[str]:
    """The refusal of every non-finite float of ``config`` (a config dataclass) in one
    problem, or none.

    OmegaConf and Hydra read ``nan`` and ``inf`` as floats, and the range checks of the
    ``problems`` methods are comparisons: ``if x < 0`` lets NaN through (every comparison with NaN
    is false), ``if not x > 0`` lets infinity through. ``algo.lr=inf`` wrote a NaN checkpoint,
    ``pasr.weights.format=nan`` skipped every row and exited 0. Over the whole config, so a float
    key added later is covered without a check of its own."""
    bad = _non_finite_settings(config, prefix)
    return [f"not a finite number (NaN or infinity): {', '.join(bad)}"] if bad else []


def refuse_non_finite(config: Any, prefix: str = "") -> None:
    """Raise a :class:`ConfigError` naming every non-finite float of ``config`` at once
    (:func:`non_finite_problems`)."""
    if problems := non_finite_problems(config, prefix):
        raise ConfigError(problems[0])


def prompt_problems(prompts: Any, prefix: str) -> list[str]:
    """Why each template of a prompts section (a dataclass of role -> name or path) cannot be
    used: an unknown name, a missing file, a file that is not UTF-8 text. Checked with the config,
    so a misspelt name fails before the run starts, not after its warm-up."""
    from prompts.loader import prompt_problem

    return [
        f"{prefix}.{f.name}={getattr(prompts, f.name)}: {why}"
        for f in dataclasses.fields(prompts)
        if (why := prompt_problem(str(getattr(prompts, f.name))))
    ]


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


MISSING_VALUE = "???"  # OmegaConf's mark of a value still to be given


def _dotted(prefix: str, path: tuple) -> str:
    return ".".join([prefix, *map(str, path)] if prefix else map(str, path))


def _leaves(node: Any, path: tuple = ()) -> list[tuple[tuple, Any]]:
    """``(key path, value)`` of every leaf of nested mappings (an empty mapping is a leaf)."""
    if isinstance(node, Mapping) and node:
        return [leaf for key, value in node.items() for leaf in _leaves(value, (*path, key))]
    return [(path, node)]


def _nested(path: tuple, value: Any) -> Any:
    for key in reversed(path):
        value = {key: value}
    return value


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (OmegaConf's ``msg`` where it has one), for a
    one-line config error."""
    return (str(getattr(exc, "msg", None) or exc).strip().splitlines() or [type(exc).__name__])[0]


def _unresolved(raw: Any, exc: BaseException) -> str:
    """Why the interpolation ``raw`` does not resolve, in words (OmegaConf's, or for an unset
    environment variable what to do about it)."""
    unset = re.search(r"Environment variable '([^']+)' not found", first_line(exc))
    if unset:
        return (
            f"the environment variable {unset[1]} is not set "
            f"(set it, or give a default: ${{oc.env:{unset[1]},DEFAULT}})"
        )
    return first_line(exc)


def missing_value_problems(section: Any, prefix: str = "") -> list[str]:
    """The refusal of every ``???`` (a value still to be given) in ``section``. Looked for in
    each layer before layers are merged: a merge keeps the value below a ``???`` silently."""
    plain = OmegaConf.to_container(section, resolve=False) if OmegaConf.is_config(section) else (section or {})
    return [
        f"{_dotted(prefix, path)}={MISSING_VALUE}: give it a value"
        for path, value in _leaves(plain)
        if isinstance(value, str) and value == MISSING_VALUE
    ]


def _resolved(node: DictConfig | ListConfig, prefix: str) -> tuple[Any, list[str]]:
    """``node`` as plain data with every ``${...}`` resolved (and type-checked by the schema),
    and the problem of each value that is not there: ``???`` or an interpolation that does not
    resolve (an unset ``${oc.env:VAR}``, a missing key, a value of the wrong type). A bad value
    is left out (the schema's default stands for it; a list with a bad element is left out whole)."""
    problems: list[str] = []
    keys = list(node.keys()) if isinstance(node, DictConfig) else list(range(len(node)))
    out: dict | list = {} if isinstance(node, DictConfig) else []
    for key in keys:
        name = f"{prefix}.{key}" if prefix else str(key)
        if OmegaConf.is_missing(node, key):
            problems.append(f"{name}={MISSING_VALUE}: give it a value")
            continue
        try:
            value = node[key]
        except OmegaConfBaseException as exc:
            raw = OmegaConf.to_container(node, resolve=False)[key]  # type: ignore[index]
            problems.append(f"{name}={raw} cannot be resolved: {_unresolved(raw, exc)}")
            continue
        if isinstance(value, (DictConfig, ListConfig)):
            value, inner = _resolved(value, name)
            problems += inner
            if inner and isinstance(value, list):
                continue
        if isinstance(out, dict):
            out[key] = value
        else:
            out.append(value)
    return out, problems


def _dataclass_in(hint: Any) -> Any:
    """The dataclass a field's type names (``X`` or ``X | None``), or None."""
    import typing

    options = [hint, *typing.get_args(hint)]
    return next((t for t in options if isinstance(t, type) and dataclasses.is_dataclass(t)), None)


def _is_bool(hint: Any) -> bool:
    import typing

    return hint is bool or (bool(typing.get_args(hint)) and set(typing.get_args(hint)) - {type(None)} == {bool})


def _boolean(value: Any) -> bool:
    """Whether a boolean key may hold ``value``: true or false (YAML's, or their words), null,
    or an interpolation. OmegaConf reads any integer as a boolean (``2`` as true, ``0`` as
    false), which hid a typo's number as a switch."""
    if value is None or isinstance(value, bool):
        return True
    return isinstance(value, str) and (value.strip().lower() in ("true", "false") or value.startswith("${"))


def shape_problems(schema: Any, section: Any, prefix: str = "") -> list[tuple[tuple, str]]:
    """``(key path, why)`` of each value of ``section`` whose kind the dataclass ``schema``
    refuses and OmegaConf would not: one value where a section of keys goes (a layer's
    ``trainer: 5`` was dropped without a word once another layer set a ``trainer.*`` key), and
    anything but true or false for a boolean (``algo.ref_in_memory=2`` read as true)."""
    import typing

    if OmegaConf.is_config(section):
        section = OmegaConf.to_container(section, resolve=False)
    if not dataclasses.is_dataclass(schema) or not isinstance(section, Mapping):
        return []
    hints = typing.get_type_hints(schema if isinstance(schema, type) else type(schema))
    out = []
    for key, value in section.items():
        name, hint = (f"{prefix}.{key}" if prefix else str(key)), hints.get(key)
        if hint is None:
            continue  # an unknown key: unknown_keys names it
        if (inner := _dataclass_in(hint)) is not None:
            if isinstance(value, Mapping):
                out += [((key, *path), why) for path, why in shape_problems(inner, value, name)]
            elif value is not None and not (isinstance(value, str) and value.startswith("${")):
                out.append(((key,), section_value_problem(name, value)))
        elif _is_bool(hint) and not _boolean(value):
            out.append(((key,), f"{name}={value} must be true or false"))
    return out


def section_value_problem(name: str, value: Any) -> str:
    return (
        f"{name}={value!r}: {name} is a section of keys, not one value; set its keys "
        f"({name}.KEY=VALUE, or in a file {name.rpartition('.')[2]}: with its keys indented under it)"
    )


def merge_reporting(schema: Any, section: Any, prefix: str) -> tuple[DictConfig, list[str]]:
    """Merge ``section`` (a mapping or DictConfig, None for defaults) into the structured
    ``schema`` and return it with every problem found, all at once: retired keys and values
    (:mod:`recipe.retired_keys`), unknown keys, values of the wrong type, ``???`` left without a
    value and ``${...}`` interpolations that do not resolve, each naming its full key
    (``pasr.judge.timout_s``). OmegaConf's own merge stops at the first. The config returned
    holds the good values with their interpolations resolved and the schema's default for each
    bad one, so the value checks that follow can run on it and name theirs in the same line."""
    plain = OmegaConf.to_container(section, resolve=False) if OmegaConf.is_config(section) else (section or {})
    if not isinstance(plain, Mapping):  # `pasr=5`: the whole section one value
        return OmegaConf.structured(schema), [section_value_problem(prefix, plain)]
    problems = retired_settings(plain, prefix)
    shapes = shape_problems(schema, plain, prefix)
    problems += [why for _, why in shapes]  # and left out below: the schema's default stands
    refused = [path for path, _ in shapes]
    unknown = unknown_keys(schema, plain, prefix)
    if unknown:
        problems.append(f"invalid config key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}: not a known key")
    problems += missing_value_problems(plain, prefix)  # and left out: a merge would keep the default
    leaves = [
        (path, value)
        for path, value in _leaves(plain)  # each refused above is left out: its default stands
        if not (isinstance(value, str) and value == MISSING_VALUE)
        and not retired_settings(_nested(path, value), prefix)
        and not any(path[: len(bad)] == bad for bad in refused)
    ]
    base = OmegaConf.structured(schema)
    try:
        merged = OmegaConf.merge(base, *(_nested(path, value) for path, value in leaves))
    except OmegaConfBaseException:  # one leaf at a time, to name every bad one
        merged = base
        for path, value in leaves:
            try:
                merged = OmegaConf.merge(merged, _nested(path, value))
            except ConfigKeyError:  # an unknown or retired key: named above
                continue
            except OmegaConfBaseException as exc:
                problems.append(f"{_dotted(prefix, path)}={value} is not a valid value: {first_line(exc)}")
    resolved, unresolved = _resolved(merged, prefix)
    problems += unresolved
    return OmegaConf.merge(OmegaConf.structured(schema), resolved), list(dict.fromkeys(problems))


def merge_structured(schema: Any, section: Any, prefix: str) -> DictConfig:
    """:func:`merge_reporting`, raising a :class:`ConfigError` with every problem in one line."""
    merged, problems = merge_reporting(schema, section, prefix)
    if problems:
        raise ConfigError("; ".join(problems))
    return merged


def load_pasr_config(section: Any) -> PasrConfig:
    """A validated :class:`PasrConfig` from a ``pasr:`` DictConfig/dict (or None for defaults);
    every problem, of keys and of values, in one :class:`ConfigError`."""
    merged, problems = merge_reporting(PasrConfig, section, "pasr")
    cfg: PasrConfig = OmegaConf.to_object(merged)  # type: ignore[assignment]
    problems += cfg.problems()
    if problems:
        raise ConfigError("; ".join(problems))
    return cfg
