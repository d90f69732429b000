"""Typed config of the local engine. YAML presets live in ``recipe/config/local_*.yaml``; the
``pasr:`` section is the same :class:`~recipe.pasr_config.PasrConfig` the verl engine uses.

Every cold-start remedy is a visible key here (``warmup.*``, ``rollout.prefill_think``,
``pasr.prompts.refine``): the base SmolLM2 never emits the tags on its own, so with the paper's
+1/-1 format reward every group would score the same and GRPO would learn nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import OmegaConf

from recipe.pasr_config import ConfigError, PasrConfig, PromptsConfig, merge_structured

CONFIG_DIR = Path(__file__).resolve().parents[1] / "config"


@dataclass
class ModelConfig:
    path: str = "smollm2"  # embedded SmolLM2-135M-Instruct, a local HF folder, or a hub name
    dtype: str = "float32"  # master weights the optimizer updates (keep float32: bf16 drops small updates)
    # The optional bf16 path: generation runs on a bf16 copy of the policy, synced after every
    # update (about 2x faster on CPUs with AVX512-BF16/AMX), the way verl samples with a bf16
    # vLLM and trains fp32 FSDP weights; ``algo.bf16_autocast`` does the same for the update.
    rollout_dtype: str = "float32"
    threads: int = 0  # torch intra-op threads; 0 = leave torch's default


@dataclass
class DataConfig:
    source: str = "synthetic"  # synthetic | gsm8k | a local file path (see data/loaders.py)
    difficulty: int = 2  # synthetic: number of arithmetic steps (1-3)
    train_size: int = 2000
    eval_size: int = 100  # held-out problems scored at the ends of training
    seed: int = 1234  # train problems; held-out problems use seed + 1 (disjoint)
    split: str = "train"  # for named datasets


@dataclass
class RolloutConfig:
    queries_per_step: int = 4  # B
    max_new_tokens: int = 96
    temperature: float = 0.9
    top_p: float = 1.0
    prefill_think: bool = True  # start refine rollouts with "<think>" (cold-start aid)
    gen_batch_size: int = 64
    eval_max_new_tokens: int = 96


@dataclass
class AlgoConfig:
    """RL math comes from verl's core_algos; these are its knobs."""

    lr: float = 1e-5
    kl_coef: float = 0.04  # 0 disables the reference model (saves one forward pass a step)
    kl_type: str = "low_var_kl"
    clip_ratio: float = 0.2
    loss_agg_mode: str = "token-mean"
    norm_adv_by_std: bool = True
    ppo_epochs: int = 1
    micro_batch_size: int = 8
    max_grad_norm: float = 1.0
    skip_zero_adv: bool = True  # rows whose group has no reward spread carry no policy gradient
    bf16_autocast: bool = False  # bf16 matmuls in the update's forward/backward (fp32 master weights)


@dataclass
class WarmupConfig:
    """Supervised warm-up on synthetic tagged traces before PASR (cold start)."""

    steps: int = 60
    batch_size: int = 8
    lr: float = 5e-5
    n_traces: int = 200
    refine_fraction: float = 0.4  # share of traces that contain a refine step
    # fix: the refine corrects a real mistake (a wrong intermediate value, then the right one)
    # restate: the refine only re-checks a right value (what the prototype's empty refines did)
    refine_style: str = "fix"
    seed: int = 7


@dataclass
class TrainerConfig:
    steps: int = 60  # PASR (RL) steps after the warm-up
    save_every: int = 10
    keep_last: int = 2
    eval_at_start: bool = True  # base model, before the warm-up
    eval_after_warmup: bool = True
    eval_at_end: bool = True
    seed: int = 0
    run_dir: str = "runs/pasr-local"
    project: str = "pasr"
    experiment: str = "local"
    # verl Tracking backends: console | tensorboard | wandb | ... (the progress bar is always on)
    loggers: list[str] = field(default_factory=list)
    dump_rollouts: bool = True


def _cpu_prompts() -> PromptsConfig:
    return PromptsConfig(refine="refine_system_short", plain="plain_system_short")


@dataclass
class LocalTrainConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    warmup: WarmupConfig = field(default_factory=WarmupConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    pasr: PasrConfig = field(default_factory=lambda: PasrConfig(n_refine=4, n_plain=4, prompts=_cpu_prompts()))

    def validate(self) -> "LocalTrainConfig":
        self.pasr.validate()
        problems = []
        for key in ("dtype", "rollout_dtype"):
            if getattr(self.model, key) not in ("float32", "bfloat16"):
                problems.append(f"model.{key} must be float32 or bfloat16, got {getattr(self.model, key)!r}")
        if self.warmup.refine_style not in ("fix", "restate"):
            problems.append(f"warmup.refine_style must be fix or restate, got {self.warmup.refine_style!r}")
        if not 0.0 <= self.warmup.refine_fraction <= 1.0:
            problems.append("warmup.refine_fraction must be in [0, 1]")
        if self.data.difficulty not in (1, 2, 3):
            problems.append(f"data.difficulty must be 1, 2 or 3, got {self.data.difficulty}")
        for name in ("queries_per_step", "max_new_tokens", "gen_batch_size"):
            if getattr(self.rollout, name) < 1:
                problems.append(f"rollout.{name} must be >= 1")
        if self.trainer.steps < 0 or self.warmup.steps < 0 or self.trainer.save_every < 1 or self.trainer.keep_last < 1:
            problems.append("trainer.steps and warmup.steps must be >= 0, save_every and keep_last >= 1")
        if problems:
            raise ConfigError("; ".join(problems))
        return self


def preset_path(name: str) -> Path:
    path = CONFIG_DIR / f"local_{name}.yaml"
    if not path.is_file():
        known = sorted(p.stem.removeprefix("local_") for p in CONFIG_DIR.glob("local_*.yaml"))
        raise ConfigError(f"unknown preset {name!r}; known presets: {', '.join(known)}")
    return path


def load_config(preset: str | None = None, config_file: str | None = None, overrides: list[str] = ()) -> LocalTrainConfig:
    """Defaults <- preset YAML <- --config YAML <- key=value overrides, validated."""
    layers = []
    for path in ([preset_path(preset)] if preset else []) + ([Path(config_file)] if config_file else []):
        if not path.is_file():
            raise ConfigError(f"config file not found: {path}")
        layers.append(OmegaConf.load(path))
    bad = [o for o in overrides if "=" not in o]
    if bad:
        raise ConfigError(f"overrides must look like key=value, got: {' '.join(bad)}")
    layers.append(OmegaConf.from_dotlist(list(overrides)))
    merged = OmegaConf.merge(*layers) if layers else OmegaConf.create({})
    cfg = merge_structured(LocalTrainConfig, merged, "")
    obj: LocalTrainConfig = OmegaConf.to_object(cfg)  # type: ignore[assignment]
    return obj.validate()


def to_yaml(cfg: LocalTrainConfig) -> str:
    return OmegaConf.to_yaml(OmegaConf.structured(cfg))
