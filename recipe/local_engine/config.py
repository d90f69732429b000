"""Typed config of the local engine. The ``pasr:`` section is the same
:class:`~recipe.pasr_config.PasrConfig` the verl engine and ``pasr eval`` use, with the same
defaults (the paper's). YAML presets live in ``recipe/config/local_*.yaml``; a preset may name
the preset it is layered over (``extends: NAME``). What a 135M model on a few CPU cores needs
instead of the paper's reward and group sizes is the preset ``cpu``, which ``default`` (``pasr
train`` without ``--preset``) and every other local preset extend; the chain a run was built
from is recorded in its ``config.yaml`` (``presets``). The value checks every key goes through
are in :mod:`recipe.local_engine.config_checks`.

Every cold-start remedy is a visible key here (``warmup.*``, ``pasr.prefill_think``,
``pasr.prompts.refine``): the base SmolLM2 never emits the tags on its own, so with the paper's
+1/-1 format reward every group would score the same and GRPO would learn nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import OmegaConf

from data.generated_sets import DEFAULT_DATA_SEED
from recipe.local_engine.config_checks import (  # noqa: F401  (MAX_SEED, threads_problem: re-exported)
    MAX_SEED,
    WARMUP_LR_SCHEDULES,
    config_problems,
    threads_problem,
)
from recipe.metrics_file import TRACKING_BACKENDS  # noqa: F401  (tests patch it here)
from recipe.paired_tests import PAPER_TEMPERATURE
from recipe.pasr_config import (
    ConfigError,
    PasrConfig,
    first_line,
    merge_reporting,
    missing_value_problems,
    shape_problems,
)
from recipe.retired_keys import drop_settings_kept_as_defaults, rename_saved_keys
from recipe.rrr_config import RrrConfig
from recipe.yaml_bounds import alias_expansion_problem

CONFIG_DIR = Path(__file__).resolve().parents[1] / "config"


@dataclass
class ModelConfig:
    path: str = "smollm2"  # embedded SmolLM2-135M-Instruct, a local HF folder, or a hub name
    dtype: str = "float32"  # master weights the optimizer updates (keep float32: bf16 drops small updates)
    # auto | float32 | bfloat16. The bf16 path: generation runs on a bf16 copy of the policy,
    # synced after every update, the way verl samples with a bf16 vLLM and trains fp32 FSDP
    # weights. ``auto`` times a matmul at start-up on the device that computes and picks bf16
    # only where it runs faster there (a GPU with bf16 tensor cores, a CPU with AVX512-BF16/AMX;
    # far *slower* on AVX2-only x86): the rule pasr eval's --dtype auto follows too,
    # runtime/cpu_dtype.py (docs/local_engine.md, "CPU dtype and threads")
    rollout_dtype: str = "auto"
    # torch intra-op threads; 0 = auto: on the CPU all cores if a probe matmul runs faster on them
    # than on one (an idle machine), else one (a busy core makes OpenMP threads spin-wait); on a
    # GPU torch's default (runtime/cpu_dtype.py: decide_threads, pasr eval's --threads too)
    threads: int = 0
    # grouped | sdpa. grouped: grouped-query attention without copying the KV cache to every
    # query head (runtime/gqa_attention.py); same tokens, and the copy that transformers' SDPA
    # path makes under a padding mask is most of a batched decode step on CPU
    attention: str = "grouped"
    # auto | cpu | cuda: where the policy, its KL reference and every tensor fed to them live.
    # auto takes the GPU when torch sees one (rollout_dtype and bf16_autocast left to auto are
    # then measured on it)
    device: str = "auto"


@dataclass
class DataConfig:
    source: str = "synthetic"  # synthetic | countdown | gsm8k | a local file path (see data/loaders.py)
    difficulty: int = 1  # synthetic: number of arithmetic steps (1-3); countdown: how many numbers (3-5)
    train_size: int = 2000
    eval_size: int = 100  # held-out problems scored at the ends of training
    seed: int = (
        DEFAULT_DATA_SEED  # train problems; held-out problems: split test, seed + 1 (data.generated_sets.heldout_seed)
    )
    split: str = "train"  # for named datasets


@dataclass
class RolloutConfig:
    # GRPO groups a step: 8 give the update more than the one or two with reward spread that 4
    # often had (with the cpu preset's 4 refine + 2 plain rollouts a query, 48 rollouts a step;
    # a query's prompt passes are shared, so its extra rollouts cost only their responses)
    queries_per_step: int = 8
    max_new_tokens: int = 96
    temperature: float = 0.9
    top_p: float = 1.0
    # the seed of torch's RNG, which only the RL rollouts' sampling draws from (the warm-up samples
    # nothing; the sampled evaluations fork their own from trainer.seed); null = trainer.seed. Set
    # alone it changes a run's rollouts and nothing else (not the query order, not the evaluations'
    # draws): a control that differs from another run only by chance (benchmarks/pasr_ab.py)
    seed: int | None = None
    gen_batch_size: int = 64
    eval_max_new_tokens: int = 96
    # greedy evaluations: a decode step costs nearly as much for 16 rows as for 64 on CPU (the
    # weights are read once a step), so fewer, wider batches finish a little sooner
    # (benchmarks/local_eval_speed.py; figures in docs/local_engine.md); the tokens do not
    # depend on it
    eval_batch_size: int = 256


@dataclass
class AlgoConfig:
    """RL math comes from verl's core_algos; these are its knobs."""

    # the RL learning rate: at 2e-5 updates on a few dozen rows wore the small model's arithmetic
    # down as fast as the reward built refining up (docs/results/history/learning_signal_history.md)
    lr: float = 1e-5
    # linear LR warm-up over the first RL steps (verl's actor.optim.lr_warmup_steps; 0 = none):
    # the RL phase starts a fresh AdamW, whose first updates move every weight by about lr
    # whatever the gradient, and on a few dozen rows a step those decided whether the model kept
    # refining at all (docs/results/history/learning_signal_history.md)
    lr_warmup_steps: int = 10
    kl_coef: float = 0.04  # 0 disables the reference model (saves one forward pass a step)
    # false: the KL reference is read from the checkpoint the RL phase started from for each step's
    # reference log-probs and dropped after (one copy of the weights less at the step's peak,
    # 0.54 GB on the embedded model; about 0.15 s a step); true: held in memory for the whole
    # phase (recipe/local_engine/kl_reference.py). The same log-probs either way.
    ref_in_memory: bool = False
    kl_type: str = "low_var_kl"
    clip_ratio: float = 0.2
    loss_agg_mode: str = "token-mean"
    norm_adv_by_std: bool = True
    ppo_epochs: int = 1
    # rows an update's forward/backward holds at once (verl's ppo_micro_batch_size_per_gpu; the
    # loss is the whole batch's): 4 rows of up to 96 tokens hold about 0.65 GB on SmolLM2 in fp32,
    # 8 held twice that at the demo's peak, for the same step time (docs/local_engine.md "Memory")
    micro_batch_size: int = 4
    max_grad_norm: float = 1.0
    skip_zero_adv: bool = True  # rows whose group has no reward spread carry no policy gradient
    # bf16 matmuls in the update's forward/backward (fp32 master weights); null = the same
    # measured choice as model.rollout_dtype=auto
    bf16_autocast: bool | None = None


