"""Retired config keys and values (recipe/retired_keys.py): each is refused, on every path a
config takes into either engine, with a message naming the last commit that had it; all of
them given at once are named at once; the settings that stayed still load; a saved run resumes
where the retired key held what the code does and is refused in one line where it did not."""

from __future__ import annotations

import sys

import pytest

from recipe.local_engine.config import load_config
from recipe.pasr_config import ConfigError, load_pasr_config
from recipe.retired_keys import LAST_COMMIT, RETIRED, retired_message

PASR = sorted(s for s in RETIRED if s.startswith("pasr."))  # shared by both engines


def as_override(setting: str) -> str:
    """A command-line override that sets ``setting`` (a retired key gets some value)."""
    return setting if "=" in setting else f"{setting}=true"


def nested(setting: str) -> dict:
    """``setting`` as a nested mapping, as a YAML file or a ``pasr:`` section holds it."""
    key, _, value = as_override(setting).partition("=")
    out: dict = {}
    node = out
    *parents, leaf = key.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = True if value == "true" else value
    return out


def test_the_table_names_the_last_commit_and_where_the_results_are():
    import re

    assert LAST_COMMIT == "0c947d1"
    for setting, (commit, why, instead) in RETIRED.items():
        message = retired_message(setting)
        assert re.fullmatch(r"[0-9a-f]{7,}", commit), setting
        assert message.startswith(f"{setting} was retired (last in commit {commit}: "), message
        assert "docs/" in why and "\n" not in message
        assert ";" not in why + instead  # several refusals are joined by "; "
    # the draft reward and the draft credit: retired because neither gained over decayed warm-ups
    for setting in ("pasr.draft_credit", "pasr.refine_compare=draft"):
        assert "neither gained over decayed warm-ups, docs/results/demo.md" in retired_message(setting)


@pytest.mark.parametrize("setting", sorted(RETIRED))
def test_local_engine_refuses_each_as_an_override(setting):
    with pytest.raises(ConfigError) as exc:
        load_config(overrides=[as_override(setting)])
    assert str(exc.value) == retired_message(setting)  # not "not a known key", not "must be ..."


@pytest.mark.parametrize("setting", sorted(RETIRED))
def test_local_engine_refuses_each_in_a_config_file(setting, tmp_path):
    import yaml

    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(nested(setting)))
    with pytest.raises(ConfigError) as exc:
        load_config(config_file=str(path))
    assert str(exc.value) == retired_message(setting)


@pytest.mark.parametrize("setting", PASR)
def test_the_pasr_section_refuses_each(setting):
    """The verl engine loads its ``pasr`` section through load_pasr_config (and so does a
    ``+pasr.key=...`` that Hydra let through)."""
    with pytest.raises(ConfigError) as exc:
        load_pasr_config(nested(setting)["pasr"])
    assert str(exc.value) == retired_message(setting)


@pytest.mark.parametrize("setting", PASR)
def test_verl_engine_refuses_each_before_hydra_composes(setting):
    """Hydra would call a removed key unknown in its own words: the overrides are checked first,
    for ``python3 -m recipe.main_pasr`` and ``pasr submit`` alike."""
    from recipe.verl_engine.config import compose_config, pasr_config

    for override in (as_override(setting), "+" + as_override(setting)):
        with pytest.raises(ConfigError) as exc:
            pasr_config(compose_config([override]))
        assert str(exc.value) == retired_message(setting), override


def test_main_pasr_refuses_them_before_hydra(monkeypatch, capsys):
    from recipe import main_pasr

    monkeypatch.setattr(sys, "argv", ["main_pasr", "trainer.nnodes=1", *map(as_override, PASR)])
    with pytest.raises(SystemExit) as exc:
        main_pasr.main()
    assert exc.value.code == main_pasr.EXIT_PREFLIGHT
    err = capsys.readouterr().err
    assert err.count(" was retired (last in commit ") == len(PASR) and err.count("\n") == 1, err


def test_pasr_submit_refuses_them():
    from data.cli_errors import CliError
    from recipe.submit_checks import check_verl_run

    with pytest.raises(CliError, match=" was retired "):
        check_verl_run([as_override(PASR[0])])


