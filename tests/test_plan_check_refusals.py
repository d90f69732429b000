"""``pasr check`` refuses what verl cannot run (issues 63 and 64): each check fails on the bad plan
and passes on the good one. Sizes from a model's config.json or read strictly from its name
(unknown where neither says), impossible numbers as one line each (never a traceback, never a
follow-on line built on them), a ten-digit batch answered at once, no training rows, validation
on the training files, every bad Hydra override at once, the model folder, heads and memory at
the chosen tensor parallel size, the served judge's heads, the tie band against the judge,
wandb's key, the GPUs no role uses; ``pasr submit`` and the run script run the check first."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pasr_cli import main as pasr_main

REPO = Path(__file__).resolve().parents[1]
JUDGE = "Qwen/Qwen2.5-14B-Instruct"
QWEN_14B = {  # Qwen2.5-14B-Instruct's config.json, the size keys
    "model_type": "qwen2",
    "hidden_size": 5120,
    "num_hidden_layers": 48,
    "vocab_size": 152064,
    "intermediate_size": 13824,
    "num_attention_heads": 40,
    "num_key_value_heads": 8,
    "tie_word_embeddings": False,
}
QWEN_32B = {**QWEN_14B, "num_hidden_layers": 64, "intermediate_size": 27648}
QWEN3_30B_A3B = {
    "model_type": "qwen3_moe",
    "hidden_size": 2048,
    "num_hidden_layers": 48,
    "vocab_size": 151936,
    "intermediate_size": 6144,
    "moe_intermediate_size": 768,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "tie_word_embeddings": False,
}


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    """A 200-row training parquet, a 20-row validation parquet and an empty one, as `pasr data
    prepare` writes them; model folders of Qwen2.5-14B's and 32B's shapes (config.json and a
    weights file)."""
    import pyarrow.parquet as pq

    tmp = tmp_path_factory.mktemp("plan")
    rows = [{"question": f"What is {k} + {k}?", "answer": str(2 * k)} for k in range(220)]
    (tmp / "sums.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:200]))
    (tmp / "held.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[200:]))
    for name, split in (("sums", "train"), ("held", "test")):
        args = ["data", "prepare", "--dataset", str(tmp / f"{name}.jsonl"), "--split", split, "--out", str(tmp)]
        assert pasr_main(args) == 0
    train = tmp / "sums_train.parquet"
    pq.write_table(pq.read_table(train).slice(0, 0), tmp / "empty_train.parquet")
    out = {"train": train, "val": tmp / "held_test.parquet", "empty": tmp / "empty_train.parquet", "tmp": tmp}
    for name, config in (("q14", QWEN_14B), ("q32", QWEN_32B)):
        (tmp / name).mkdir()
        (tmp / name / "config.json").write_text(json.dumps(config))
        (tmp / name / "model.safetensors").write_bytes(b"\0" * 8)
        out[name] = tmp / name
    return out


def _plan(files, *extra: str) -> list[str]:
    """A plan that passes: 96 prompts x 8 rollouts and mini-batches of 24 on 6 or 8 GPUs."""
    return [
        "actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct",
        f"data.train_files={files['train']}",
        f"data.val_files={files['val']}",
        f"trainer.default_local_dir={files['tmp'] / 'ckpt'}",
        "data.train_batch_size=96",
        "actor_rollout_ref.actor.ppo_mini_batch_size=24",
        *extra,
    ]


def _check(capsys, *argv: str) -> tuple[int, str, list[str]]:
    rc = pasr_main(["check", *argv])
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err
    return rc, out.out, [ln.strip() for ln in out.out.splitlines() if ln.strip().startswith("FAIL")]


def test_the_good_plan_passes(files, capsys):
    rc, out, fails = _check(capsys, "--", *_plan(files))
    assert rc == 0 and not fails, fails
    assert "idle GPUs        none: every GPU of the 1 node(s) x 8 GPU(s) has a role" in out
    assert "memory a GPU     ~14 GB of FSDP actor state (16 bytes a parameter over 8 GPU(s)" in out


# --------------------------------------------------------------------------- sizes
def test_sizes_come_from_the_config_or_strictly_from_the_name(tmp_path):
    from recipe.plan_check.model import model_shape, shape_from_config

    moe, _ = shape_from_config(QWEN3_30B_A3B)  # Qwen3-30B-A3B: 30.5B parameters, 3.3B active
    assert moe.params == pytest.approx(30.5e9, rel=0.01) and moe.active == pytest.approx(3.3e9, rel=0.02)
    assert moe.heads == 32 and moe.kv_heads == 4
    assert shape_from_config({**QWEN_14B, "hidden_size": 0}) == (None, "its config.json has no usable hidden_size=0")
    assert model_shape("Qwen/Qwen3-30B-A3B").params == 30e9 and model_shape("Qwen/Qwen3-30B-A3B").active == 3e9
    assert model_shape("Qwen/Qwen2.5-7B-Instruct-1M").params == 7e9  # a context length, not a size
    assert model_shape("org/Llama-3-8B-Instruct-128k").params == 8e9
    assert model_shape("HuggingFaceTB/SmolLM2-135M").params == 135e6
    for unknown in ("mistralai/Mixtral-8x7B-v0.1", "org/model-1M", "org/merge-7B-13B", "/models/policy"):
        shape = model_shape(unknown)
        assert shape.params is None and shape.source.startswith("unknown"), unknown
    (tmp_path / "config.json").write_text(json.dumps(QWEN3_30B_A3B))
    assert model_shape(str(tmp_path)).source == "its config.json"  # the folder's config beats its name


# --------------------------------------------------------------------------- numbers
def test_impossible_numbers_are_one_line_each_and_nothing_is_built_on_them(files, capsys):
    bad = [
        "trainer.nnodes=0",
        "trainer.n_gpus_per_node=-1",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=0",
        "data.train_batch_size=abc",
        "trainer.total_epochs=0",
        "data.max_response_length=-5",
        "actor_rollout_ref.rollout.gpu_memory_utilization=2",
    ]
    rc, out, fails = _check(capsys, "--", *_plan(files, *bad))
    assert rc == 2 and len(fails) == len(bad), fails
    for override in bad:
        assert any(f.startswith(f"FAIL  config    {override}: must be") for f in fails), override
    assert "plan:" not in out  # no sums or step times of impossible numbers
    assert "GPU and batch arithmetic and the plan wait for whole numbers" in out


def test_the_check_options_are_one_line_errors(files, capsys):
    for argv, named in (
        (["--node-gpus", "0"], "--node-gpus 0"),
        (["--judge-gpus", "-1"], "--judge-gpus -1"),
        (["--judge-model", JUDGE], "--judge-model needs --judge-gpus"),
        (["--ping-timeout", "nan"], "--ping-timeout nan"),
        (["--gpu-memory-gb", "0"], "--gpu-memory-gb 0.0"),
        (["--rows", "0"], "--rows 0"),
    ):
        rc = pasr_main(["check", *argv, "--", *_plan(files)])
        err = capsys.readouterr().err
        assert rc == 2 and err.count("\n") == 1 and named in err and "Traceback" not in err, (argv, err)


def test_a_ten_digit_batch_answers_at_once_with_the_nearest_sizes(files):
    from recipe.plan_check.batch import _divisors_near, _multiples_near, batch_problems
    from recipe.plan_check.compose import compose

    prime = 1_000_000_007
    config = compose(
        _plan(
            files,
            f"data.train_batch_size={prime}",
            f"actor_rollout_ref.actor.ppo_mini_batch_size={prime}",
            "trainer.n_gpus_per_node=6",
        )
    )
    start = time.monotonic()
    problems = batch_problems(config)
    assert time.monotonic() - start < 1.0
    assert len(problems) == 2 and "(e.g. 1000000005 or 1000000008)" in problems[0]
    # the arithmetic finds what a search one number at a time finds
    for total, step, value in ((128, 3, 32), (96, 3, 32), (720, 4, 50), (1000, 8, 7)):
        fits = [m for m in range(1, total + 1) if total % m == 0 and m % step == 0]
        below = max((m for m in fits if m < value), default=None)
        above = min((m for m in fits if m > value), default=None)
        assert _divisors_near(total, step, value) == [v for v in (below, above) if v], (total, step, value)
    assert _multiples_near(128, 3) == [126, 129]


# --------------------------------------------------------------------------- data
def test_no_training_rows_and_validation_on_training_files_are_refused(files, capsys):
    for extra, named in (
        ([f"data.train_files={files['empty']}"], f"data.train_files={files['empty']}: 0 rows: nothing to train on"),
        (["data.train_files=[]"], "data.train_files=[]: no file, so no row to train on"),
        (
            [f"data.val_files=[{files['val']},{files['train']}]"],
            f"data.val_files={files['train']} is also in data.train_files",
        ),
    ):
        rc, _, fails = _check(capsys, "--", *_plan(files, *extra))
        assert rc == 2 and len(fails) == 1 and named in fails[0], (extra, fails)


# --------------------------------------------------------------------------- the config
def test_every_bad_override_is_named_at_once_with_its_reason(files, capsys):
    bad = ["pasr.n_refin=3", "trainer.foo=2", "pasr.n_refine=abc", "trainer.nnodes=[1"]
    rc, out, fails = _check(capsys, "--", *_plan(files, *bad))
    assert rc == 2 and len(fails) == 4, fails
    text = "\n".join(fails)
    assert "pasr.n_refin: not a key of the config" in text and "trainer.foo: not a key of the config" in text
    assert "pasr.n_refine=abc: Value 'abc' of type 'str' could not be converted to Integer" in text
    assert "trainer.nnodes=[1: not a Hydra override" in text


# --------------------------------------------------------------------------- model, heads, memory
def test_the_model_folder_must_be_one_verl_loads(files, capsys, tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text("{not json")
    for path, why in (
        (tmp_path / "missing", "no such folder"),
        (tmp_path / "empty", "no config.json in it"),
        (tmp_path / "broken", "its config.json does not read as JSON"),
    ):
        rc, _, fails = _check(capsys, "--", *_plan(files, f"actor_rollout_ref.model.path={path}"))
        assert rc == 2 and len(fails) == 1 and fails[0].startswith(f"FAIL  model     {_key()}={path}: {why}")
    rc, out, fails = _check(capsys, "--", *_plan(files, f"actor_rollout_ref.model.path={files['q14']}"))
    assert rc == 0 and not fails and "a model folder with a config.json and weights" in out
    assert "policy           " + str(files["q14"]) + ": 14.8B parameters (from its config.json)" in out


def _key() -> str:
    return "actor_rollout_ref.model.path"


def test_heads_must_split_over_the_rollouts_tensor_parallel_size(files, capsys):
    model = f"actor_rollout_ref.model.path={files['q14']}"
    tp = "actor_rollout_ref.rollout.tensor_model_parallel_size"
    rc, _, fails = _check(capsys, "--", *_plan(files, model, "trainer.n_gpus_per_node=6", f"{tp}=3"))
    assert rc == 2 and len(fails) == 1
    assert f"{tp}=3: {files['q14']}: its 40 attention heads do not split over tensor parallel 3" in fails[0]
    rc, out, fails = _check(capsys, "--", *_plan(files, model, "trainer.n_gpus_per_node=6", f"{tp}=2"))
    assert rc == 0 and "its 40 attention heads split over" in out
    rc, out, _ = _check(capsys, "--", *_plan(files))  # a hub name: unknown, said so
    assert "attention heads unknown (no local config.json)" in out


def test_memory_at_the_chosen_layout(files, capsys):
    """A 32B policy on 6 training GPUs (a judge on the other 2): its FSDP state alone is 87 GB a
    GPU; on two nodes it fits. At rollout tensor parallel 1 its weights fill vLLM's share."""
    model = f"actor_rollout_ref.model.path={files['q32']}"
    rc, _, fails = _check(capsys, "--", *_plan(files, model, "trainer.n_gpus_per_node=6"))
    assert rc == 2 and len(fails) == 1 and fails[0].startswith("FAIL  memory    the FSDP actor's fp32 weights")
    assert "take 87 GB a GPU over 6 training GPU(s)" in fails[0]
    rc, _, fails = _check(capsys, "--", *_plan(files, model, "trainer.nnodes=2", "trainer.n_gpus_per_node=6"))
    assert rc == 0 and not fails, fails
    tp1 = "actor_rollout_ref.rollout.tensor_model_parallel_size=1"
    rc, _, fails = _check(capsys, "--", *_plan(files, model, "trainer.nnodes=2", tp1))
    assert rc == 2 and len(fails) == 1 and "66 GB of bf16 weights a GPU" in fails[0]