@dataclass
class WarmupConfig:
    """Supervised warm-up on synthetic tagged traces before PASR (cold start)."""

    # long enough that the warm-up's checks fix more than they break: after a shorter one they
    # were no more accurate than its first values and PASR trained refining away
    # (docs/results/history/learning_signal_history.md)
    steps: int = 160
    batch_size: int = 8
    # rows a forward/backward holds at once; the gradient is the whole batch's (accumulated,
    # weighted by tokens): 4 halves the warm-up's activations (the demo's warm-up step peaked at
    # 4.2 GB with 8), docs/local_engine.md "Memory"
    micro_batch_size: int = 4
    lr: float = 5e-5
    # constant | cosine (decayed to zero over warmup.steps, verl's SFT trainer's default). cosine:
    # a warm-up that ends where its batches averaged out, not where the last few pushed it, for
    # a PASR phase measured against a settled start (docs/results/demo.md)
    lr_schedule: str = "constant"
    n_traces: int = 1280  # one pass over 1280 traces in 160 steps of 8: no trace seen twice
    refine_fraction: float = 0.4  # share of refine-prompt traces that contain a refine step
    # check: the refine redoes the step in smaller pieces (76 - 20 = 56, 56 - 7 = 49) and either
    #   fixes a wrong first value or confirms a right one (see data/warmup_traces.py: worked_check)
    # column: the refine redoes the step digit by digit (ones with carry or borrow, then tens),
    #   every equation a one-digit fact the small model gets right more often than the whole step
    #   (data/warmup_traces.py: column_check); the default: its checks are worth learning to
    #   trust (docs/results/history/learning_signal_history.md)
    # (fix and restate were retired: recipe/retired_keys.py)
    refine_style: str = "column"
    # share of traces shown with the plain prompt (same think/answer format, no refine), so the
    # plain rollouts that make the refine reward's baseline answer in a format the model knows
    plain_fraction: float = 0.3
    # Countdown only: share of warm-up examples that show RRR's reflection prompt on a failed
    # attempt with a reflection that checks it (data/countdown_traces.py). Without any, the
    # warmed-up model answered every reflection prompt with another equation (docs/rrr.md)
    reflection_fraction: float = 0.0
    # Countdown only: share shown as a retry (that failed attempt and its reflection in context)
    # answered with the reference solution; untaught, no greedy retry was right (docs/rrr.md)
    retry_fraction: float = 0.0
    seed: int = 7


