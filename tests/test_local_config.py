"""The local engine's config and schedule: presets, overrides and config files layered, bad and
non-finite settings refused, the data a run needs, the RL learning-rate ramp, and each step's
training rows as a function of the step."""

from __future__ import annotations

import pytest

from recipe.local_engine.config import load_config
from recipe.local_engine.policy_update import rl_learning_rate, warmup_learning_rate
from recipe.local_engine.trainer import step_indices
from recipe.pasr_config import ConfigError


def test_config_layers_and_errors(tmp_path):
    cfg = load_config(preset="demo", overrides=["trainer.steps=7", "pasr.tie_value=0.0"])
    assert cfg.trainer.steps == 7 and cfg.pasr.tie_value == 0.0 and cfg.trainer.run_dir == "runs/pasr-demo"
    with pytest.raises(ConfigError, match="pasr.judge.timout_s"):
        load_config(overrides=["pasr.judge.timout_s=3"])
    with pytest.raises(ConfigError, match="warmup.refine_style"):
        load_config(overrides=["warmup.refine_style=sometimes"])
    with pytest.raises(ConfigError, match="key=value"):
        load_config(overrides=["trainer.steps"])
    with pytest.raises(ConfigError, match="unknown preset"):
        load_config(preset="nope")
    extra = tmp_path / "c.yaml"
    extra.write_text("rollout:\n  max_new_tokens: 12\n")
    assert load_config(config_file=str(extra)).rollout.max_new_tokens == 12


def test_non_finite_settings_are_refused_all_at_once():
    """NaN passes every range check written as a comparison and infinity every lower bound:
    algo.lr=inf wrote a NaN checkpoint, pasr.weights.format=nan skipped every row and exited 0.
    One check over every float key names all of them, in one line."""
    from recipe.pasr_config import load_pasr_config

    bad = {
        "algo.lr": "inf",
        "warmup.lr": "inf",
        "pasr.weights.format": "nan",
        "pasr.zeta": "nan",
        "pasr.tie_value": "nan",
        "pasr.weights.acc": "inf",
        "rollout.top_p": "-inf",
        "pasr.judge.backoff_s": "inf",
    }
    with pytest.raises(ConfigError) as exc:
        load_config(overrides=[f"{key}={value}" for key, value in bad.items()])
    message = str(exc.value)
    assert all(f"{key}={value}" in message for key, value in bad.items()) and "\n" not in message, message
    with pytest.raises(ConfigError, match=r"pasr\.zeta=nan"):  # the section alone, as the verl engine loads it
        load_pasr_config({"zeta": "nan"})
    assert load_config(overrides=["algo.lr=2e-5", "pasr.empty_refine_value=null"]).algo.lr == 2e-5


def test_check_data_refuses_what_a_run_cannot_use():
    """No rows, fewer training rows than a step takes (only when there are RL steps), or no
    held-out rows while an evaluation is on."""
    from data.examples import DatasetError, Example
    from recipe.local_engine.trainer import check_data

    rows = [Example(str(i), "f", f"{i}+1?", str(i + 1)) for i in range(3)]
    cfg = load_config(overrides=["rollout.queries_per_step=2", "data.source=synthetic"])
    check_data(cfg, rows, rows)
    with pytest.raises(DatasetError, match="data.source: synthetic holds no rows"):
        check_data(cfg, [], [])
    with pytest.raises(DatasetError, match="has 1 training row, fewer than rollout.queries_per_step=2"):
        check_data(cfg, rows[:1], rows)
    check_data(load_config(overrides=["rollout.queries_per_step=2", "trainer.steps=0"]), rows[:1], rows)
    with pytest.raises(DatasetError, match="no held-out rows"):
        check_data(cfg, rows, [])
    no_evals = ["trainer.eval_at_start=false", "trainer.eval_after_warmup=false", "trainer.eval_at_end=false"]
    check_data(load_config(overrides=no_evals), rows * 4, [])


def test_rl_learning_rate_ramps_then_holds():
    assert [rl_learning_rate(1e-5, s, 4) for s in (1, 2, 3, 4, 5, 40)] == pytest.approx(
        [2.5e-6, 5e-6, 7.5e-6, 1e-5, 1e-5, 1e-5]
    )
    assert rl_learning_rate(1e-5, 1, 0) == 1e-5  # 0: no warm-up
    assert rl_learning_rate(1e-5, 1, 1) == 1e-5  # the first step is never a zero-lr no-op
    with pytest.raises(ConfigError, match="algo.lr_warmup_steps"):
        load_config(overrides=["algo.lr_warmup_steps=-1"])