# --------------------------------------------------------------------------- the judge
def test_the_served_judges_heads_and_the_tie_band(files, capsys):
    zeta = "pasr.zeta=0.05"
    four = _plan(files, zeta, "trainer.n_gpus_per_node=4")  # 4 of the 5 GPUs the judge leaves: the batch splits
    rc, _, fails = _check(capsys, "--judge-model", str(files["q14"]), "--judge-gpus", "3", "--", *four)
    assert rc == 2 and len(fails) == 1, fails
    assert f"--judge-gpus 3: {files['q14']}: its 40 attention heads do not split over tensor parallel 3" in fails[0]
    rc, out, fails = _check(capsys, "--judge-model", str(files["q14"]), "--judge-gpus", "2", "--", *_plan(files, zeta))
    assert rc == 0 and not fails, fails
    assert "ok    judge     pasr.zeta=0.05: a tie band for the continuous judge's scores" in out
    rc, _, fails = _check(capsys, "--judge-model", JUDGE, "--judge-gpus", "2", "--", *_plan(files))
    assert rc == 2 and len(fails) == 1 and fails[0].startswith("FAIL  judge     pasr.zeta=1e-06 with a continuous")
    binary = "pasr.prompts.judge=judge_binary"  # 0/1 scores: the default band is right
    rc, _, fails = _check(capsys, "--judge-model", JUDGE, "--judge-gpus", "2", "--", *_plan(files, binary))
    assert rc == 0 and not fails, fails


