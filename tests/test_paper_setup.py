"""The paper setup (issue 64 items 2, 3 and 6): recipe/config/setup/paper_qwen2_5_7b.yaml is the one
config the run script and ``pasr submit`` compose for the same inputs; it states only what it
changes and docs/verl_engine.md lists each change; ``pasr check`` prints how often a run saves,
what it keeps and what a preemption loses, and notes a run that saves rarely, keeps everything or
would not resume; the 8-GPU script's dry run, on one node and on two, accounts for every GPU."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pasr_cli import main as pasr_main

REPO = Path(__file__).resolve().parents[1]
SETUP = "paper_qwen2_5_7b"
SETUP_FILE = REPO / "recipe" / "config" / "setup" / f"{SETUP}.yaml"
SCRIPT = REPO / "recipe" / "scripts" / "run_pasr_qwen2_5_7b.sh"
JUDGE = "Qwen/Qwen2.5-14B-Instruct"


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    """A 200-row training parquet and a 20-row validation parquet, as `pasr data prepare` writes them."""
    tmp = tmp_path_factory.mktemp("setup")
    rows = [{"question": f"What is {k} + {k}?", "answer": str(2 * k)} for k in range(220)]
    (tmp / "sums.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:200]))
    (tmp / "held.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[200:]))
    for name, split in (("sums", "train"), ("held", "test")):
        args = ["data", "prepare", "--dataset", str(tmp / f"{name}.jsonl"), "--split", split, "--out", str(tmp)]
        assert pasr_main(args) == 0
    return {"train": tmp / "sums_train.parquet", "val": tmp / "held_test.parquet", "tmp": tmp}


def _leaves(node: dict, prefix: str = ""):
    for key, value in node.items():
        path = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict):
            yield from _leaves(value, path)
        else:
            yield path, value


def test_the_setup_states_only_what_it_changes_and_the_docs_list_each_change():
    import yaml
    from omegaconf import OmegaConf

    from recipe.verl_engine.config import compose_config, engine_config, pasr_config

    setup = yaml.safe_load(SETUP_FILE.read_text())
    base, ours = compose_config([]), compose_config([f"setup={SETUP}", "trainer.default_local_dir=/ck"])
    pasr_config(ours), engine_config(ours)  # valid as the run's preflight reads it
    leaves = list(_leaves(setup))
    assert {k for k, _ in leaves} >= {"trainer.save_freq", "trainer.max_actor_ckpt_to_keep", "trainer.experiment_name"}
    for key, value in leaves:
        if "${" not in str(value):
            assert OmegaConf.select(base, key) != value, f"{key}: restates pasr_trainer.yaml's value"
            assert OmegaConf.select(ours, key) == value, key
    assert ours.pasr.judge.cache_path == "/ck/judge_cache.jsonl"
    # command-line overrides still win over the setup
    assert compose_config([f"setup={SETUP}", "trainer.save_freq=3"]).trainer.save_freq == 3
    docs = (REPO / "docs" / "verl_engine.md").read_text()
    section = docs[docs.index("### The paper setup") :]
    section = section[: section.index("\n### ", 5)]
    for key, _ in leaves:
        assert f"`{key}`" in section, f"{key} is not in docs/verl_engine.md's paper setup table"


# --------------------------------------------------------------------------- script and submit
def _script_check_call(tmp: Path, env: dict[str, str]) -> list[str]:
    """The arguments the 8-GPU script's dry run gives ``pasr check`` (python3 stubbed to record them)."""
    tmp.mkdir(parents=True, exist_ok=True)
    log, stub = tmp / "calls", tmp / "python3"
    stub.write_text(f'#!/bin/sh\nprintf "%s\\037" "$@" >> {log}\necho >> {log}\n')
    stub.chmod(0o755)
    full = {
        **{k: v for k, v in os.environ.items() if k not in ("WANDB_API_KEY", "SETUP", "NO_CHECK")},
        "PATH": f"{tmp}:{os.environ['PATH']}",
        "DRY_RUN": "1",
        "NODE_GPUS": "8",
        "DATA_DIR": str(tmp / "data"),
        **env,
    }
    proc = subprocess.run(["bash", str(SCRIPT)], env=full, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    [call] = [c for c in (ln.split("\037")[:-1] for ln in log.read_text().splitlines() if ln) if "check" in c]
    return call[call.index("check") + 1 :]


def _composed(judge_gpus: int, judge_model: str | None, node_gpus: int, overrides: list[str]) -> dict:
    from omegaconf import OmegaConf

    from recipe.plan_check import run_overrides
    from recipe.verl_engine.config import compose_config

    return OmegaConf.to_container(
        compose_config(run_overrides(overrides, judge_gpus, judge_model, node_gpus)), resolve=False
    )


@pytest.mark.parametrize(
    "script_env, submit_flags, submit_overrides",
    [
        ({"JUDGE_MODEL": JUDGE, "JUDGE_GPUS": "2"}, ["--judge-model", JUDGE, "--judge-gpus", "2"], []),
        ({}, [], []),
        (
            {"JUDGE_MODEL": JUDGE, "JUDGE_GPUS": "2", "NNODES": "2", "WANDB_API_KEY": "k"},
            ["--env", "WANDB_API_KEY=k", "--judge-model", JUDGE, "--judge-gpus", "2"],
            ["trainer.nnodes=2", "trainer.logger=[console,wandb]"],
        ),
    ],
    ids=["judge-on-2-gpus", "rule-judge", "two-nodes-wandb"],
)
def test_the_script_and_submit_compose_the_same_config(
    files, tmp_path, monkeypatch, script_env, submit_flags, submit_overrides
):
    """The same inputs (data files, checkpoint folder, judge, nodes, tracker) given to
    run_pasr_qwen2_5_7b.sh and to `pasr submit ... -- setup=paper_qwen2_5_7b`: the config each
    checks before it starts is the same, and it is the paper setup's."""
    from data.cli_errors import CliError
    from recipe import jobs, plan_check
    from recipe.plan_check.report import Report

    ckpt = tmp_path / "ckpt"
    data = {"TRAIN_FILE": str(files["train"]), "VAL_FILE": str(files["val"]), "CKPT_DIR": str(ckpt)}
    script = _script_check_call(tmp_path / "script", {**data, **script_env})
    parser = argparse.ArgumentParser()
    plan_check.build_parser(parser)
    args = parser.parse_args(script)
    script_cfg = _composed(args.judge_gpus, args.judge_model, args.node_gpus, args.overrides[1:])

    seen = {}

    def check(overrides, **kwargs):
        seen.update(overrides=list(overrides), **kwargs)
        return Report()

    def no_cluster(*_args, **_kwargs):
        raise CliError("stop here: the test has no cluster")

    monkeypatch.setattr(plan_check, "check", check)
    monkeypatch.setattr(jobs, "connect", no_cluster)
    overrides = [
        f"setup={SETUP}",
        f"data.train_files={files['train']}",
        f"data.val_files={files['val']}",
        f"trainer.default_local_dir={ckpt}",
        *submit_overrides,
    ]
    argv = ["submit", "--address", "http://127.0.0.1:1", "--working-dir", str(REPO), *submit_flags, "--", *overrides]
    assert pasr_main(argv) == 2 and seen  # checked, then stopped where the cluster would be asked
    submit_cfg = _composed(seen["judge_gpus"], seen["judge_model"], seen["node_gpus"], seen["overrides"])
    assert submit_cfg == script_cfg
    trainer = submit_cfg["trainer"]
    assert (trainer["save_freq"], trainer["max_actor_ckpt_to_keep"], trainer["experiment_name"]) == (
        8,
        3,
        "pasr-qwen2.5-7b",
    )
    assert submit_cfg["data"]["train_batch_size"] == 96 and submit_cfg["pasr"]["zeta"] == 0.05


# --------------------------------------------------------------------------- the dry run's GPUs
def _dry_run(files, tmp_path, **env) -> str:
    full = {
        **{k: v for k, v in os.environ.items() if k not in ("WANDB_API_KEY", "SETUP", "NODE_GPUS")},
        "DRY_RUN": "1",
        "JUDGE_MODEL": JUDGE,
        "JUDGE_GPUS": "2",
        "TRAIN_FILE": str(files["train"]),
        "VAL_FILE": str(files["val"]),
        "CKPT_DIR": str(tmp_path / "ckpt"),
        "DATA_DIR": str(tmp_path / "data"),
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        **env,
    }
    proc = subprocess.run(["bash", str(SCRIPT)], env=full, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1] == "pasr check: no problem found"
    return proc.stdout


def test_the_dry_run_accounts_for_every_gpu_on_one_node_and_on_two(files, tmp_path):
    """DRY_RUN=1 on the 8-GPU script (no GPU here: it plans 8-GPU nodes): the judge's 2 GPUs and
    the 6 that train, none idle; with NNODES=2 the second node's 2 GPUs that nothing uses are
    named, with why and what to do. The checkpoints the setup saves are in the plan."""
    one = _dry_run(files, tmp_path)
    assert "GPUs             8 = 6 training (1 node(s) x 6) + 2 judge (vLLM, tensor parallel 2, on one node)" in one
    assert "idle GPUs        none: every GPU of the 1 node(s) x 8 GPU(s) has a role" in one
    assert "checkpoints      every 8 step(s)" in one and "the last 3 kept" in one
    assert "(offloaded to CPU between uses)" in one and "1152 = 96 prompts" not in one
    two = _dry_run(files, tmp_path, NNODES="2")
    assert "GPUs             14 = 12 training (2 node(s) x 6) + 2 judge" in two
    assert "idle GPUs        2 of the 2 node(s) x 8 GPU(s): every node trains on trainer.n_gpus_per_node" in two
    assert "serve the judge elsewhere (pasr.judge.base_url) to train on all" in two


# --------------------------------------------------------------------------- checkpoints in the plan
def _check(capsys, files, *extra: str) -> tuple[int, str]:
    plan = [
        "actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct",
        f"data.train_files={files['train']}",
        f"data.val_files={files['val']}",
        f"trainer.default_local_dir={files['tmp'] / 'ckpt'}",
        "data.train_batch_size=8",
        "actor_rollout_ref.actor.ppo_mini_batch_size=8",
        *extra,
    ]
    rc = pasr_main(["check", "--", *plan])
    out = capsys.readouterr().out
    assert "Traceback" not in out
    return rc, out


def test_the_plan_says_what_a_preemption_loses_and_what_the_disk_holds(files, capsys):
    """200 rows / 8 = 25 steps an epoch. Saving every 20 steps over 4 epochs and keeping all:
    two notes (a preemption loses up to 80% of an epoch; 5 checkpoints of 84 GB kept), still no
    problem; every 2 steps keeping 3: neither note. No checkpoint, a resume switched off and a
    save_freq that is not a number are said too."""
    rc, out = _check(capsys, files, "trainer.total_epochs=4", "trainer.save_freq=20")
    assert rc == 0
    assert (
        "checkpoints      every 20 step(s) (80% of an epoch of 25 steps), 5 over the run, all kept "
        "(trainer.max_actor_ckpt_to_keep=null); ~84 GB each" in out
    )
    assert "note  ckpts     trainer.save_freq=20 is 80% of an epoch of 25 steps: a preemption loses up to 20" in out
    assert "trainer.save_freq=2 saves every tenth of an epoch" in out
    assert "note  ckpts     every checkpoint is kept: 5 of ~84 GB (~420 GB) over the run" in out
    rc, out = _check(capsys, files, "trainer.total_epochs=4", "trainer.save_freq=2", "trainer.max_actor_ckpt_to_keep=3")
    assert rc == 0 and "note  ckpts" not in out
    assert "every 2 step(s) (8% of an epoch of 25 steps), 50 over the run, the last 3 kept" in out
    assert "~252 GB at most in trainer.default_local_dir; a preemption loses at most 2 step(s)" in out
    rc, out = _check(capsys, files, "trainer.save_freq=-1")
    assert rc == 0 and "checkpoints      none (trainer.save_freq=-1)" in out
    assert "note  ckpts     trainer.save_freq=-1: no checkpoint is saved, so a preempted or stopped run starts" in out
    rc, out = _check(capsys, files, "trainer.resume_mode=disable")
    assert "note  ckpts     trainer.resume_mode=disable: a resubmission starts from scratch" in out
    rc, out = _check(capsys, files, "trainer.save_freq=often")
    assert rc == 2 and "FAIL  ckpts     trainer.save_freq=often: a whole number of steps" in out


def test_the_wandb_run_id_is_kept_with_the_checkpoints(tmp_path, capsys):
    """The id is made once in the checkpoint folder and read back; a user's WANDB_RUN_ID wins; a
    folder that cannot hold it is one line, and the run logs as verl would."""
    from recipe.tracker_run import RUN_ID_FILE, resume_wandb_run

    env: dict[str, str] = {}
    first = resume_wandb_run(str(tmp_path / "ckpt"), env)
    assert env == {"WANDB_RUN_ID": first, "WANDB_RESUME": "allow"}
    assert (tmp_path / "ckpt" / RUN_ID_FILE).read_text().strip() == first
    assert resume_wandb_run(str(tmp_path / "ckpt"), {}) == first
    assert resume_wandb_run(str(tmp_path / "ckpt"), {"WANDB_RUN_ID": "mine"}) == "mine"
    (tmp_path / "a_file").write_text("x")
    env = {}
    assert resume_wandb_run(str(tmp_path / "a_file" / "ckpt"), env) is None and "WANDB_RUN_ID" not in env
    assert "cannot keep the wandb run id" in capsys.readouterr().out


def test_a_resubmission_on_fewer_gpus_than_its_checkpoint_is_refused(files, capsys, tmp_path):
    """After a lost node, resubmitting on one node of a run saved by 16 FSDP ranks: verl loads the
    shards by rank and would stop after its start-up; pasr check says so at once. The same GPU
    count passes and names the step it resumes from; resume_mode=disable starts over, unchecked."""
    ckpt = tmp_path / "ckpt"
    actor = ckpt / "global_step_24" / "actor"
    actor.mkdir(parents=True)
    (actor / "fsdp_config.json").write_text(json.dumps({"FSDP_version": 2, "world_size": 16}))
    (ckpt / "latest_checkpointed_iteration.txt").write_text("24")
    plan = [
        "actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct",
        f"data.train_files={files['train']}",
        f"data.val_files={files['val']}",
        f"trainer.default_local_dir={ckpt}",
        "data.train_batch_size=16",
        "actor_rollout_ref.actor.ppo_mini_batch_size=16",
    ]
    rc = pasr_main(["check", "--", *plan])
    out = capsys.readouterr().out
    assert rc == 2 and "saved by 16 FSDP rank(s), but this run trains on 8 GPU(s)" in out
    assert pasr_main(["check", "--", *plan, "trainer.nnodes=2"]) == 0
    assert (
        "resumes from global_step_24 of trainer.default_local_dir (16 FSDP ranks, as here)" in capsys.readouterr().out
    )
    assert pasr_main(["check", "--", *plan, "trainer.resume_mode=disable"]) == 0
