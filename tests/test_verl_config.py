"""The verl engine's config: Hydra composition of recipe/config/pasr_trainer.yaml over verl's
ppo_trainer (the paper's defaults, PASR's sections typed by the dataclasses, only deltas over
verl's values), verl's own validation, bad keys, the preflight (GPUs, vLLM, the judge, Ray jobs),
the attention fallback without flash-attn and the checks the task runner repeats on its node."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.verl_compose import _compose, config  # noqa: F401  (config is a fixture)
from tests.verl_scripted_rollout import verl_mods  # noqa: F401  (a fixture)

REPO = Path(__file__).resolve().parents[1]
CONFIG_DIR = REPO / "recipe" / "config"


def test_config_composes_with_paper_defaults(config):
    from recipe.verl_engine.config import engine_config, pasr_config

    cfg = pasr_config(config)
    assert (cfg.n_refine, cfg.n_plain, cfg.tie_value) == (8, 8, -0.5)
    ar = config.actor_rollout_ref
    assert ar.rollout.n == 8 and ar.rollout.temperature == 0.9 and config.data.max_response_length == 1500
    assert ar.actor.optim.lr == 1e-6 and ar.actor.kl_loss_coef == 0.04 and ar.actor.use_kl_loss
    assert ar.actor.clip_ratio == 0.2 and config.algorithm.adv_estimator == "grpo"
    assert ar.rollout.agent.agent_loop_manager_class == "recipe.verl_engine.agent_loop.PasrAgentLoopManager"
    assert config.trainer.use_v1 is False and config.trainer.resume_mode == "auto"
    eng = engine_config(config)
    assert eng.rollout_dir == "checkpoints/pasr/pasr/rollouts" and eng.run_id is None  # null: the experiment name


def test_pasr_defaults_live_in_the_dataclasses_only(config):
    """pasr_trainer.yaml sets no pasr.* / pasr_verl.* value: the composed sections are exactly
    the dataclasses' defaults (recipe/pasr_config.py, VerlEngineConfig), and Hydra types them."""
    import dataclasses

    from hydra.errors import ConfigCompositionException
    from omegaconf import OmegaConf

    from recipe.pasr_config import PasrConfig
    from recipe.verl_engine.config import VerlEngineConfig, plain_sections

    text = (CONFIG_DIR / "pasr_trainer.yaml").read_text()
    assert "\npasr:" not in text and "\npasr_verl:" not in text and "tie_value" not in text
    assert OmegaConf.to_container(config.pasr) == dataclasses.asdict(PasrConfig())
    assert OmegaConf.to_container(config.pasr_verl) == dataclasses.asdict(VerlEngineConfig())
    with pytest.raises(ConfigCompositionException):
        _compose(["pasr.n_refine=many"])  # typed by the schema at composition
    cfg = _compose(["pasr.tie_value=0"])
    plain_sections(cfg)  # what recipe.main_pasr hands to verl: no reference to recipe's dataclasses
    assert OmegaConf.get_type(cfg.pasr) is dict and cfg.pasr.tie_value == 0 and cfg.actor_rollout_ref.rollout.n == 8
    assert (
        OmegaConf.to_container(cfg.pasr_verl)["rollout_dir"] == "${trainer.default_local_dir}/rollouts"
    )  # kept unresolved


