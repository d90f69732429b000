"""``trainer.logger=[wandb]`` on a machine with no Weights & Biases login (issue 63): the local run
failed inside wandb once its folder was made and the model loaded; it is refused before anything
is made, in one line saying what to set."""

from __future__ import annotations

import pytest

from recipe.metrics_file import tracker_login_problems

WANDB_VARS = ("WANDB_API_KEY", "WANDB_IDENTITY_TOKEN_FILE", "WANDB_MODE", "WANDB_DISABLED", "WANDB_BASE_URL")


def test_what_counts_as_a_login(tmp_path):
    none = {"NETRC": str(tmp_path / "no_netrc"), "HOME": str(tmp_path)}
    [problem] = tracker_login_problems(["console", "wandb"], none)
    assert "WANDB_API_KEY" in problem and "wandb login" in problem and "drop wandb from trainer.logger" in problem
    assert tracker_login_problems(["console", "tensorboard"], none) == []
    assert tracker_login_problems("wandb", {**none, "WANDB_API_KEY": "k" * 40}) == []
    assert tracker_login_problems(["wandb"], {**none, "WANDB_MODE": "offline"}) == []
    netrc = tmp_path / "netrc"
    netrc.write_text("machine api.wandb.ai\n  login user\n  password " + "k" * 40 + "\n")
    netrc.chmod(0o600)
    assert tracker_login_problems(["wandb"], {**none, "NETRC": str(netrc)}) == []
    # a login for another server is not one for the server asked
    assert tracker_login_problems(["wandb"], {**none, "NETRC": str(netrc), "WANDB_BASE_URL": "https://wb.corp:8080"})
    (tmp_path / ".netrc").write_text(netrc.read_text())
    (tmp_path / ".netrc").chmod(0o600)
    assert tracker_login_problems(["wandb"], {"HOME": str(tmp_path)}) == []  # wandb login's own file


def test_pasr_train_refuses_before_the_run_folder_is_made(tiny_model_dir, tmp_path, run_cli, monkeypatch):
    for var in WANDB_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no_netrc"))
    run_dir = tmp_path / "run"
    rc, out, err = run_cli(
        [
            "train",
            "--preset",
            "tiny",
            f"model.path={tiny_model_dir}",
            "trainer.logger=[wandb]",
            "--run-dir",
            str(run_dir),
        ]
    )
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert "no Weights & Biases login" in err and "WANDB_API_KEY" in err
    assert not run_dir.exists()


@pytest.mark.parametrize("logger", ["[console]", "[]"])
def test_other_loggers_need_no_login(tmp_path, logger, monkeypatch):
    from recipe.local_engine.config import load_config

    for var in WANDB_VARS:
        monkeypatch.delenv(var, raising=False)
    cfg = load_config(preset="tiny", overrides=[f"trainer.logger={logger}"])
    assert tracker_login_problems(cfg.trainer.logger, {"NETRC": str(tmp_path / "none")}) == []
