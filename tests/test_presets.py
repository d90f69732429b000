"""The presets a user starts from: every one loads and validates, ``pasr train --help`` lists
them all, and ``--preset tiny`` runs the whole pipeline (warm-up, PASR steps, checkpoints,
evaluations, ``pasr stats``) end to end."""

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
    listed = out.split("presets (--preset NAME):", 1)[1].split("\n\n", 1)[0]
    line = next(ln for ln in listed.splitlines() if ln.split() and ln.split()[0] == name)
    assert len(line.split(None, 1)[1]) > 20  # a description from the preset's first comment line


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
    with pytest.raises(ConfigError, match=r"invalid config key trainer\.steps: .*Integer"):
        load_config(preset="tiny", overrides=["trainer.steps=abc"])  # a wrong type is still named


def test_rrr_arithmetic_preset_is_the_run_that_learned():
    """`--preset rrr_arithmetic` trains what benchmarks/results/learning_signal_rrr_seeds_w60.json
    measured (`--preset rrr` with that JSON's overrides), but for the machine settings (threads,
    dtype), the base-model evaluation it skips and its run directory."""
    from omegaconf import OmegaConf

    from recipe.local_engine.config import to_yaml

    measured = json.loads((CONFIG_DIR.parents[1] / "benchmarks" / "results" / "learning_signal_rrr_seeds_w60.json").read_text())
    machine = ("model.threads=", "model.rollout_dtype=", "algo.bf16_autocast=")
    trained = [o for o in measured["overrides"] if not o.startswith(machine)]
    as_run = OmegaConf.create(to_yaml(load_config(preset=measured["preset"], overrides=trained)))
    preset = OmegaConf.create(to_yaml(load_config(preset="rrr_arithmetic")))
    for cfg in (as_run, preset):
        cfg.trainer.eval_at_start = None
        cfg.trainer.run_dir = None
    assert OmegaConf.to_container(preset) == OmegaConf.to_container(as_run)