def test_every_retired_setting_and_typo_is_named_at_once():
    one_per_key = {s.partition("=")[0]: s for s in sorted(RETIRED)}.values()  # a later value replaces an earlier one
    overrides = [as_override(s) for s in one_per_key] + ["pasr.tie_valeu=0"]
    with pytest.raises(ConfigError) as exc:
        load_config(overrides=overrides)
    message = str(exc.value)
    assert all(retired_message(s) in message for s in one_per_key), message
    assert "pasr.tie_valeu (did you mean pasr.tie_value?)" in message and "\n" not in message


def test_every_retired_override_is_named_even_when_a_later_one_replaces_it():
    from recipe.retired_keys import retired_overrides

    assert retired_overrides([as_override(s) for s in sorted(RETIRED)] + ["pasr.tie_value=0", "--cfg"]) == [
        retired_message(s) for s in sorted(RETIRED)
    ]


@pytest.mark.parametrize(
    "override",
    [
        "pasr.refine_compare=sign",  # the paper
        "pasr.refine_compare=margin",  # the cpu preset's
        "pasr.empty_refine_value=null",  # the paper
        "pasr.empty_refine_value=0.0",  # the local engine's default
        "pasr.empty_refine_value=-0.25",
        "warmup.refine_style=column",  # the default
        "warmup.refine_style=check",
    ],
)
def test_the_settings_that_stayed_still_load(override):
    key, _, value = override.partition("=")
    cfg = load_config(overrides=[override])
    got = cfg
    for part in key.split("."):
        got = getattr(got, part)
    assert got == (None if value == "null" else type(got)(value))
    if key.startswith("pasr."):
        from recipe.verl_engine.config import compose_config, pasr_config

        assert getattr(pasr_config(compose_config([override])), key.split(".")[1]) == got


def _old_run_config(tmp_path, **pasr_extra):
    """A run's config.yaml as the code before the retirement wrote it: every key spelled out
    (no preset chain then)."""
    from omegaconf import OmegaConf

    from recipe.local_engine.config import to_yaml

    cfg = OmegaConf.create(to_yaml(load_config()))
    del cfg["presets"]
    cfg.pasr.train_plain = False
    cfg.pasr.empty_refine_mode = "fixed"
    cfg.pasr.draft_credit = "outcome"
    for key, value in pasr_extra.items():
        cfg.pasr[key] = value
    path = tmp_path / "config.yaml"
    path.write_text(OmegaConf.to_yaml(cfg))
    return path


def test_a_run_saved_before_the_retirement_resumes_with_the_same_settings(tmp_path):
    path = _old_run_config(tmp_path)
    with pytest.raises(ConfigError, match=LAST_COMMIT):  # as a --config file it is refused ...
        load_config(config_file=str(path))
    saved = load_config(config_file=str(path), saved_run=True)  # ... as the run's own, it resumes
    assert saved.presets == []  # not recorded then
    saved.presets = load_config().presets
    assert saved == load_config()  # what the defaults train: the dropped keys held what the code does


@pytest.mark.parametrize(
    "extra, setting",
    [
        ({"train_plain": True}, "pasr.train_plain"),
        ({"empty_refine_mode": "cap", "empty_refine_value": -0.25}, "pasr.empty_refine_mode"),
        ({"draft_credit": "value"}, "pasr.draft_credit"),
        ({"refine_compare": "draft"}, "pasr.refine_compare=draft"),
    ],
)
def test_a_saved_run_that_used_a_retired_behaviour_is_still_refused(tmp_path, extra, setting):
    with pytest.raises(ConfigError) as exc:
        load_config(config_file=str(_old_run_config(tmp_path, **extra)), saved_run=True)
    assert str(exc.value) == retired_message(setting)