@dataclass
class TrainerConfig:
    # PASR (RL) steps after the warm-up: from the default warm-up, 20 and 30 steps gained no more
    # than 10 (docs/results/learning_signal.md)
    steps: int = 10
    save_every: int = 10
    keep_last: int = 2
    # A finished run's last checkpoint keeps AdamW's two moments (twice the weights: 1.1 GB on the
    # embedded model) only when true: no resume reads them, and extending a finished run with more
    # trainer.steps without them starts a fresh AdamW (warned). An unfinished run's newest
    # checkpoint always keeps them (an exact resume).
    keep_final_optimizer: bool = False
    eval_at_start: bool = True  # base model, before the warm-up
    eval_after_warmup: bool = True
    eval_at_end: bool = True
    eval_plain: bool = True  # evaluations also answer with the plain prompt (the refine reward's baseline)
    # K > 0: every evaluation of a PASR run also samples K refine-prompt answers a question at
    # eval_temperature (the paper's reference inference: 0.5) and reports mean@K beside greedy,
    # the final one with a paired test of its per-question means against the warm-up's; seeded
    # by trainer.seed, it changes no training step. K=4 is enough on the CPU, where it costs
    # about K greedy evaluations (recipe/local_engine/sampled_eval.py; 0 = off)
    eval_sampled_k: int = 0
    eval_temperature: float = PAPER_TEMPERATURE
    seed: int = 0
    run_dir: str = "runs/pasr-local"
    project_name: str = "pasr"  # the wandb project (verl's key, one name in both engines)
    experiment_name: str = "local"  # the wandb run name
    # verl Tracking backends: console | tensorboard | wandb | ... (the progress bar is always on;
    # metrics.jsonl is always written); verl's trainer.logger, one key in both engines
    logger: list[str] = field(default_factory=list)
    dump_rollouts: bool = True

    @property
    def evaluates(self) -> bool:
        """Whether an evaluation is on, so the run needs held-out problems."""
        return self.eval_at_start or self.eval_after_warmup or self.eval_at_end