# --------------------------------------------------------------------------- GPUs and the tracker
def test_a_refused_layout_has_no_follow_on_lines_and_idle_gpus_are_named(files, capsys):
    zeta = "pasr.zeta=0.05"
    judge = ["--judge-model", JUDGE, "--judge-gpus", "2", "--"]
    # 8 training GPUs beside a 2-GPU judge on an 8-GPU node: one line; the batch arithmetic is done
    # on the 6 GPUs that fit (what the line says to set), not on the 8 that do not
    rc, out, fails = _check(capsys, *judge, *_plan(files, zeta, "trainer.n_gpus_per_node=8"))
    assert rc == 2 and len(fails) == 1 and fails[0].startswith("FAIL  GPUs      trainer.n_gpus_per_node=8")
    assert "checked on 6 GPU(s) a node" in out and "ok    batch" in out
    assert "GPUs             8 training (1 node(s) x 8) + 2 judge" in out and "does not fit nodes of 8" in out
    assert "10 = 8 training" not in out
    yaml_batch = ["data.train_batch_size=128", "actor_rollout_ref.actor.ppo_mini_batch_size=32"]
    rc, out, fails = _check(capsys, *judge, *_plan(files, zeta, "trainer.n_gpus_per_node=8", *yaml_batch))
    assert rc == 2 and len(fails) == 3, fails  # they split over 8 GPUs, not over the 6 that fit: named
    assert "do not split evenly over the 6 training GPU(s)" in fails[1] and "over 6 data-parallel" in fails[2]
    rc, out, fails = _check(capsys, *judge, *_plan(files, zeta, "trainer.nnodes=2"))
    assert rc == 0 and "idle GPUs        2 of the 2 node(s) x 8 GPU(s): every node trains on" in out
    rc, out, _ = _check(capsys, "--", *_plan(files, "trainer.n_gpus_per_node=6"))
    assert "idle GPUs        2 of the 1 node(s) x 8 GPU(s): trainer.n_gpus_per_node=6 of a node's 8" in out


