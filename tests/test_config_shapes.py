"""A config's values of the wrong kind are refused by key, not read as something else (issue 63):
a number where a boolean goes (``algo.ref_in_memory=2`` was true), one value where a section of
keys goes (a file's ``trainer: 5`` vanished once an override set a ``trainer.*`` key), a bad value
of a known key worded as a bad value (not "invalid config key"), and a YAML alias bomb in a
``--config`` file refused at once instead of growing without bound."""

from __future__ import annotations

import time

import pytest

from recipe.local_engine.config import load_config
from recipe.pasr_config import ConfigError, load_pasr_config


def test_a_boolean_takes_only_true_or_false():
    for value in ("2", "0", "1.5", "maybe"):
        with pytest.raises(ConfigError, match=rf"^algo\.ref_in_memory={value} must be true or false$"):
            load_config(preset="tiny", overrides=[f"algo.ref_in_memory={value}"])
    assert load_config(preset="tiny", overrides=["algo.ref_in_memory=true"]).algo.ref_in_memory is True
    assert load_config(preset="tiny", overrides=["algo.bf16_autocast=null"]).algo.bf16_autocast is None
    with pytest.raises(ConfigError, match=r"pasr\.prefill_think=2 must be true or false"):
        load_pasr_config({"prefill_think": 2})


def test_one_value_where_a_section_goes_is_refused_with_or_without_overrides(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("trainer: 5\n")
    for overrides in ([], ["trainer.steps=3"]):
        with pytest.raises(ConfigError, match=r"trainer=5: trainer is a section of keys, not one value") as err:
            load_config(preset="tiny", config_file=str(config), overrides=overrides)
        assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match=r"^pasr=5: pasr is a section of keys"):
        load_config(preset="tiny", overrides=["pasr=5"])
    with pytest.raises(ConfigError, match=r"^pasr=5: pasr is a section of keys"):
        load_pasr_config(5)  # the verl engine's `pasr=5`, which Hydra composes


def test_a_bad_value_of_a_known_key_is_called_a_bad_value():
    with pytest.raises(ConfigError) as err:
        load_config(preset="tiny", overrides=["trainer.steps=abc", "trainer.stepz=3"])
    message = str(err.value)
    assert "trainer.steps=abc is not a valid value: Value 'abc' of type 'str' could not be converted" in message
    assert "invalid config key trainer.stepz" in message and "invalid config key trainer.steps" not in message


def test_a_yaml_alias_bomb_is_refused_at_once(tmp_path):
    from recipe.submit_checks import check_local_run
    from recipe.yaml_bounds import MAX_EXPANDED_VALUES, expanded_size

    bomb = 'a: &a ["x","x","x","x","x","x","x","x","x"]\n'
    for prev, name in zip("abcdefgh", "bcdefghi"):
        bomb += f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]\n"
    (tmp_path / "bomb.yaml").write_text(bomb + "trainer:\n  run_dir: /shared/r\n")
    (tmp_path / "loop.yaml").write_text("x: &x [1, *x]\n")
    assert expanded_size(bomb) > 9**9 > MAX_EXPANDED_VALUES
    start = time.monotonic()
    with pytest.raises(
        ConfigError, match=r"bomb\.yaml: its YAML aliases \(\*name\) expand to [\d,]+ values, more than"
    ):
        load_config(config_file=str(tmp_path / "bomb.yaml"))
    with pytest.raises(ConfigError, match=r"loop\.yaml: a YAML alias refers to a value that contains it"):
        load_config(config_file=str(tmp_path / "loop.yaml"))
    from data.cli_errors import CliError

    with pytest.raises(CliError, match=r"^--config: config file .*bomb\.yaml: its YAML aliases"):
        check_local_run(["--config", "bomb.yaml"], tmp_path)  # pasr submit --engine local reads it too
    assert time.monotonic() - start < 5
    (tmp_path / "fine.yaml").write_text("trainer:\n  steps: &n 3\n  save_every: *n\n")  # a few aliases are fine
    assert load_config(preset="tiny", config_file=str(tmp_path / "fine.yaml")).trainer.save_every == 3