def test_pasr_train_resume_of_a_run_that_trained_with_draft_credit_is_one_line(tmp_path):
    """A run saved with pasr.draft_credit=value (the local engine's default until its retirement)
    is refused by pasr train --resume in one line naming the key, the commit that last had it and
    why; one saved with outcome (the paper's, what the code does now) resumes."""
    from data.cli_errors import CliError
    from recipe.local_engine.cli import _resume_config
    from recipe.retired_keys import DRAFT_COMMIT

    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(_old_run_config(tmp_path, draft_credit="value").read_text())
    with pytest.raises(CliError) as exc:
        _resume_config(run, [], force=False)
    message = str(exc.value)
    assert message == f"cannot resume {run}: {retired_message('pasr.draft_credit')}" and "\n" not in message
    assert f"last in commit {DRAFT_COMMIT}" in message
    (run / "config.yaml").write_text(_old_run_config(tmp_path).read_text())  # draft_credit: outcome
    assert not hasattr(_resume_config(run, [], force=False).pasr, "draft_credit")


# ----------------------------------------------------------------------------- renamed keys
def test_a_renamed_key_is_refused_naming_its_new_name_in_both_engines(tmp_path):
    """trainer.loggers (the local engine's old spelling) is verl's trainer.logger now: refused
    as an override, in a config file and among verl's overrides, each time naming the new key."""
    from recipe.retired_keys import RENAMED
    from recipe.verl_engine.config import compose_config

    assert RENAMED["trainer.loggers"][0] == "trainer.logger"
    message = retired_message("trainer.loggers")
    assert message.startswith("trainer.loggers was renamed trainer.logger (") and message.endswith(
        "set trainer.logger instead"
    )
    assert ";" not in message and "\n" not in message
    with pytest.raises(ConfigError) as exc:
        load_config(overrides=["trainer.loggers=[console]", "pasr.tie_valeu=0"])
    assert message in str(exc.value) and "pasr.tie_valeu (did you mean" in str(exc.value)
    path = tmp_path / "c.yaml"
    path.write_text("trainer:\n  loggers: [tensorboard]\n")
    with pytest.raises(ConfigError) as exc:
        load_config(config_file=str(path))
    assert str(exc.value) == message
    with pytest.raises(ConfigError) as exc:
        compose_config(["trainer.loggers=[console]"])
    assert str(exc.value) == message
    assert load_config(overrides=["trainer.logger=[console]"]).trainer.logger == ["console"]
    assert compose_config(["trainer.logger=[console]"]).trainer.logger == ["console"]  # verl's own key


def test_a_run_saved_with_the_old_logger_key_resumes_with_its_loggers(tmp_path):
    """A config.yaml written before the rename (``trainer.loggers: [console]``) resumes, through
    pasr train --resume's own config step, logging where it logged; the new key may change it
    (a resume may change where a run logs); the old key given again is refused."""
    from omegaconf import OmegaConf

    from data.cli_errors import CliError
    from recipe.local_engine.cli import _resume_config
    from recipe.local_engine.config import LocalTrainConfig, to_yaml

    cfg = OmegaConf.create(to_yaml(LocalTrainConfig()))
    del cfg.trainer["logger"]
    cfg.trainer.loggers = ["console"]
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(OmegaConf.to_yaml(cfg))
    assert _resume_config(run, [], force=False).trainer.logger == ["console"]
    assert _resume_config(run, ["trainer.logger=[]"], force=False).trainer.logger == []
    with pytest.raises(CliError, match="trainer.loggers was renamed trainer.logger"):
        _resume_config(run, ["trainer.loggers=[console]"], force=False)


def test_the_wandb_project_and_run_keys_are_verls_in_both_engines(tmp_path, monkeypatch):
    """The local engine's trainer.project / trainer.experiment are verl's trainer.project_name /
    trainer.experiment_name: the old keys refused naming the new ones (override, config file,
    verl's overrides), the new ones given to verl's Tracking as project and run name."""
    from recipe.local_engine import run_io
    from recipe.verl_engine.config import compose_config

    for old, new in (("trainer.project", "trainer.project_name"), ("trainer.experiment", "trainer.experiment_name")):
        message = retired_message(old)
        assert message.startswith(f"{old} was renamed {new} (") and message.endswith(f"set {new} instead")
        with pytest.raises(ConfigError) as exc:
            load_config(overrides=[f"{old}=x"])
        assert str(exc.value) == message
        with pytest.raises(ConfigError) as exc:
            compose_config([f"{old}=x"])
        assert str(exc.value) == message
    path = tmp_path / "c.yaml"
    path.write_text("trainer:\n  project: p\n  experiment: e\n")
    with pytest.raises(ConfigError) as exc:
        load_config(config_file=str(path))
    assert str(exc.value) == f"{retired_message('trainer.project')}; {retired_message('trainer.experiment')}"

    cfg = load_config(
        overrides=["trainer.project_name=proj", "trainer.experiment_name=run-1", "trainer.logger=[console]"]
    )
    assert compose_config(["trainer.project_name=proj"]).trainer.project_name == "proj"  # verl's own key
    made = []
    monkeypatch.setattr("verl.utils.tracking.Tracking", lambda *args, **kwargs: made.append((args, kwargs)))
    run_io.make_tracking(tmp_path / "run", cfg.trainer)
    assert made == [(("proj", "run-1"), {"default_backend": ["console"], "config": None})]


