"""The verl engine's shell scripts (recipe/scripts/): the run scripts' overrides compose against the
trainer's config with the paper's settings, the smoke script drives the node script with the
measured settings, the smoke scripts' shared prelude and two-phase training, the smoke run's
validation count, and the SFT warm-up's overrides exist in verl's SFT config."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.verl_compose import _compose, _script_overrides

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "script,extra",
    [
        ("run_pasr_qwen2_5_7b.sh", []),
        ("run_pasr_qwen3_8b.sh", ["+data.apply_chat_template_kwargs.enable_thinking=true"]),
    ],
)
def test_run_scripts_are_valid_and_use_the_paper_setup(script, extra):
    """Both per-model scripts run the node script with the paper setup (recipe/config/setup/) and
    pass only the setup, the model, data, paths and GPUs: the hyper-parameters, batch, tensor
    parallel size, epochs and checkpoints are the setup's, the one `pasr submit` composes."""
    wrapper = REPO / "recipe" / "scripts" / script
    path = REPO / "recipe" / "scripts" / "run_pasr_node.sh"
    for p in (wrapper, path):
        assert subprocess.run(["bash", "-n", str(p)]).returncode == 0
    assert "run_pasr_node.sh" in wrapper.read_text() and all(e in wrapper.read_text() for e in extra)
    text = path.read_text()
    assert (
        "python3 -m recipe data prepare" in text
        and "python3 -m recipe judge serve" in text
        and "python3 -m recipe check" in text
    )
    overrides = _script_overrides(wrapper)
    keys = [o.partition("=")[0] for o in overrides]
    assert keys == [
        "setup",
        "data.train_files",
        "data.val_files",
        "actor_rollout_ref.model.path",
        "trainer.experiment_name",
        "trainer.n_gpus_per_node",
        "trainer.default_local_dir",
        *[e.partition("=")[0] for e in extra],
    ]
    assert overrides[0] == "setup=paper_qwen2_5_7b"
    cfg = _compose(overrides)  # every key exists (Hydra rejects unknown ones)
    ar = cfg.actor_rollout_ref
    assert (cfg.pasr.n_refine, ar.rollout.n, ar.rollout.temperature, cfg.data.max_response_length) == (8, 8, 0.9, 1500)
    assert (ar.actor.optim.lr, ar.actor.kl_loss_coef, ar.actor.clip_ratio) == (1e-6, 0.04, 0.2)
    assert cfg.trainer.resume_mode == "auto" and cfg.trainer.use_v1 is False
    assert (cfg.data.train_batch_size, ar.actor.ppo_mini_batch_size, ar.rollout.tensor_model_parallel_size) == (
        96,
        24,
        2,
    )
    assert (cfg.trainer.save_freq, cfg.trainer.max_actor_ckpt_to_keep, cfg.trainer.total_epochs) == (8, 3, 2)
    assert ar.ref.fsdp_config.param_offload is True and cfg.pasr.zeta == 0.05
    from recipe.verl_engine.config import engine_config, pasr_config

    assert pasr_config(cfg).judge.cache_path == "/x/judge_cache.jsonl"
    assert engine_config(cfg).rollout_dir == "/x/rollouts"  # beside the checkpoints, by default
    # the wrapper's model and experiment name are the setup's own
    own = _script_overrides(wrapper, {"MODEL_PATH": "", "EXP_NAME": ""}) if script.startswith("run_pasr_qwen2") else []
    if own:
        setup = _compose(["setup=paper_qwen2_5_7b"])
        named = dict(o.split("=", 1) for o in own)
        assert named["actor_rollout_ref.model.path"] == setup.actor_rollout_ref.model.path
        assert named["trainer.experiment_name"] == setup.trainer.experiment_name