def test_warmup_learning_rate_holds_or_decays_on_verls_cosine():
    assert [warmup_learning_rate(5e-5, s, 4, "constant") for s in (1, 4)] == [5e-5, 5e-5]
    cosine = [warmup_learning_rate(4.0, s, 4, "cosine") for s in (1, 2, 3, 4)]
    # half a cosine from the full lr at the first step towards zero after the last: 4 (1 + cos(pi k / 4)) / 2
    assert cosine == pytest.approx([4.0, 2 + 2**0.5, 2.0, 2 - 2**0.5])
    assert warmup_learning_rate(4.0, 50, 100, "cosine") > warmup_learning_rate(4.0, 51, 100, "cosine") > 0
    # supervised steps past the end (the learning-signal control continues the warm-up) stay at
    # the schedule's end, zero; verl's cosine alone would climb back towards the full rate
    assert [warmup_learning_rate(4.0, s, 4, "cosine") for s in (5, 6, 8, 40)] == [0.0] * 4
    with pytest.raises(ValueError, match="warmup.lr_schedule"):
        warmup_learning_rate(4.0, 1, 4, "linear")
    with pytest.raises(ConfigError, match="warmup.lr_schedule"):
        load_config(overrides=["warmup.lr_schedule=linear"])
    assert load_config(overrides=["warmup.lr_schedule=cosine"]).warmup.lr_schedule == "cosine"


def test_step_indices_are_a_pure_function_of_the_step():
    a = [step_indices(10, 4, s, seed=3) for s in range(5)]
    assert a == [step_indices(10, 4, s, seed=3) for s in range(5)]
    first_epoch = sum(a[:2], []) + a[2][:2]
    assert sorted(first_epoch) == list(range(10))  # every item once per epoch


def test_every_bad_value_is_named_at_once_across_sections():
    """Issue 53: `pasr.tie_value=nan rollout.temperature=-1` named only tie_value (the
    non-finite check raised before any range check ran). One line now names every bad key of
    every section: values out of range, non-finite ones, wrong types and unknown keys together."""
    bad = [
        "pasr.tie_value=nan",
        "rollout.temperature=-1",
        "trainer.seed=-1",
        "algo.lr=inf",
        "warmup.steps=abc",
        "trainer.stepz=3",
    ]
    with pytest.raises(ConfigError) as exc:
        load_config(preset="tiny", overrides=bad)
    message = str(exc.value)
    for named in (
        "pasr.tie_value=nan",
        "rollout.temperature must be > 0",
        "trainer.seed must be in [0,",
        "algo.lr=inf",
        "warmup.steps=abc is not a valid value",
        "trainer.stepz (did you mean trainer.steps?)",
    ):
        assert named in message, (named, message)
    assert "\n" not in message
    with pytest.raises(ConfigError) as exc:  # the section alone, as the verl engine loads it
        from recipe.pasr_config import load_pasr_config

        load_pasr_config({"tie_value": "nan", "n_plain": 0, "judge": {"retries": -1}})
    assert all(k in str(exc.value) for k in ("pasr.tie_value=nan", "pasr.n_plain", "pasr.judge.retries")), exc.value


def test_interpolations_resolve_at_load_or_are_refused_by_key(tmp_path, monkeypatch):
    """`${oc.env:UNSET}` and `???`, on the command line and in a --config file, were tracebacks
    (or, for ??? over a preset's value, silently the value below). They resolve at load, so
    config.yaml records what the run used, or each is refused naming its key, in one line."""
    from recipe.local_engine.config import to_yaml

    monkeypatch.delenv("PASR_TEST_UNSET", raising=False)
    monkeypatch.setenv("PASR_TEST_SEED", "5")
    cfg = load_config(
        preset="tiny", overrides=["trainer.seed=${oc.env:PASR_TEST_SEED}", "trainer.experiment_name=${data.source}-x"]
    )
    assert cfg.trainer.seed == 5 and cfg.trainer.experiment_name == "synthetic-x"
    assert "seed: 5" in to_yaml(cfg) and "${" not in to_yaml(cfg)
    extra = tmp_path / "c.yaml"
    extra.write_text(
        "trainer:\n  run_dir: ${oc.env:PASR_TEST_UNSET}/r\n  steps: ???\n"
        "rollout:\n  max_new_tokens: ${oc.env:PASR_TEST_SEED}\n"
    )
    with pytest.raises(ConfigError) as exc:
        load_config(preset="tiny", config_file=str(extra), overrides=["warmup.steps=???", "pasr.zeta=${nope.key}"])
    message = str(exc.value)
    for named in (
        "trainer.run_dir=${oc.env:PASR_TEST_UNSET}/r cannot be resolved: "
        "the environment variable PASR_TEST_UNSET is not set",
        "trainer.steps=???: give it a value",
        "warmup.steps=???: give it a value",
        "pasr.zeta=${nope.key} cannot be resolved",
    ):
        assert named in message, (named, message)
    assert "rollout.max_new_tokens" not in message and "\n" not in message and message.count("trainer.steps") == 1