def test_config_passes_verls_own_validation(config):
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    validate_config(config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    assert need_reference_policy(config) and not need_critic(config)


def test_config_overrides_and_bad_keys():
    from hydra.errors import ConfigCompositionException

    from recipe.pasr_config import ConfigError
    from recipe.verl_engine.config import engine_config, pasr_config

    cfg = _compose(["pasr.n_refine=4", "pasr.judge.concurrency=8"])
    assert cfg.actor_rollout_ref.rollout.n == 4 and pasr_config(cfg).judge.concurrency == 8
    with pytest.raises(ConfigError, match=r"pasr\.judge\.timout_s"):
        pasr_config(_compose(["+pasr.judge.timout_s=3"]))
    with pytest.raises(ConfigError, match=r"pasr_verl\.rolout_dir"):
        engine_config(_compose(["+pasr_verl.rolout_dir=x"]))
    with pytest.raises(ConfigError, match="differs from pasr.n_refine"):
        pasr_config(_compose(["actor_rollout_ref.rollout.n=2"]))
    with pytest.raises(ConfigCompositionException):  # Hydra itself refuses a key without '+'
        _compose(["pasr.bogus=1"])
    # Hydra types pasr.zeta=nan as a float and passes it on; the shared check names every such key
    with pytest.raises(ConfigError, match=r"pasr\.zeta=nan, pasr\.weights\.acc=inf"):
        pasr_config(_compose(["pasr.zeta=nan", "pasr.weights.acc=inf"]))


def test_pasr_trainer_yaml_states_only_deltas_over_verls_defaults():
    """Every value pasr_trainer.yaml sets differs from verl's own ppo_trainer default (verl-recipe's
    dapo keeps only deltas too): composed side by side, no key of ours restates verl's value."""
    import os

    import verl
    import yaml
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    with initialize_config_dir(
        config_dir=os.path.join(os.path.dirname(verl.__file__), "trainer", "config"), version_base=None
    ):
        base = compose(config_name="ppo_trainer")
    ours = yaml.safe_load((CONFIG_DIR / "pasr_trainer.yaml").read_text())

    def leaves(node, prefix=""):
        for key, value in node.items():
            if key in ("defaults", "hydra"):
                continue
            path = f"{prefix}.{key}" if prefix else key
            if isinstance(value, dict):
                yield from leaves(value, path)
            else:
                yield path, value

    restated = [
        path
        for path, value in leaves(ours)
        if not (isinstance(value, str) and "${" in value) and OmegaConf.select(base, path) == value
    ]
    assert restated == []
    composed = _compose([])  # the paper's values verl already has still hold after the deltas
    actor = composed.actor_rollout_ref.actor
    assert (actor.optim.lr, actor.clip_ratio, actor.kl_loss_type, actor.loss_agg_mode) == (
        1e-6,
        0.2,
        "low_var_kl",
        "token-mean",
    )
    assert composed.actor_rollout_ref.rollout.val_kwargs.temperature == 0 and composed.algorithm.norm_adv_by_std_in_grpo


def test_max_judge_error_rate_is_validated():
    """pasr.max_judge_error_rate, the local engine's key too; pasr_verl.max_judge_error_rate, its
    old name here, is refused naming it."""
    from recipe.pasr_config import ConfigError
    from recipe.retired_keys import retired_message
    from recipe.verl_engine.config import compose_config, pasr_config

    assert pasr_config(_compose()).max_judge_error_rate == 0.2
    assert pasr_config(_compose(["pasr.max_judge_error_rate=1"])).max_judge_error_rate == 1.0
    with pytest.raises(ConfigError, match=r"pasr.max_judge_error_rate must be in \[0, 1\]"):
        pasr_config(_compose(["pasr.max_judge_error_rate=1.5"]))
    with pytest.raises(ConfigError) as exc:
        compose_config(["pasr_verl.max_judge_error_rate=0.5"])
    assert str(exc.value) == retired_message("pasr_verl.max_judge_error_rate")
    assert "was renamed pasr.max_judge_error_rate" in str(exc.value)


# --------------------------------------------------------------------------- preflight
def test_preflight(config):
    from recipe.verl_engine.config import PreflightError, preflight

    ok = dict(find_module=lambda n: object(), judge_check=lambda c: None)
    cfg, eng = preflight(config, local_gpus=lambda: 8, **ok)
    assert cfg.n_refine == 8
    with pytest.raises(PreflightError, match="no GPU on this machine"):
        preflight(config, local_gpus=lambda: 0, **ok)
    with pytest.raises(PreflightError, match=r"needs 1 node\(s\) with 8 GPU\(s\).*this machine has 4"):
        preflight(config, local_gpus=lambda: 4, **ok)
    with pytest.raises(PreflightError, match="vllm is not installed"):
        preflight(config, local_gpus=lambda: 8, find_module=lambda n: None, judge_check=lambda c: None)
    two = _compose(["trainer.nnodes=2", "+ray_kwargs.ray_init.address=10.0.0.1:6379"])
    with pytest.raises(PreflightError, match=r"Ray cluster at 10.0.0.1:6379 has 12 GPU\(s\) \(GPUs per node: 8, 4\)"):
        preflight(two, cluster_node_gpus=lambda a: [8.0, 4.0], **ok)
    preflight(two, cluster_node_gpus=lambda a: [8.0, 8.0, 0.0], **ok)
    with pytest.raises(PreflightError, match="use_v1"):
        preflight(_compose(["trainer.use_v1=true"]), local_gpus=lambda: 8, **ok)
    with pytest.raises(PreflightError, match="pasr.judge.kind=openai needs"):
        preflight(_compose(["pasr.judge.kind=openai"]), local_gpus=lambda: 8, **ok)
    preflight(_compose(["pasr_verl.check_resources=false"]), local_gpus=lambda: 0, **ok)


def test_preflight_checks_trainer_logger_as_the_local_engine_does():
    """trainer.logger, one key in both engines (issue 52): an unknown backend, or one whose package
    is missing, is refused at start, not by verl's Tracking once fit() starts after start-up."""
    from recipe.verl_engine.config import PreflightError, preflight

    ok = dict(local_gpus=lambda: 8, judge_check=lambda c: None)
    with pytest.raises(PreflightError, match=r"trainer.logger: unknown logger 'foo' \(use console, file, tensorboard"):
        preflight(_compose(["trainer.logger=[console,foo]"]), find_module=lambda n: object(), **ok)
    with pytest.raises(
        PreflightError, match="trainer.logger: wandb needs the Python package wandb, which is not installed"
    ):
        preflight(
            _compose(["trainer.logger=[console,wandb]"]), find_module=lambda n: None if n == "wandb" else object(), **ok
        )
    preflight(_compose(["trainer.logger=[console,wandb]"]), find_module=lambda n: object(), **ok)
    preflight(_compose(["trainer.logger=console"]), find_module=lambda n: object(), **ok)  # verl takes one name too


def test_preflight_refuses_a_relative_checkpoint_dir_inside_a_ray_job(monkeypatch):
    from recipe.verl_engine.config import PreflightError, preflight

    ok = dict(local_gpus=lambda: 8, find_module=lambda n: object(), judge_check=lambda c: None)
    preflight(_compose(), **ok)  # outside a job a relative directory is the user's choice
    monkeypatch.setenv("RAY_JOB_CONFIG_JSON_ENV_VAR", '{"runtime_env": {}}')
    with pytest.raises(
        PreflightError, match=r"trainer.default_local_dir=checkpoints/pasr/pasr is relative: .*starts from scratch"
    ):
        preflight(_compose(), **ok)
    with pytest.raises(PreflightError, match=r"pasr_verl.rollout_dir=dumps is relative"):
        preflight(_compose(["trainer.default_local_dir=/shared/ck", "pasr_verl.rollout_dir=dumps"]), **ok)
    preflight(_compose(["trainer.default_local_dir=/shared/ck"]), **ok)
    preflight(_compose(["trainer.default_local_dir='~/ck'", "pasr_verl.rollout_dir=null"]), **ok)


def test_count_local_gpus(tmp_path):
    from recipe.verl_engine.config import count_local_gpus

    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"):
        (tmp_path / name).touch()
    assert count_local_gpus({}, dev=str(tmp_path)) == 2
    assert count_local_gpus({"CUDA_VISIBLE_DEVICES": "1"}, dev=str(tmp_path)) == 1
    assert count_local_gpus({"CUDA_VISIBLE_DEVICES": ""}, dev=str(tmp_path)) == 0
    empty = tmp_path / "empty"
    empty.mkdir()
    assert count_local_gpus({}, dev=str(empty)) == 0


def test_main_without_gpu_exits_at_once_with_a_message():
    from recipe.verl_engine.config import count_local_gpus

    if count_local_gpus() != 0:
        pytest.skip("this machine has a GPU")
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "PASR_SKIP_GPU_CHECK")}
    proc = subprocess.run(
        [sys.executable, "-m", "recipe.main_pasr", "trainer.experiment_name=x"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("pasr verl: error: no GPU on this machine")
    assert "pasr submit" in proc.stderr and "Traceback" not in proc.stderr


# --------------------------------------------------------------------------- attention (issue 11.2)
def test_attention_falls_back_to_sdpa_without_flash_attn():
    from omegaconf import open_dict
    from verl.utils.config import omega_conf_to_dataclass

    from recipe.verl_engine.config import choose_attention
    from runtime.model_loading import resolve_model_path

    cfg = _compose()
    message = choose_attention(cfg, has_flash_attn=lambda: False)
    model = cfg.actor_rollout_ref.model
    assert model.override_config.attn_implementation == "sdpa" and model.use_remove_padding is False
    assert "flash-attn is not installed" in message and "use_remove_padding=false" in message
    # verl builds the actor's and the reference model's HF config from exactly these keys
    with open_dict(model):
        model.path = resolve_model_path("smollm2")
    hf = omega_conf_to_dataclass(model)
    assert hf.hf_config._attn_implementation == "sdpa" and hf.use_remove_padding is False
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))


