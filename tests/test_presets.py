"""The presets a user starts from: every one loads and validates, ``pasr train --help`` lists
them all with the presets each extends, the CPU's reward is the ``cpu`` preset over the one set of
defaults (the paper's), the chain a config was built from is recorded, and ``--preset tiny`` runs
the whole pipeline (warm-up, PASR steps, checkpoints, evaluations, ``pasr stats``) end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pasr_cli import main
from recipe.local_engine.config import CONFIG_DIR, load_config

PRESETS = sorted(p.stem.removeprefix("local_") for p in CONFIG_DIR.glob("local_*.yaml"))


@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_loads_and_is_listed_in_help(name, capsys):
    load_config(preset=name)  # validates
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = capsys.readouterr().out
    listed = out.split("presets (--preset NAME; without one: default):", 1)[1].split("\n\n", 1)[0]
    line = next(ln for ln in listed.splitlines() if ln.split() and ln.split()[0] == name)
    assert len(line.split(None, 1)[1]) > 20  # a description from the preset's first comment line
    over = load_config(preset=name).presets[1:]  # what it extends, as --help shows it
    assert line.endswith(f" [extends {' -> '.join(over)}]") if over else "[extends" not in line


def test_one_set_of_defaults_and_the_cpu_preset_over_it():
    """pasr.* has one default per key, the paper's, for the local engine, the verl engine and
    pasr eval; what the CPU needs is the cpu preset, which default (pasr train without --preset)
    and every other local preset extend, so they train what they trained before."""
    from eval.config import EvalConfig
    from recipe.local_engine.config import LocalTrainConfig
    from recipe.pasr_config import PasrConfig, PromptsConfig
    from recipe.verl_engine.config import compose_config, pasr_config

    paper = PasrConfig()
    assert (paper.n_refine, paper.n_plain, paper.tie_value, paper.refine_compare, paper.empty_refine_value) == (
        8,
        8,
        -0.5,
        "sign",
        None,
    )
    assert LocalTrainConfig().pasr == paper == pasr_config(compose_config([]))
    assert (
        (
            EvalConfig(model="m", datasets=["d"], out="o").refine_prompt,
            EvalConfig(model="m", datasets=["d"], out="o").plain_prompt,
        )
        == (PromptsConfig.refine, PromptsConfig.plain)
        == ("refine_system", "plain_system")
    )
    cpu = load_config(preset="cpu").pasr
    assert (cpu.n_refine, cpu.n_plain, cpu.tie_value, cpu.refine_compare, cpu.empty_refine_value) == (
        4,
        2,
        0.0,
        "margin",
        0.0,
    )
    assert (cpu.prompts.refine, cpu.prompts.plain) == ("refine_system_short", "plain_system_short")
    assert load_config().presets == ["default", "cpu"] and load_config().pasr == cpu
    for name in PRESETS:
        cfg = load_config(preset=name)
        assert cfg.presets[0] == name and cfg.presets[-1] == "cpu", name
        assert cfg.pasr.tie_value == 0.0 and cfg.pasr.refine_compare == "margin", name


def test_the_preset_chain_is_recorded_and_checked(tmp_path, monkeypatch):
    """config.yaml records the chain (a resume reads it back as it is); a --config file may name
    its preset with extends:, but not beside --preset; presets: is pasr train's to write; an
    unknown preset in extends: and a circle are one line naming them."""
    from recipe.local_engine import config as local_config
    from recipe.local_engine.config import to_yaml
    from recipe.pasr_config import ConfigError

    saved = tmp_path / "config.yaml"
    saved.write_text(to_yaml(load_config(preset="tiny")))
    assert "presets:\n- tiny\n- default\n- cpu\n" in saved.read_text()
    assert load_config(config_file=str(saved), saved_run=True).presets == ["tiny", "default", "cpu"]
    mine = tmp_path / "mine.yaml"
    mine.write_text("extends: demo\ntrainer:\n  steps: 3\n")
    cfg = load_config(config_file=str(mine))
    assert cfg.presets == ["demo", "default", "cpu"] and cfg.trainer.steps == 3 and cfg.warmup.steps == 100
    with pytest.raises(ConfigError, match=f"--preset tiny and {mine}'s extends: demo both name the preset"):
        load_config(preset="tiny", config_file=str(mine))
    with pytest.raises(ConfigError, match="presets cannot be set by an override"):
        load_config(overrides=["presets=[demo]"])
    mine.write_text("presets: [demo]\n")
    with pytest.raises(ConfigError, match=f"config file {mine}: presets is what pasr train records"):
        load_config(config_file=str(mine))
    monkeypatch.setattr(local_config, "CONFIG_DIR", tmp_path)
    (tmp_path / "local_a.yaml").write_text("extends: b\n")
    (tmp_path / "local_b.yaml").write_text("extends: a\n")
    (tmp_path / "local_c.yaml").write_text("extends: nope\n")
    with pytest.raises(ConfigError, match=r"preset 'a': extends goes round in a circle \(a -> b -> a\)"):
        load_config(preset="a")
    with pytest.raises(ConfigError, match=r"preset 'c' \(.*local_c.yaml\): extends: unknown preset 'nope'"):
        load_config(preset="c")


def _run_tiny(tmp_path: Path, *overrides: str) -> Path:
    run = tmp_path / "run"
    assert main(["train", "--preset", "tiny", "--run-dir", str(run), *overrides]) == 0
    assert main(["stats", str(run), "--out", str(run / "report"), "--progress", "off"]) == 0
    return run


def _check_tiny_run(run: Path) -> None:
    cfg = load_config(preset="tiny")
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    phases = [r["phase"] for r in rows]
    assert phases.count("warmup") == cfg.warmup.steps and phases.count("pasr") == cfg.trainer.steps == 2
    assert [r["tag"] for r in rows if r["phase"] == "eval"] == ["warmup", "final"]
    step = cfg.warmup.steps + 1
    records = [json.loads(x) for x in (run / "rollouts" / f"step_{step:06d}.jsonl").read_text().splitlines()]
    per_query = cfg.pasr.n_refine + cfg.pasr.n_plain
    assert len(records) == cfg.rollout.queries_per_step * per_query
    final = [json.loads(x) for x in (run / "eval" / "final.jsonl").read_text().splitlines()]
    assert len(final) == cfg.data.eval_size
    checkpoints = sorted(p.name for p in (run / "checkpoints").glob("step_*"))
    # the end of the warm-up (pinned) and the last step, within keep_last (+ the pinned one)
    assert {f"step_{cfg.warmup.steps:06d}", f"step_{cfg.warmup.steps + 2:06d}"} <= set(checkpoints)
    assert len(checkpoints) <= cfg.trainer.keep_last + 1
    stats = json.loads((run / "report" / "stats.json").read_text())
    assert stats and (run / "report" / "report.md").is_file()


def test_tiny_preset_runs_the_whole_pipeline(tiny_model_dir, tmp_path, capsys):
    """The preset's own sizes and stages on a tiny random model (the real one: the slow test);
    the run says where it writes before anything else, and each evaluation has a bar."""
    run = _run_tiny(tmp_path, f"model.path={tiny_model_dir}")
    _check_tiny_run(run)
    err = capsys.readouterr().err
    assert err.lstrip().startswith(f"pasr train: writing {run.resolve()}")
    assert "eval warmup" in err and "eval final" in err


@pytest.mark.slow
def test_tiny_preset_with_the_embedded_model(tmp_path):
    _check_tiny_run(_run_tiny(tmp_path))


def test_every_mistyped_key_is_named_at_once():
    """A config with several typos is fixed in one go: each unknown key by its full name, with
    the closest known one (OmegaConf's merge alone stops at the first)."""
    from recipe.pasr_config import ConfigError

    with pytest.raises(ConfigError) as exc:
        load_config(preset="tiny", overrides=["trainer.stepz=3", "modle.path=x", "pasr.judge.timout_s=3"])
    msg = str(exc.value)
    assert "trainer.stepz (did you mean trainer.steps?)" in msg and "modle (did you mean model?)" in msg
    assert "pasr.judge.timout_s (did you mean pasr.judge.timeout_s?)" in msg
    with pytest.raises(ConfigError, match=r"trainer\.steps=abc is not a valid value: .*Integer"):
        load_config(preset="tiny", overrides=["trainer.steps=abc"])  # a wrong type is still named


def test_rrr_arithmetic_preset_is_the_measured_setting_with_a_decayed_warmup():
    """`--preset rrr_arithmetic` trains what benchmarks/results/learning_signal_rrr_seeds_w60.json
    measured (`--preset rrr` with that JSON's overrides) with the warm-up's rate decayed, the
    control docs/results/learning_signal_rrr.md measured it against, but for the machine settings
    (threads, dtype), the base-model evaluation it skips and its run directory."""
    from omegaconf import OmegaConf

    from recipe.local_engine.config import to_yaml

    measured = json.loads(
        (CONFIG_DIR.parents[1] / "benchmarks" / "results" / "learning_signal_rrr_seeds_w60.json").read_text()
    )
    machine = ("model.threads=", "model.rollout_dtype=", "algo.bf16_autocast=")
    trained = [o for o in measured["overrides"] if not o.startswith(machine)] + ["warmup.lr_schedule=cosine"]
    as_run = OmegaConf.create(to_yaml(load_config(preset=measured["preset"], overrides=trained)))
    preset = OmegaConf.create(to_yaml(load_config(preset="rrr_arithmetic")))
    for cfg in (as_run, preset):
        cfg.trainer.eval_at_start = None
        cfg.trainer.run_dir = None
        cfg.presets = None  # built from rrr over its overrides, or from rrr_arithmetic
    assert OmegaConf.to_container(preset) == OmegaConf.to_container(as_run)