def test_a_run_saved_with_the_old_wandb_keys_resumes_under_the_new_names(tmp_path):
    """A config.yaml written before the rename (``trainer.project``, ``trainer.experiment``)
    resumes with its project and run name; the old keys given again are refused."""
    from omegaconf import OmegaConf

    from data.cli_errors import CliError
    from recipe.local_engine.cli import _resume_config
    from recipe.local_engine.config import to_yaml

    cfg = OmegaConf.create(to_yaml(load_config()))
    cfg.pop("presets", None)  # a chain of presets was not recorded then
    for old, new in (("project", "project_name"), ("experiment", "experiment_name")):
        del cfg.trainer[new]
        cfg.trainer[old] = f"saved-{old}"
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(OmegaConf.to_yaml(cfg))
    resumed = _resume_config(run, [], force=False).trainer
    assert (resumed.project_name, resumed.experiment_name) == ("saved-project", "saved-experiment")
    assert _resume_config(run, ["trainer.experiment_name=other"], force=False).trainer.experiment_name == "other"
    with pytest.raises(CliError, match="trainer.project was renamed trainer.project_name"):
        _resume_config(run, ["trainer.project=x"], force=False)


def test_the_judge_error_rate_is_one_key_in_both_engines(tmp_path):
    """pasr.max_judge_error_rate is the judge-error stop of both engines; the local engine's
    trainer.max_judge_error_rate and the verl engine's pasr_verl.max_judge_error_rate are refused
    naming it, and a run saved with the old local key resumes with its value."""
    from omegaconf import OmegaConf

    from data.cli_errors import CliError
    from recipe.local_engine.cli import _resume_config
    from recipe.local_engine.config import to_yaml
    from recipe.verl_engine.config import compose_config, pasr_config

    for old in ("trainer.max_judge_error_rate", "pasr_verl.max_judge_error_rate"):
        message = retired_message(old)
        assert message.startswith(f"{old} was renamed pasr.max_judge_error_rate (")
        with pytest.raises(ConfigError) as exc:
            load_config(overrides=[f"{old}=0.5"])
        assert message in str(exc.value)  # (the local engine has no pasr_verl section either)
        with pytest.raises(ConfigError) as exc:
            compose_config([f"{old}=0.5"])
        assert str(exc.value) == message
    assert load_config(overrides=["pasr.max_judge_error_rate=0.5"]).pasr.max_judge_error_rate == 0.5
    assert pasr_config(compose_config(["pasr.max_judge_error_rate=0.5"])).max_judge_error_rate == 0.5
    cfg = OmegaConf.create(to_yaml(load_config()))
    del cfg.pasr["max_judge_error_rate"]
    cfg.trainer.max_judge_error_rate = 0.7  # as pasr train wrote it before the rename
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(OmegaConf.to_yaml(cfg))
    assert _resume_config(run, [], force=False).pasr.max_judge_error_rate == 0.7
    assert _resume_config(run, ["pasr.max_judge_error_rate=0.3"], force=False).pasr.max_judge_error_rate == 0.3
    with pytest.raises(CliError, match="trainer.max_judge_error_rate was renamed pasr.max_judge_error_rate"):
        _resume_config(run, ["trainer.max_judge_error_rate=0.3"], force=False)