def test_values_that_failed_later_are_refused_up_front(tmp_path):
    """Each of these passed the config check and failed after the run folder was made (a
    traceback; a thread count of 100000 ran out of memory): a misspelt prompt name, a missing or
    binary prompt file, an unknown logger, negative or too large seeds, more threads than cores."""
    import os

    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"\xff\xfe\x00prompt")
    bad = {
        "pasr.prompts.refine": "refine_sytem",
        "pasr.prompts.plain": str(tmp_path / "absent.txt"),
        "rrr.prompts.reflect": str(binary),
        "trainer.logger": "[console,foo]",
        "trainer.seed": "-1",
        "warmup.seed": str(2**32),
        "data.seed": "-3",
        "model.threads": "100000",
    }
    with pytest.raises(ConfigError) as exc:
        load_config(preset="tiny", overrides=[f"{k}={v}" for k, v in bad.items()])
    message = str(exc.value)
    for named in (
        "pasr.prompts.refine=refine_sytem: unknown prompt 'refine_sytem'",
        f"pasr.prompts.plain={tmp_path / 'absent.txt'}: prompt template file not found",
        f"rrr.prompts.reflect={binary}: prompt template file {binary} is not UTF-8 text (byte 0xff at offset 0)",
        "trainer.logger: unknown logger 'foo'",
        "trainer.seed must be in [0, 4294967295], got -1",
        f"warmup.seed must be in [0, 4294967295], got {2**32}",
        "data.seed must be in [0, 4294967295], got -3",
        "model.threads must be 0 (measured at start) or 1 to the",
    ):
        assert named in message, (named, message)
    assert "\n" not in message and "unknown logger 'console'" not in message
    cores = len(os.sched_getaffinity(0))
    mine = tmp_path / "mine.txt"
    mine.write_text("Think, then answer.")
    ok = load_config(
        preset="tiny",
        overrides=[
            f"model.threads={cores}",
            "trainer.logger=[console]",
            f"trainer.seed={2**32 - 1}",
            f"pasr.prompts.refine={mine}",
        ],
    )
    assert ok.model.threads == cores and ok.trainer.logger == ["console"]


def test_a_judge_prompt_needs_a_judge_that_sends_it():
    """Issue 52: pasr.prompts.judge under the rule judge was accepted and did nothing."""
    with pytest.raises(ConfigError, match=r"pasr.prompts.judge=judge_binary has no effect with pasr.judge.kind=rule"):
        load_config(preset="tiny", overrides=["pasr.prompts.judge=judge_binary"])
    llm = ["pasr.judge.kind=openai", "pasr.judge.base_url=http://127.0.0.1:1/v1", "pasr.judge.model=m"]
    assert (
        load_config(preset="tiny", overrides=[*llm, "pasr.prompts.judge=judge_binary"]).pasr.prompts.judge
        == "judge_binary"
    )
    assert load_config(preset="tiny").pasr.prompts.judge == "judge_continuous"  # the default is no setting


def test_the_logger_list_is_verls():
    """trainer.logger is checked against a copy of verl's Tracking.supported_backend (importing
    verl costs seconds): read verl's from its source, so the copy cannot fall behind."""
    import ast
    import importlib.util

    from recipe.local_engine.config import TRACKING_BACKENDS

    tree = ast.parse(open(importlib.util.find_spec("verl.utils.tracking").origin).read())
    tracking = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "Tracking")
    supported = next(
        ast.literal_eval(s.value)
        for s in tracking.body
        if isinstance(s, ast.Assign) and s.targets[0].id == "supported_backend"
    )
    assert sorted(TRACKING_BACKENDS) == sorted(supported)


def test_a_logger_whose_package_is_missing_is_refused(monkeypatch):
    """verl's Tracking imports a backend's package when the run starts (an ImportError then)."""
    from recipe.local_engine import config

    monkeypatch.setitem(config.TRACKING_BACKENDS, "wandb", "pasr_no_such_package")
    with pytest.raises(ConfigError, match="trainer.logger: wandb needs the Python package pasr_no_such_package"):
        load_config(preset="tiny", overrides=["trainer.logger=[wandb]"])