@dataclass
class LocalTrainConfig:
    method: str = "pasr"  # pasr | rrr (Reflect, Retry, Reward; the rrr: section)
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    warmup: WarmupConfig = field(default_factory=WarmupConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    # the paper's, as for every engine; the cpu preset (recipe/config/local_cpu.yaml) sets the
    # reward and group sizes a 135M model on a few cores needs
    pasr: PasrConfig = field(default_factory=PasrConfig)
    rrr: RrrConfig = field(default_factory=RrrConfig)
    # the presets this config was layered over, most specific first (--preset NAME and each
    # preset's extends:); recorded by pasr train in config.yaml, not a setting
    presets: list[str] = field(default_factory=list)

    def problems(self) -> list[str]:
        """Every problem of the config at once, across every section, each naming its key:
        a user fixes them in one go, not one per attempt. Empty when the config runs
        (:func:`recipe.local_engine.config_checks.config_problems`)."""
        return config_problems(self)

    def validate(self) -> LocalTrainConfig:
        if problems := self.problems():
            raise ConfigError("; ".join(problems))
        return self


DEFAULT_PRESET = "default"  # pasr train without --preset
EXTENDS = "extends"  # a config file's top-level key: the preset it is layered over
PRESETS = "presets"  # LocalTrainConfig.presets: the chain a config was built from, recorded


def preset_path(name: str) -> Path:
    path = CONFIG_DIR / f"local_{name}.yaml"
    if not path.is_file():
        known = sorted(p.stem.removeprefix("local_") for p in CONFIG_DIR.glob("local_*.yaml"))
        raise ConfigError(f"unknown preset {name!r}; known presets: {', '.join(known)}")
    return path


def _read_layer(path: Path):
    """The mapping a config file holds; whatever makes it unusable (missing, unreadable, not
    UTF-8, not YAML, a list, a verl config) is a :class:`ConfigError` naming the file."""
    import yaml
    from omegaconf import DictConfig

    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        if why := alias_expansion_problem(path):  # OmegaConf.load would copy every alias: no end
            raise ConfigError(why)
        layer = OmegaConf.load(path)
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"config file {path} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})"
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ConfigError(
            f"config file {path} is not valid YAML ({getattr(exc, 'problem', None) or first_line(exc)}{where})"
        ) from None
    if not isinstance(layer, DictConfig):
        raise ConfigError(f"config file {path} must hold a mapping (model:, data:, ...), not a list")
    if "actor_rollout_ref" in layer or "hydra" in layer:
        raise ConfigError(
            f"config file {path} is a verl (Hydra) config, not a pasr train one; run it with the verl engine "
            "(python3 -m recipe.main_pasr, pasr submit)"
        )
    return layer


def _pop_extends(layer, path: Path) -> str | None:
    """The preset ``layer`` (read from ``path``) is layered over, taken out of it; a recorded
    preset chain (``presets:``) is refused: only ``pasr train`` writes it."""
    if PRESETS in layer:
        raise ConfigError(
            f"config file {path}: {PRESETS} is what pasr train records of the presets a run was built "
            f"from; name the preset to start from with {EXTENDS}: NAME (or --preset NAME)"
        )
    if EXTENDS not in layer:
        return None
    name = layer.pop(EXTENDS)
    if not isinstance(name, str) or not name:
        raise ConfigError(
            f"config file {path}: {EXTENDS} must name one preset (a recipe/config/local_<name>.yaml), got {name!r}"
        )
    return name


def preset_chain(name: str) -> list[tuple[str, object]]:
    """``(name, layer)`` of preset ``name`` and of every preset it extends in turn, most
    specific first (``demo`` -> ``default`` -> ``cpu``). An unknown name or a cycle is a
    :class:`ConfigError` naming the chain."""
    chain: list[tuple[str, object]] = []
    while name is not None:
        names = [n for n, _ in chain]
        if name in names:
            raise ConfigError(f"preset {names[0]!r}: {EXTENDS} goes round in a circle ({' -> '.join([*names, name])})")
        try:
            path = preset_path(name)
        except ConfigError as exc:
            if not chain:
                raise
            raise ConfigError(f"preset {names[-1]!r} ({preset_path(names[-1])}): {EXTENDS}: {exc}") from None
        layer = _read_layer(path)
        chain.append((name, layer))
        name = _pop_extends(layer, path)
    return chain


def load_config(
    preset: str | None = None,
    config_file: str | None = None,
    overrides: list[str] = (),
    saved_run: bool = False,
    validate: bool = True,
) -> LocalTrainConfig:
    """Defaults <- presets <- --config YAML <- key=value overrides, validated. The presets are
    ``preset`` (else the one ``config_file`` names with ``extends:``, else ``default``) and
    those it extends; the chain is recorded in :attr:`LocalTrainConfig.presets`. Whatever is
    wrong with a file or a value (unreadable, not UTF-8, not YAML, a verl config, a bad
    override, an interpolation that does not resolve, a value the run cannot use) is a
    :class:`ConfigError` that names every bad key at once, in one line.
    ``saved_run``: ``config_file`` is a run's own ``config.yaml`` (``--resume``), the whole
    config with its recorded chain, read over no preset; retired keys still holding what the
    code does are dropped (:func:`recipe.retired_keys.drop_settings_kept_as_defaults`) and
    renamed keys take their new names (:func:`recipe.retired_keys.rename_saved_keys`).
    ``validate=False`` skips the value checks (:meth:`LocalTrainConfig.problems`), not the key
    and type checks: a saved run read only to compare it with what resumes it, whose
    machine-bound values (``model.threads``) the resume's overrides may change."""
    import yaml
    from omegaconf.errors import OmegaConfBaseException

    own = _read_layer(Path(config_file)) if config_file else None
    chain: list[tuple[str, object]] = []
    if saved_run and own is not None:
        drop_settings_kept_as_defaults(own)
        rename_saved_keys(own)
    else:
        extends = _pop_extends(own, Path(config_file)) if own is not None else None
        if preset and extends:
            raise ConfigError(
                f"--preset {preset} and {config_file}'s {EXTENDS}: {extends} both name the preset to "
                f"start from; keep one"
            )
        chain = preset_chain(preset or extends or DEFAULT_PRESET)
    layers = [layer for _, layer in reversed(chain)] + ([own] if own is not None else [])
    problems = []
    bad = [o for o in overrides if "=" not in o]
    if bad:
        raise ConfigError(f"overrides must look like key=value, got: {' '.join(bad)}")
    for override in overrides:
        if override.partition("=")[0].strip() in (PRESETS, EXTENDS):
            problems.append(
                f"{override.partition('=')[0].strip()} cannot be set by an override: name the preset to "
                "start from with --preset NAME"
            )
            continue
        try:
            layers.append(OmegaConf.from_dotlist([override]))
        except (yaml.YAMLError, OmegaConfBaseException) as exc:
            problems.append(f"cannot parse the override {override}: {getattr(exc, 'problem', None) or first_line(exc)}")
    for layer in layers:  # before the merge, which keeps the value below a ??? silently
        problems += missing_value_problems(layer) + [why for _, why in shape_problems(LocalTrainConfig, layer)]
    try:
        merged = OmegaConf.merge(*layers) if layers else OmegaConf.create({})
    except OmegaConfBaseException as exc:
        raise ConfigError("; ".join([*problems, f"cannot merge the config layers: {first_line(exc)}"])) from None
    # ${...} resolved here, once: config.yaml records the values the run used
    cfg, merge_problems = merge_reporting(LocalTrainConfig, merged, "")
    problems += merge_problems
    try:
        obj: LocalTrainConfig = OmegaConf.to_object(cfg)  # type: ignore[assignment]
    except OmegaConfBaseException as exc:  # not expected: merge_reporting left only good values
        raise ConfigError(
            "; ".join([*problems, f"{getattr(exc, 'full_key', '') or '?'}: not a valid value: {first_line(exc)}"])
        ) from None
    if chain:
        obj.presets = [name for name, _ in chain]
    if validate:
        problems += obj.problems()
    if problems:
        raise ConfigError("; ".join(dict.fromkeys(problems)))
    return obj


def to_yaml(cfg: LocalTrainConfig) -> str:
    return OmegaConf.to_yaml(OmegaConf.structured(cfg))