def test_the_node_script_passes_a_setting_only_when_its_variable_is_set():
    """TRAIN_BSZ (with MINI_BSZ a quarter of it), ROLLOUT_TP, TOTAL_EPOCHS, SAVE_FREQ, KEEP_CKPTS,
    TEST_FREQ and NNODES override the setup one by one; SETUP= (empty) runs pasr_trainer.yaml
    alone, with the LLM judge's tie band and cache the script then sets itself."""
    path = REPO / "recipe" / "scripts" / "run_pasr_node.sh"
    env = {"TRAIN_BSZ": "16", "ROLLOUT_TP": "1", "TOTAL_EPOCHS": "1", "SAVE_FREQ": "3", "KEEP_CKPTS": "2"}
    overrides = _script_overrides(path, {**env, "TEST_FREQ": "5", "NNODES": "2"})
    assert overrides[7:] == [
        "trainer.nnodes=2",
        "data.train_batch_size=16",
        "actor_rollout_ref.actor.ppo_mini_batch_size=4",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
        "trainer.total_epochs=1",
        "trainer.save_freq=3",
        "trainer.max_actor_ckpt_to_keep=2",
        "trainer.test_freq=5",
    ]
    cfg = _compose(overrides)
    assert (cfg.trainer.nnodes, cfg.data.train_batch_size, cfg.trainer.max_actor_ckpt_to_keep) == (2, 16, 2)
    judge = {"JUDGE_URL": "http://judge:8000/v1", "JUDGE_MODEL": "j"}
    assert _script_overrides(path, judge)[7:] == [
        "pasr.judge.kind=openai",
        "pasr.judge.base_url=http://judge:8000/v1",
        "pasr.judge.model=j",
    ]  # the setup's tie band and cache
    bare = _script_overrides(path, {"SETUP": "", **judge})
    assert not any(o.startswith("setup=") for o in bare)
    assert bare[-2:] == ["pasr.zeta=0.05", "pasr.judge.cache_path=/x/judge_cache.jsonl"]
    assert _compose(bare).data.train_batch_size == 128  # pasr_trainer.yaml's own


def test_smoke_script_drives_the_node_script_with_the_measured_settings():
    import re

    smoke = REPO / "recipe" / "scripts" / "run_pasr_smoke_1gpu.sh"
    node = (REPO / "recipe" / "scripts" / "run_pasr_node.sh").read_text()
    assert subprocess.run(["bash", "-n", str(smoke)]).returncode == 0
    text = smoke.read_text()
    train = text[text.index("train() {") : text.index("\n}\n", text.index("train() {"))]
    env = dict(re.findall(r"\b([A-Z_]+)=(\"?[^\s\\\\]+)", train.split("bash recipe/scripts/run_pasr_node.sh")[0]))
    assert {
        "NGPUS",
        "TRAIN_BSZ",
        "ROLLOUT_TP",
        "SAVE_FREQ",
        "TEST_FREQ",
        "CKPT_DIR",
        "DATA_DIR",
        "MODEL_PATH",
        "EXP_NAME",
    } <= set(env)
    for name in env:  # every variable the smoke run sets is one the node script reads
        assert "${" + name in node or "$" + name in node, name
    assert (env["NGPUS"], env["TRAIN_BSZ"], env["ROLLOUT_TP"]) == ("1", "16", "1")
    extra = ["data.max_response_length=384", "trainer.total_training_steps=3", "trainer.max_actor_ckpt_to_keep=2"]
    for item in extra:
        assert item.split("=")[0] in train
    cfg = _compose(_script_overrides(REPO / "recipe" / "scripts" / "run_pasr_node.sh") + extra)
    assert (cfg.pasr.n_refine, cfg.pasr.n_plain, cfg.data.max_response_length) == (8, 8, 384)
    assert "pasr eval" in text or "recipe eval" in text
    assert "--backend vllm" in text and "global_step_$STEPS_TOTAL" in text and "Resuming from" in text


def test_smoke_prelude_clears_only_a_smoke_runs_folder(tmp_path):
    """Both smoke scripts start from smoke_common.sh: a folder with smoke.log loses the paths
    named (and eval/, logs) and keeps the rest; any other non-empty folder is refused, untouched."""
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    for tool, out in (("nvidia-smi", "FakeGPU, 80 GiB"), ("python3", "/models/smollm2")):
        (fake_bin / tool).write_text(f"#!/bin/sh\necho '{out}'\n")
        (fake_bin / tool).chmod(0o755)
    prelude = (
        'source recipe/scripts/smoke_common.sh; smoke_prelude "$RUN_DIR/ckpt"; stamp started; echo "model=$MODEL_PATH"'
    )

    def run(run_dir: Path):
        env = {"PATH": f"{fake_bin}:/usr/bin:/bin", "RUN_DIR": str(run_dir)}
        return subprocess.run(["bash", "-c", prelude], cwd=REPO, env=env, capture_output=True, text=True)

    smoke = tmp_path / "smoke"
    for sub in ("ckpt", "eval", "data"):
        (smoke / sub).mkdir(parents=True)
    (smoke / "smoke.log").write_text("old\n")
    done = run(smoke)
    assert done.returncode == 0, done.stderr
    assert "model=/models/smollm2" in done.stdout
    assert sorted(x.name for x in smoke.iterdir()) == ["data", "gpu.txt", "smoke.log"]
    assert "FakeGPU" in (smoke / "gpu.txt").read_text() and "started" in (smoke / "smoke.log").read_text()

    other = tmp_path / "other"
    (other / "ckpt").mkdir(parents=True)
    refused = run(other)
    assert refused.returncode == 2 and "not a smoke run's folder" in refused.stderr
    assert [x.name for x in other.iterdir()] == ["ckpt"]
    for script in ("run_pasr_smoke_1gpu.sh", "run_rrr_smoke_1gpu.sh"):
        assert "smoke_prelude " in (REPO / "recipe" / "scripts" / script).read_text()


