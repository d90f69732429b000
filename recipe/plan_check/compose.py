"""The config ``pasr check`` checks: composed as ``python3 -m recipe.main_pasr OVERRIDES`` composes
it, with every bad override named at once.

Hydra stops at the first bad override, with a message whose reason is on a later line or in the
exception's cause ("Error merging override pasr.n_refine=abc" and nothing else on its first
line). Here each override is parsed on its own first, then the config is composed again without
each one Hydra refuses (at most once per override), so a user fixes every key in one go.
"""

from __future__ import annotations

import re
from pathlib import Path

from data.cli_errors import CliError

TRAIN_COMMAND = ("-m", "recipe.main_pasr")


def verl_config_dir() -> Path:
    """The installed verl's ``trainer/config`` folder, found without importing verl."""
    import importlib.util

    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        raise CliError("verl is not installed: pip install -e . installs verl==0.9.1")
    return Path(list(spec.submodule_search_locations)[0]) / "trainer" / "config"


def compose(overrides: list[str]):
    """The config ``python3 -m recipe.main_pasr OVERRIDES`` runs: ``pasr_trainer.yaml`` over
    verl's ``ppo_trainer``, with verl's folder on the search path as a file path instead of
    ``pkg://verl.trainer.config`` (the same files; the package import costs torch's)."""
    from recipe.verl_engine.config import compose_config

    return compose_config([*overrides, f"hydra.searchpath=[file://{verl_config_dir()}]"])


def strip_command(args: list[str]) -> list[str]:
    """The overrides of ``[python3 -m recipe.main_pasr] OVERRIDES`` (the run scripts pass the
    whole training command)."""
    if len(args) >= 3 and Path(args[0]).name.startswith("python") and tuple(args[1:3]) == TRAIN_COMMAND:
        return args[3:]
    return args


def select(config, key: str, default=None):
    from omegaconf import OmegaConf

    return OmegaConf.select(config, key, default=default)


def one_line(exc: BaseException) -> str:
    """An exception's message on one line, with the reason its cause holds (Hydra puts the why of
    "Error merging override ..." there) and without OmegaConf's ``full_key:`` / ``object_type=``
    trailer lines."""
    from recipe.pasr_config import first_line

    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.startswith(("full_key:", "object_type=", "See https://hydra.cc"))]
    text = "; ".join(lines) or type(exc).__name__
    cause = exc.__cause__ or exc.__context__
    if cause is not None and str(cause).strip():
        why = first_line(cause)
        if why not in text:
            text = f"{text}: {why}"
    return text


def _key(override: str) -> str:
    return override.lstrip("~+").partition("=")[0].strip()


def _parse_problem(override: str) -> str | None:
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        OverridesParser.create().parse_overrides([override])
    except HydraException as exc:
        return f"{override}: not a Hydra override ({one_line(exc)}); write KEY=VALUE"
    return None


def _culprit(exc: BaseException, overrides: list[str]) -> tuple[str, str] | None:
    """``(the override Hydra refused, why in words)``, or None when its message names none."""
    text = str(exc)
    if m := re.search(r"Could not find '([^'/]+)/([^']+)'", text):  # a config group's option (setup=NAME)
        for override in overrides:
            if _key(override) == m[1]:
                listed = text.partition("Available options")[2].partition("Config search path")[0]
                options = re.findall(r"^\s+(\S+)\s*$", listed, re.M)
                known = f": {', '.join(options)}" if options else ""
                return override, f"{override}: no {m[2]} in recipe/config/{m[1]}/ (its options{known or ': none'})"
    if m := re.search(r"Could not override '([^']+)'", text):
        for override in overrides:
            if _key(override) == m[1]:
                return override, (
                    f"{m[1]}: not a key of the config (check its spelling; Hydra adds a new key only as +{m[1]}=VALUE)"
                )
    if m := re.search(r"Error merging override (.+)", text):
        wanted = m[1].strip()
        for override in overrides:
            if override == wanted or override.lstrip("+~") == wanted.lstrip("+~"):
                return override, f"{override}: {one_line(exc).split(': ', 1)[-1]}"
    for override in overrides:  # any other message that names one override's key
        if _key(override) and re.search(rf"(?<![\w.]){re.escape(_key(override))}(?![\w.])", text):
            return override, f"{override}: {one_line(exc)}"
    return None


def compose_reporting(overrides: list[str]) -> tuple[object | None, list[str]]:
    """``(config, [])``, or ``(None, every problem)``: retired keys, overrides that do not parse
    and overrides Hydra refuses (unknown keys, values of the wrong type), each once. Hydra is
    asked again without each refused override, so the loop runs at most once per override."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from recipe.pasr_config import ConfigError
    from recipe.retired_keys import retired_overrides

    problems: list[str] = []
    remaining = []
    for override in overrides:
        why = retired_overrides([override]) or ([p] if (p := _parse_problem(override)) else [])
        problems += why
        if not why:
            remaining.append(override)
    for _ in range(len(remaining) + 1):
        try:
            config = compose(remaining)
        except (HydraException, OmegaConfBaseException, ConfigError) as exc:
            found = _culprit(exc, remaining)
            if found is None:
                problems.append(one_line(exc))
                return None, problems
            remaining.remove(found[0])
            problems.append(found[1])
            continue
        return (None, problems) if problems else (config, [])
    return None, problems
