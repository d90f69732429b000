"""``pasr check`` (recipe/plan_check/): the dry run of a verl run on the issue's 8-GPU plan
(Qwen2.5-7B trained on 6 GPUs, a 14B judge served on 2), on made MATH-style parquet files: the
config composed as ``python3 -m recipe.main_pasr --cfg job`` composes it, bad batch arithmetic
named in one FAIL line each, an unreachable judge a FAIL line and not a crash, the plan printed;
the run script's ``DRY_RUN=1`` runs it on the script's own command."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pasr_cli import main as pasr_main
from recipe.plan_check.batch import batch_problems
from recipe.plan_check.model import model_params
from recipe.plan_check.plan import measured_step, step_estimate

REPO = Path(__file__).resolve().parents[1]
POLICY, JUDGE = "Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-14B-Instruct"


@pytest.fixture(scope="module")
def math_files(tmp_path_factory) -> tuple[Path, Path]:
    """A MATH-style training file (300 rows: level, problem, solution with a boxed answer, type)
    and a 20-row validation file, prepared into verl parquet by ``pasr data prepare``."""
    tmp = tmp_path_factory.mktemp("math")
    rows = [
        {
            "problem": f"What is ${k} + {k + 1}$?",
            "level": "Level 1",
            "type": "Prealgebra",
            "solution": f"${k} + {k + 1} = \\boxed{{{2 * k + 1}}}$.",
        }
        for k in range(320)
    ]
    (tmp / "math_style.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:300]))
    (tmp / "math_val.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[300:]))
    assert (
        pasr_main(
            ["data", "prepare", "--dataset", str(tmp / "math_style.jsonl"), "--split", "train", "--out", str(tmp)]
        )
        == 0
    )
    assert (
        pasr_main(["data", "prepare", "--dataset", str(tmp / "math_val.jsonl"), "--split", "test", "--out", str(tmp)])
        == 0
    )
    return tmp / "math_style_train.parquet", tmp / "math_val_test.parquet"


def _plan(math_files, tmp_path, *extra: str) -> list[str]:
    train, val = math_files
    return [
        f"actor_rollout_ref.model.path={POLICY}",
        f"data.train_files={train}",
        f"data.val_files={val}",
        f"trainer.default_local_dir={tmp_path / 'ckpt' / 'pasr-qwen2.5-7b'}",
        *extra,
    ]


def _check(capsys, *argv: str) -> tuple[int, list[str], list[str]]:
    start = time.monotonic()
    rc = pasr_main(["check", *argv])
    out = capsys.readouterr()
    print(f"pasr check took {time.monotonic() - start:.1f} s", file=sys.stderr)
    lines = out.out.splitlines()
    assert "Traceback" not in out.out + out.err
    return rc, lines, [ln for ln in lines if ln.strip().startswith("FAIL")]


def test_the_8_gpu_plan_with_bad_arithmetic_names_it_in_one_line(math_files, tmp_path, capsys):
    """The yaml's 128 prompts x 8 rollouts do not split over 6 training GPUs: verl would stop
    at its first step (an equal-size partition a GPU) after minutes of start-up."""
    plan = _plan(math_files, tmp_path, "pasr.zeta=0.05")  # the docs' tie band for the continuous judge
    rc, lines, fails = _check(capsys, "--judge-model", JUDGE, "--judge-gpus", "2", "--", *plan)
    assert rc == 2
    assert len(fails) == 2 and all(f.split()[1] == "batch" for f in fails), fails
    assert (
        "data.train_batch_size=128 x rollout.n=8 = 1024 trained rows a step do not split evenly over the "
        "6 training GPU(s)" in fails[0]
    )
    assert (
        "actor.ppo_mini_batch_size=32 x rollout.n=8 = 256 rows a mini-batch do not split over 6 data-parallel rank(s)"
        in fails[1]
    )
    text = "\n".join(lines)
    # everything else was checked and the plan printed all the same
    assert "ok    config    composed as `python3 -m recipe.main_pasr --cfg job`" in text
    assert (
        f'data.train_files={math_files[0]}: 300 rows, read through the loaders; row 1: "What is $0 + 1$?" -> gold 1'
        in text
    )
    assert (
        f"ok    judge     {JUDGE} (14.0B from its name): 28 GB of bf16 weights, 14 GB a GPU at tensor parallel 2"
        in text
    )
    assert "trainer.default_local_dir=" in text and "writable" in text
    plan = text[text.index("plan:") :]
    assert "8 = 6 training (1 node(s) x 6) + 2 judge (vLLM, tensor parallel 2, on one node)" in plan
    assert "2048 = 128 prompts x (8 refine + 8 plain); 1024 refine rows trained" in plan
    assert "<= 3,072,000 generated (1500 a response)" in plan
    assert "steps            4 (2 a epoch: 300 rows / 128, x 2 epoch(s))" not in plan  # total_epochs is the yaml's 1
    assert "steps            2 (2 a epoch: 300 rows / 128, x 1 epoch(s))" in plan
    assert "ESTIMATE, not a measurement: gpu_check.json's mean step" in plan and "no step is faster than" in plan
    assert lines[-1] == "pasr check: 2 problem(s): fix the FAIL line(s) before GPUs are held"


def test_the_run_scripts_batch_sizes_pass(math_files, tmp_path, capsys):
    """run_pasr_node.sh's defaults on 6 training GPUs (16 and 4 prompts a GPU): 96 x 8 rows and
    mini-batches of 24 x 8 split over 6 GPUs."""
    plan = _plan(
        math_files,
        tmp_path,
        "data.train_batch_size=96",
        "actor_rollout_ref.actor.ppo_mini_batch_size=24",
        "pasr.zeta=0.05",
    )
    rc, lines, fails = _check(capsys, "--judge-model", JUDGE, "--judge-gpus", "2", "--", *plan)
    assert rc == 0 and not fails, fails
    assert lines[-1] == "pasr check: no problem found"
    assert any("rollouts a step  1536 = 96 prompts x (8 refine + 8 plain)" in ln for ln in lines)


def test_an_unreachable_judge_is_a_fail_line_and_a_served_one_is_pinged(math_files, tmp_path, capsys):
    from benchmarks.fake_openai_server import FakeOpenAIServer

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    judge = [
        "pasr.judge.kind=openai",
        f"pasr.judge.base_url=http://127.0.0.1:{closed}/v1",
        "pasr.judge.model=fake-judge",
        "pasr.zeta=0.05",
    ]
    rc, lines, fails = _check(capsys, "--ping-timeout", "2", "--", *_plan(math_files, tmp_path), *judge)
    assert rc == 2 and len(fails) == 1 and fails[0].split()[1] == "judge" and f"127.0.0.1:{closed}/v1" in fails[0]
    assert "plan:" in lines  # the rest of the check ran
    with FakeOpenAIServer() as srv:
        judge = [*judge[:1], f"pasr.judge.base_url={srv.base_url}", *judge[2:]]
        rc, lines, fails = _check(capsys, "--", *_plan(math_files, tmp_path), *judge)
        assert srv.requests <= 1  # one test item at most
    assert not [f for f in fails if f.split()[1] == "judge"]
    assert any(f"ok    judge     {srv.base_url} answers and serves fake-judge" in ln for ln in lines)


def test_other_problems_are_fail_lines(math_files, tmp_path, capsys):
    (tmp_path / "a_file").write_text("x")  # a checkpoint folder under a file: not writable, even as root
    plan = _plan(
        math_files,
        tmp_path,
        "data.train_files=/nonexistent/math_train.parquet",
        f"trainer.default_local_dir={tmp_path / 'a_file' / 'ckpt'}",
        "trainer.n_gpus_per_node=6",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=4",
        "data.train_batch_size=96",
        "actor_rollout_ref.actor.ppo_mini_batch_size=24",
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=2048",
    )
    rc, _, fails = _check(capsys, "--", *plan)
    text = "\n".join(fails)
    assert rc == 2
    assert "FAIL  data      data.train_files=/nonexistent/math_train.parquet: no such file here" in text
    assert "tensor_model_parallel_size=4 does not divide trainer.n_gpus_per_node=6" in text
    assert (
        "ppo_max_token_len_per_gpu=2048 is less than a whole sequence (max_prompt_length + max_response_length = 2524)"
        in text
    )
    assert f"FAIL  dirs      trainer.default_local_dir={tmp_path / 'a_file' / 'ckpt'}: cannot be written here" in text
    rc, _, fails = _check(capsys, "--", *_plan(math_files, tmp_path), "pasr.n_refine=0")
    assert rc == 2 and len(fails) == 1 and fails[0].split()[1] == "config" and "pasr.n_refine" in fails[0]


def test_the_composed_config_is_the_one_main_pasr_runs(math_files, tmp_path):
    """The check reads verl's yaml files from its folder instead of importing the package: the
    same config as the trainer's own composition (pkg://verl.trainer.config)."""
    from omegaconf import OmegaConf

    from recipe.plan_check.compose import compose
    from recipe.verl_engine.config import compose_config

    overrides = _plan(math_files, tmp_path, "trainer.n_gpus_per_node=6", "pasr.judge.kind=hybrid")
    fast, real = compose(overrides), compose_config(overrides)
    assert OmegaConf.to_container(fast, resolve=False) == OmegaConf.to_container(real, resolve=False)