def test_smoke_train_and_resume_runs_two_phases_and_stamps_a_failure(tmp_path):
    """Both smoke scripts train through smoke_common.sh's train_and_resume: the script's train()
    to STEPS_FIRST, then to STEPS_TOTAL (resuming), each with the overrides; a failed phase is
    stamped with its log and the second still runs (the checks report what is missing)."""
    script = (
        "source recipe/scripts/smoke_common.sh; SECONDS=0; "
        'train() { echo "train $*" >> "$RUN_DIR/calls"; [[ $1 != 3 ]]; }; '
        "train_and_resume k=v"
    )
    env = {"PATH": "/usr/bin:/bin", "RUN_DIR": str(tmp_path), "STEPS_FIRST": "3", "STEPS_TOTAL": "5"}
    done = subprocess.run(["bash", "-c", script], cwd=REPO, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "calls").read_text().splitlines() == [
        f"train 3 {tmp_path}/train_1.log k=v",
        f"train 5 {tmp_path}/train_2.log k=v",
    ]
    log = (tmp_path / "smoke.log").read_text()
    assert f"run 1 failed: {tmp_path}/train_1.log" in log and "run 2: resume from global_step_3, steps 4-5" in log
    assert "run 2 failed" not in log
    for name in ("run_pasr_smoke_1gpu.sh", "run_rrr_smoke_1gpu.sh"):
        assert 'train_and_resume "$@"' in (REPO / "recipe" / "scripts" / name).read_text()


def test_smoke_validation_check_counts_the_prompts_the_trainer_kept(tmp_path):
    """verl drops prompts over data.max_prompt_length (MATH-500 at 1024 tokens: 499 of 500) and
    prints "filter dataset len: N" for the training set, then the validation set: the check counts
    the validation set's N from run 1's log."""
    text = (REPO / "recipe" / "scripts" / "run_pasr_smoke_1gpu.sh").read_text()
    lines = [ln for ln in text.splitlines() if ln.startswith(("n_val=", '[[ -n "$n_val" ]]'))]
    assert len(lines) == 2
    (tmp_path / "train_1.log").write_text(
        "(TaskRunner pid=1) dataset len: 7473\n(TaskRunner pid=1) filter dataset len: 7473\n"
        "(TaskRunner pid=1) dataset len: 500\n(TaskRunner pid=1) filter dataset len: 499\n"
    )
    script = "set -euo pipefail\n" + "\n".join(lines) + '\necho "$n_val"'
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=REPO,
        env={"PATH": "/usr/bin:/bin", "RUN_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "499"


def _sft_overrides(path: Path) -> list[str]:
    text = path.read_text()
    block = text[text.index("-m verl.trainer.sft_trainer") :].splitlines()[1:]
    out = []
    for line in block:
        item = line.strip().rstrip("\\").strip()
        if not item or item.startswith("${ATTN_ARGS"):
            continue
        if item.startswith('"$@"'):
            break
        key, _, value = item.partition("=")
        if value.lstrip('"').startswith("$"):
            value = {"trainer.total_epochs": "2", "trainer.n_gpus_per_node": "1", "optim.lr": "1e-5"}.get(key, "/x")
        elif value.startswith("'") and value.endswith("'"):
            value = value[1:-1]  # as the shell passes it
        out.append(f"{key}={value}")
    return out


def test_sft_warmup_script_overrides_exist_in_verls_sft_config():
    import verl
    from hydra import compose, initialize_config_dir

    script = REPO / "recipe" / "scripts" / "run_sft_warmup.sh"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    text = script.read_text()
    assert "python3 -m data.sft_parquet" in text and "python3 -m runtime.hf_export" in text
    attn = ["model.use_remove_padding=false", "+model.override_config.attn_implementation=sdpa"]
    assert all(a in text for a in attn)
    overrides = _sft_overrides(script) + attn
    assert "data.messages_key=messages" in overrides
    with initialize_config_dir(config_dir=str(Path(verl.__file__).parent / "trainer" / "config"), version_base=None):
        cfg = compose(config_name="sft_trainer_engine", overrides=overrides)  # unknown keys fail here
    assert cfg.data.messages_key == "messages" and cfg.model.override_config.attn_implementation == "sdpa"
    assert cfg.model.use_remove_padding is False and cfg.trainer.logger == ["console"]
