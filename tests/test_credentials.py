"""Credentials in the judge URL (``pasr.judge.base_url=http://user:password@host/v1``) never reach
the disk (issue 51): a local run's config.yaml, its resume, the judge-error stop message, the
verl engine's endpoint check and its Hydra output. The judge itself (Basic authentication,
redacted errors) is tested in tests/test_judges.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PASSWORD = "Sw0rdfish99"
URL = f"http://alice:{PASSWORD}@judge.invalid:8000/v1"
JUDGE = ["pasr.judge.kind=openai", f"pasr.judge.base_url={URL}", "pasr.judge.model=j"]


def test_a_local_runs_config_yaml_keeps_no_url_credentials_and_its_resume_asks_for_them(tmp_path):
    from data.cli_errors import CliError
    from recipe.local_engine.cli import _resume_config
    from recipe.local_engine.config import load_config
    from recipe.local_engine.run_io import write_config

    run = tmp_path / "run"
    run.mkdir()
    cfg = load_config(overrides=JUDGE)
    write_config(run, cfg)
    text = (run / "config.yaml").read_text()
    assert PASSWORD not in text and "alice" not in text and "base_url: http://[REDACTED]@judge.invalid:8000/v1" in text
    assert cfg.pasr.judge.base_url == URL  # the run itself keeps using them

    with pytest.raises(CliError, match=r"keeps the judge URL without its credentials .*pasr\.judge\.base_url=URL$"):
        _resume_config(run, [], force=False)
    resumed = _resume_config(run, [f"pasr.judge.base_url={URL}"], force=False)  # not "other settings"
    assert resumed.pasr.judge.base_url == URL


def test_the_judge_error_stop_message_hides_url_credentials():
    from data.records import RolloutRecord
    from recipe.judge_errors import JudgeErrorRateExceeded, check_judge_errors
    from recipe.pasr_config import JudgeConfig

    record = RolloutRecord(
        run_id="r",
        query_id="q",
        data_source="s",
        variant="refine",
        prompt="p",
        response="",
        response_tokens=0,
        format_ok=False,
        format_reason="x",
        n_refine=0,
        extracted_answer="1",
        gold="1",
        acc=None,
        judge_error="openai judge: timeout",
        step=1,
    )
    judge = JudgeConfig(kind="openai", base_url=URL, model="j")
    with pytest.raises(JudgeErrorRateExceeded) as exc:
        check_judge_errors([record], 0.2, step=1, judge=judge, records_at="x")
    assert PASSWORD not in str(exc.value) and "base_url=http://[REDACTED]@judge.invalid:8000/v1" in str(exc.value)


def test_the_verl_judge_endpoint_check_hides_url_credentials():
    from recipe.pasr_config import JudgeConfig, PasrConfig
    from recipe.verl_engine.config import check_judge_endpoint

    judge = JudgeConfig(
        kind="openai", base_url=f"http://alice:{PASSWORD}@127.0.0.1:9/v1", model="j", timeout_s=2, retries=0
    )
    why = check_judge_endpoint(PasrConfig(judge=judge))
    assert why and "127.0.0.1:9" in why and PASSWORD not in why and "alice" not in why


def test_the_verl_entrypoint_writes_no_url_credentials(tmp_path):
    """python3 -m recipe.main_pasr with the URL on its command line, stopped by its preflight (the
    judge does not answer): Hydra wrote the config and the command line into outputs/*/.hydra/,
    password included; nothing under its working directory or on its stderr holds it now."""
    env = {**os.environ, "PASR_SKIP_GPU_CHECK": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "recipe.main_pasr",
            *JUDGE[:1],
            f"pasr.judge.base_url=http://alice:{PASSWORD}@127.0.0.1:9/v1",
            *JUDGE[2:],
            "actor_rollout_ref.rollout.name=hf",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert (
        proc.returncode == 2 and "pasr verl: error: " in proc.stderr and "127.0.0.1:9" in proc.stderr
    )  # the judge check
    assert PASSWORD not in proc.stderr + proc.stdout
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert not [p for p in written if PASSWORD in p.read_text(errors="replace")], written


def test_the_config_verl_hands_its_trackers_keeps_no_url_credentials(tmp_path):
    """verl's fit() builds Tracking(config=the whole resolved config); wandb and mlflow write that
    config to disk and to their server. Through the tracker the verl engine installs, the judge
    URL arrives without its password, everything else as it was."""
    from verl.utils import tracking

    from recipe.verl_engine.trainer import metrics_file_tracking

    seen = {}

    def fake_init(self, project_name, experiment_name, default_backend="console", config=None):
        seen["config"] = config

    config = {
        "pasr": {"judge": {"base_url": f"http://alice:{PASSWORD}@judge:8000/v1", "model": "m"}},
        "data": {"train_files": ["a.parquet"], "max_prompt_length": 512},
    }
    original = tracking.Tracking.__init__
    tracking.Tracking.__init__ = fake_init
    try:
        with metrics_file_tracking(str(tmp_path), "pasr"):
            tracking.Tracking("p", "e", default_backend=[], config=config)
    finally:
        tracking.Tracking.__init__ = original
    assert PASSWORD not in repr(seen["config"])
    assert seen["config"]["pasr"]["judge"]["base_url"] == "http://[REDACTED]@judge:8000/v1"
    assert seen["config"]["data"] == config["data"] and seen["config"]["pasr"]["judge"]["model"] == "m"