def test_wandb_needs_a_key(files, capsys, monkeypatch, tmp_path):
    for key in ("WANDB_API_KEY", "WANDB_MODE", "WANDB_IDENTITY_TOKEN_FILE", "WANDB_DISABLED", "NETRC"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc
    plan = _plan(files, "trainer.logger=[console,wandb]")
    rc, _, fails = _check(capsys, "--", *plan)
    assert rc == 2 and len(fails) == 1 and fails[0].startswith("FAIL  tracker   trainer.logger has wandb")
    assert "WANDB_API_KEY" in fails[0]
    monkeypatch.setenv("WANDB_MODE", "offline")
    assert _check(capsys, "--", *plan)[0] == 0
    monkeypatch.delenv("WANDB_MODE")
    (tmp_path / ".netrc").write_text("machine api.wandb.ai\n  login user\n  password secret\n")
    (tmp_path / ".netrc").chmod(0o600)
    assert _check(capsys, "--", *plan)[0] == 0  # `wandb login` wrote it


# --------------------------------------------------------------------------- submit and the run script
def test_submit_refuses_a_bad_plan_without_contacting_the_cluster(files, capsys, monkeypatch):
    """The yaml's 128 prompts with a 2-GPU judge on 8-GPU nodes, and wandb without a key passed to
    the job: refused in seconds, before any request to the Ray head; --no-check lets it through
    to the cluster."""
    from data.cli_errors import CliError
    from recipe import jobs

    contacted = []

    def no_cluster(address, *_args, **_kwargs):
        contacted.append(address)
        raise CliError("stop here: the test has no cluster")

    monkeypatch.setattr(jobs, "connect", no_cluster)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    base = ["submit", "--address", "http://127.0.0.1:1", "--working-dir", str(REPO)]
    judge = ["--judge-model", JUDGE, "--judge-gpus", "2"]
    plan = [
        "actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct",
        f"data.train_files={files['train']}",
        f"data.val_files={files['val']}",
        f"trainer.default_local_dir={files['train']}/ckpt",  # under a file: this machine cannot write it
        "pasr.zeta=0.05",
    ]
    start = time.monotonic()
    assert pasr_main([*base, *judge, "--", *plan]) == 2
    err = capsys.readouterr().err
    assert time.monotonic() - start < 60 and not contacted
    assert "FAIL  batch     data.train_batch_size=128 x rollout.n=8 = 1024 trained rows" in err
    assert "pasr submit: error: pasr check found 2 problem(s)" in err and "--no-check" in err
    # what this machine lacks of the cluster's storage is a note, not a refusal
    assert f"note  dirs      trainer.default_local_dir={files['train']}/ckpt: not writable from this machine" in err
    fixed = [*plan, "data.train_batch_size=96", "actor_rollout_ref.actor.ppo_mini_batch_size=24"]
    assert pasr_main([*base, *judge, "--", *fixed, "trainer.logger=[console,wandb]"]) == 2
    err = capsys.readouterr().err
    assert "the job gets no WANDB_API_KEY: pass --env WANDB_API_KEY" in err and not contacted
    assert pasr_main([*base, "--env", "WANDB_API_KEY=k", *judge, "--", *fixed, "trainer.logger=[console,wandb]"]) == 2
    assert contacted and "stop here" in capsys.readouterr().err
    assert pasr_main([*base, "--no-check", *judge, "--", *plan]) == 2
    assert len(contacted) == 2


def test_the_run_script_checks_its_plan_before_it_trains(files, tmp_path):
    """Without DRY_RUN the node script runs pasr check on its own command first: the yaml's batch
    of 16 a GPU on 6 training GPUs passes it, 100 prompts do not, and nothing is started."""
    env = {
        **os.environ,
        "MODEL_PATH": "Qwen/Qwen2.5-7B-Instruct",
        "EXP_NAME": "check-first",
        "JUDGE_MODEL": JUDGE,
        "JUDGE_GPUS": "2",
        "NODE_GPUS": "8",
        "TRAIN_BSZ": "100",
        "TRAIN_FILE": str(files["train"]),
        "VAL_FILE": str(files["val"]),
        "CKPT_DIR": str(tmp_path / "ckpt"),
        "DATA_DIR": str(tmp_path / "data"),
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }
    env.pop("DRY_RUN", None)
    proc = subprocess.run(
        ["bash", str(REPO / "recipe" / "scripts" / "run_pasr_node.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "FAIL  batch     data.train_batch_size=100 x rollout.n=8" in proc.stdout
    assert "pasr check refused this run" in proc.stderr and "NO_CHECK=1" in proc.stderr
    assert "judge serve" not in proc.stderr  # nothing was started