def test_attention_is_left_alone_with_flash_attn_or_an_explicit_choice():
    from recipe.verl_engine.config import PreflightError, choose_attention

    cfg = _compose()
    assert choose_attention(cfg, has_flash_attn=lambda: True) is None
    assert "attn_implementation" not in cfg.actor_rollout_ref.model.override_config
    assert cfg.actor_rollout_ref.model.use_remove_padding is True
    eager = _compose(["+actor_rollout_ref.model.override_config.attn_implementation=eager"])
    assert choose_attention(eager, has_flash_attn=lambda: False) is None
    assert eager.actor_rollout_ref.model.override_config.attn_implementation == "eager"
    explicit = _compose(["+actor_rollout_ref.model.override_config.attn_implementation=flash_attention_2"])
    with pytest.raises(PreflightError, match="flash_attention_2 but flash-attn does not import"):
        choose_attention(explicit, has_flash_attn=lambda: False)


def test_flash_attn_importable_is_false_here_when_absent():
    import importlib.util

    from recipe.verl_engine.config import flash_attn_importable

    if importlib.util.find_spec("flash_attn") is None:
        assert flash_attn_importable() is False


# --------------------------------------------------------------------------- node checks (issue 11.7)
def test_task_runner_checks_attention_and_the_judge_where_it_runs(verl_mods):
    t = verl_mods.trainer
    cfg = _compose()
    lines = t.node_checks(cfg, has_flash_attn=lambda: False, judge_check=lambda c: None, node="10.0.0.7")
    assert len(lines) == 1 and "sdpa" in lines[0]
    assert cfg.actor_rollout_ref.model.override_config.attn_implementation == "sdpa"
    down = lambda c: "the judge endpoint pasr.judge.base_url=http://127.0.0.1:8000/v1 does not answer"  # noqa: E731
    with pytest.raises(t.PasrSetupError, match=r"does not answer, checked from node 10\.0\.0\.7"):
        t.node_checks(_compose(), has_flash_attn=lambda: True, judge_check=down, node="10.0.0.7")
    called = []
    t.node_checks(_compose(["pasr_verl.check_judge=false"]), has_flash_attn=lambda: True, judge_check=called.append)
    assert called == []