def test_a_dry_run_of_the_run_script_checks_its_own_command(math_files, tmp_path):
    train, val = math_files
    env = {
        **os.environ,
        "DRY_RUN": "1",
        "JUDGE_MODEL": JUDGE,
        "JUDGE_GPUS": "2",
        "TRAIN_FILE": str(train),
        "VAL_FILE": str(val),
        "CKPT_DIR": str(tmp_path / "ckpt"),
        "DATA_DIR": str(tmp_path / "data"),
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }
    env.pop("NODE_GPUS", None)
    start = time.monotonic()
    proc = subprocess.run(
        ["bash", str(REPO / "recipe" / "scripts" / "run_pasr_qwen2_5_7b.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    print(f"DRY_RUN took {time.monotonic() - start:.1f} s", file=sys.stderr)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1] == "pasr check: no problem found"
    assert "8 = 6 training (1 node(s) x 6) + 2 judge" in proc.stdout and "Qwen2.5-7B-Instruct" in proc.stdout
    assert "1536 = 96 prompts x (8 refine + 8 plain)" in proc.stdout and "offloaded to CPU" in proc.stdout


def test_model_sizes_from_a_config_or_a_name(tmp_path):
    qwen7b = {
        "hidden_size": 3584,
        "num_hidden_layers": 28,
        "vocab_size": 152064,
        "intermediate_size": 18944,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "tie_word_embeddings": False,
    }
    (tmp_path / "config.json").write_text(json.dumps(qwen7b))
    params, source = model_params(str(tmp_path))
    assert abs(params - 7.62e9) / 7.62e9 < 0.01 and source == "its config.json"  # Qwen2.5-7B: 7.62B
    assert model_params("Qwen/Qwen2.5-14B-Instruct") == (14e9, "its name")
    assert model_params("HuggingFaceTB/SmolLM2-135M") == (135e6, "its name")
    assert model_params("/models/policy")[0] is None


def test_the_estimate_scales_the_measured_step():
    """Scaled to its own settings the estimate is the measured step's parts; twice the GPUs halve
    it, twice the parameters double it; the floor is below it."""
    m = measured_step()
    assert m is not None and m["file"] == "gpu_check.json"
    own = (135e6, m["gpus"], m["bsz"], m["n_refine"], m["n_plain"], m["seq"], m["response"], m)
    estimate, floor, share = step_estimate(*own)
    assert estimate == pytest.approx(sum(m["parts"].values())) and floor < estimate and 0 < share < 1
    big = step_estimate(7e9, 6, 96, 8, 8, 2524, 1500, m)[0]
    assert step_estimate(7e9, 12, 96, 8, 8, 2524, 1500, m)[0] == pytest.approx(big / 2)
    assert step_estimate(14e9, 6, 96, 8, 8, 2524, 1500, m)[0] == pytest.approx(big * 2)


def test_batch_arithmetic_without_dynamic_batches(math_files, tmp_path):
    from recipe.plan_check.compose import compose

    cfg = compose(
        _plan(
            math_files,
            tmp_path,
            "actor_rollout_ref.actor.use_dynamic_bsz=false",
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=5",
        )
    )
    assert batch_problems(cfg) == [
        "a GPU's share of a mini-batch (32 x 8 / 8 = 32 rows) is not a whole number of ppo_micro_batch_size_per_gpu=5"
    ]


def test_a_binary_judge_gets_the_refine_term_note(math_files, tmp_path, capsys):
    """With the rule judge the refine term acts only through rollouts that do not refine (issue 61):
    pasr check says so, once, as a note; the control (pasr.weights.refine=0) gets none."""
    rc, lines, fails = _check(capsys, "--", *_plan(math_files, tmp_path, "pasr.judge.kind=rule"))
    notes = [ln for ln in lines if "GRPO cancels the refine term" in ln]
    assert len(notes) == 1 and notes[0].split()[:2] == ["note", "reward"], lines
    assert "acts only through rollouts that do not refine" in notes[0] and "when-the-refine-term-acts" in notes[0]
    rc, lines, _ = _check(capsys, "--", *_plan(math_files, tmp_path, "pasr.judge.kind=rule", "pasr.weights.refine=0"))
    assert not any("GRPO cancels" in ln for ln in lines)
