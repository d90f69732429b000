"""Config keys and values that were retired, and the one message that refuses each.

A knob kept only for an ablation that did not pay is removed with its code; what it measured
stays in docs/results/, and the last commit that had it is named here, so a config that still
sets it is refused with where to find it instead of "not a known key" (or, for a value,
"must be ..."). Both engines check before the structured merge
(:func:`recipe.pasr_config.merge_structured`: the local engine's merged YAML layers and
overrides, the verl config's ``pasr`` section), and the verl engine also checks its Hydra
overrides before composing them (:func:`retired_overrides`), since Hydra refuses a key the
schema lacks with its own message first. Every retired setting given is named at once.

A key that was renamed (:data:`RENAMED`) is refused the same way, naming its new name; a run's
saved ``config.yaml`` that still spells the old name resumes under the new one
(:func:`rename_saved_keys`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from omegaconf import DictConfig, OmegaConf

LAST_COMMIT = "0c947d1"  # the last commit that had the first knobs retired below
DRAFT_COMMIT = "e14084d"  # the last commit that had the draft reward and draft credit

# "section.key" (the key, whatever its value) or "section.key=value" (that value only):
# (the last commit that had it, why it was retired and where its results are, what to do instead)
RETIRED: dict[str, tuple[str, str, str]] = {
    "pasr.train_plain": (
        LAST_COMMIT,
        "it neither helped nor hurt, docs/results/history/learning_signal_history.md",
        "remove it",
    ),
    "pasr.empty_refine_mode": (
        LAST_COMMIT,
        "cap trained refining away, docs/results/history/learning_signal_history.md",
        "remove it: pasr.empty_refine_value alone now sets the refine reward of a rollout whose refines "
        "only restate, right or wrong, as fixed did (null: the paper)",
    ),
    "pasr.draft_credit": (
        DRAFT_COMMIT,
        "value, which kept a rollout's advantage off its draft (the last number before its first refine) "
        "where the draft's own correctness disagreed, neither gained over decayed warm-ups, docs/results/demo.md "
        "(span, the tokens before the refine, collapsed the model, docs/results/history/learning_signal_history.md)",
        "remove it: every token gets its rollout's advantage, as in the paper (outcome)",
    ),
    "pasr.refine_compare=draft": (
        DRAFT_COMMIT,
        "it compared a refining rollout with its own draft instead of the plain rollouts and "
        "neither gained over decayed warm-ups, docs/results/demo.md",
        "use pasr.refine_compare=sign (the paper) or margin",
    ),
    "warmup.refine_style=fix": (
        LAST_COMMIT,
        "its refines always changed the value, so the model learned to 'correct' right values too, "
        "docs/local_engine.md 'The cold start'",
        "use warmup.refine_style=column (the default) or check",
    ),
    "warmup.refine_style=restate": (
        LAST_COMMIT,
        "its refines only restated a value and PASR rightly trained them away, docs/local_engine.md 'The cold start'",
        "use warmup.refine_style=column (the default) or check",
    ),
}


# "section.key": (the key's new name, why it was renamed). The same setting, same values: only
# the spelling changed, so a saved run is carried over (rename_saved_keys) and a new config refused.
RENAMED: dict[str, tuple[str, str]] = {
    "trainer.loggers": (
        "trainer.logger",
        "verl's name for the same list of Tracking backends (console, tensorboard, wandb, ...), "
        "one key in both engines",
    ),
    "trainer.max_judge_error_rate": (
        "pasr.max_judge_error_rate",
        "the judge-error stop, one key in the pasr section both engines read",
    ),
    "pasr_verl.max_judge_error_rate": (
        "pasr.max_judge_error_rate",
        "the judge-error stop, one key in the pasr section both engines read",
    ),
    "trainer.project": ("trainer.project_name", "verl's name for the wandb project, one key in both engines"),
    "trainer.experiment": ("trainer.experiment_name", "verl's name for the wandb run, one key in both engines"),
    "rollout.prefill_think": (
        "pasr.prefill_think",
        "the <think> prefill of PASR's rollouts, one key in the pasr section both engines read",
    ),
}


def retired_message(setting: str) -> str:
    """The refusal of ``setting``, a key of :data:`RETIRED`.

    >>> retired_message("pasr.train_plain").startswith("pasr.train_plain was retired (last in commit 0c947d1: ")
    True
    """
    if setting in RENAMED:
        new, why = RENAMED[setting]
        return f"{setting} was renamed {new} ({why}): set {new} instead"
    commit, why, instead = RETIRED[setting]
    return f"{setting} was retired (last in commit {commit}: {why}); {instead}"


def is_retired_key(name: str) -> bool:
    """Whether the dotted key ``name`` was retired (or renamed) whatever its value."""
    return name in RETIRED or name in RENAMED


def retired_settings(section: Any, prefix: str = "") -> list[str]:
    """The refusal of every retired key or value in ``section`` (a mapping or a DictConfig,
    nested sections included; ``prefix`` spells its keys as dotted names, ``pasr`` for the
    ``pasr:`` section alone). Interpolations are not resolved: ``${...}`` is no retired value."""
    if isinstance(section, DictConfig):  # its values as written
        section = OmegaConf.to_container(section, resolve=False)
    if not isinstance(section, Mapping):
        return []
    out = []
    for key, value in section.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if is_retired_key(name):
            out.append(retired_message(name))
        elif isinstance(value, Mapping):
            out += retired_settings(value, name)
        elif f"{name}={value}" in RETIRED:
            out.append(retired_message(f"{name}={value}"))
    return out


def retired_overrides(overrides: Iterable[str]) -> list[str]:
    """The refusal of every retired key or value among command-line overrides (``key=value``,
    Hydra's ``+key=value``, ``++key=value`` and ``~key`` too); anything else is left to the
    parser that reads them."""
    out = []
    for override in overrides:
        if override.startswith("-"):  # a flag (--cfg, -m), not an override
            continue
        key, eq, value = override.lstrip("~+").partition("=")
        key, value = key.strip(), value.strip().strip("'\"")
        setting = key if is_retired_key(key) else f"{key}={value}" if eq and f"{key}={value}" in RETIRED else None
        if setting is not None and retired_message(setting) not in out:
            out.append(retired_message(setting))
    return out


def drop_settings_kept_as_defaults(saved: Any) -> list[str]:
    """Remove from a run's saved ``config.yaml`` (a DictConfig, in place) the retired keys whose
    saved values are what the code still does, and return their dotted names.

    Every ``config.yaml`` written before a knob was retired spells it out: ``pasr.train_plain:
    false`` and ``pasr.empty_refine_mode`` (``fixed``, or ``cap`` with no ``empty_refine_value``:
    the paper) before 0c947d1, ``pasr.draft_credit: outcome`` (the paper) before the draft
    credit's retirement. Those runs train exactly what they did without the keys, so ``pasr train
    --resume`` must not refuse them (an interrupted run resumes); any other saved value
    (``train_plain: true``, ``cap`` with a value, ``draft_credit: value``) is left in place and
    refused in one line as usual.

    >>> cfg = OmegaConf.create(
    ...     {"pasr": {"train_plain": False, "empty_refine_mode": "fixed", "empty_refine_value": 0.0}}
    ... )
    >>> drop_settings_kept_as_defaults(cfg), OmegaConf.to_container(cfg)
    (['pasr.train_plain', 'pasr.empty_refine_mode'], {'pasr': {'empty_refine_value': 0.0}})
    """
    pasr = saved.get("pasr") if isinstance(saved, DictConfig) else None
    if not isinstance(pasr, DictConfig):
        return []
    dropped = []
    if "train_plain" in pasr and pasr.get("train_plain") is False:
        del pasr["train_plain"]
        dropped.append("pasr.train_plain")
    mode = pasr.get("empty_refine_mode")
    if mode == "fixed" or (mode == "cap" and pasr.get("empty_refine_value") is None):
        del pasr["empty_refine_mode"]
        dropped.append("pasr.empty_refine_mode")
    if pasr.get("draft_credit") == "outcome":
        del pasr["draft_credit"]
        dropped.append("pasr.draft_credit")
    return dropped


def rename_saved_keys(saved: Any) -> list[str]:
    """Move every renamed key (:data:`RENAMED`) of a run's saved ``config.yaml`` (a DictConfig,
    in place) to its new name, and return the old dotted names. A run saved before the rename
    resumes with what it had (``trainer.loggers: [tensorboard]`` goes on logging to tensorboard).
    A file holding both names keeps the new one's value.

    >>> cfg = OmegaConf.create({"trainer": {"loggers": ["console"], "steps": 3}})
    >>> rename_saved_keys(cfg), OmegaConf.to_container(cfg)
    (['trainer.loggers'], {'trainer': {'steps': 3, 'logger': ['console']}})
    """
    if not isinstance(saved, DictConfig):
        return []
    renamed = []
    for old, (new, _) in RENAMED.items():
        *parents, key = old.split(".")
        section = OmegaConf.select(saved, ".".join(parents)) if parents else saved
        if not isinstance(section, DictConfig) or key not in section:
            continue
        value = section[key]
        del section[key]
        if OmegaConf.select(saved, new, default=None) is None:
            OmegaConf.update(saved, new, value, force_add=True)
        renamed.append(old)
    return renamed
