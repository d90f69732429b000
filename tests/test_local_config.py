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

    bad = {"algo.lr": "inf", "warmup.lr": "inf", "pasr.weights.format": "nan", "pasr.zeta": "nan",
           "pasr.tie_value": "nan", "pasr.weights.acc": "inf", "rollout.top_p": "-inf", "pasr.judge.backoff_s": "inf"}
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
    assert [rl_learning_rate(1e-5, s, 4) for s in (1, 2, 3, 4, 5, 40)] == pytest.approx([2.5e-6, 5e-6, 7.5e-6, 1e-5, 1e-5, 1e-5])
    assert rl_learning_rate(1e-5, 1, 0) == 1e-5  # 0: no warm-up
    assert rl_learning_rate(1e-5, 1, 1) == 1e-5  # the first step is never a zero-lr no-op
    with pytest.raises(ConfigError, match="algo.lr_warmup_steps"):
        load_config(overrides=["algo.lr_warmup_steps=-1"])


def test_warmup_learning_rate_holds_or_decays_on_verls_cosine():
    assert [warmup_learning_rate(5e-5, s, 4, "constant") for s in (1, 4)] == [5e-5, 5e-5]
    cosine = [warmup_learning_rate(4.0, s, 4, "cosine") for s in (1, 2, 3, 4)]
    # half a cosine from the full lr at the first step towards zero after the last: 4 (1 + cos(pi k / 4)) / 2
    assert cosine == pytest.approx([4.0, 2 + 2 ** 0.5, 2.0, 2 - 2 ** 0.5])
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
