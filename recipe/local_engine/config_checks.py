"""The value checks of the local engine's config (:class:`~recipe.local_engine.config.LocalTrainConfig`),
apart from the dataclasses that declare its keys and the preset and file reading that builds it.

Why a module of their own: every key's range, vocabulary and cross-key rule is here, in the one
function :func:`config_problems` that ``LocalTrainConfig.problems()`` and ``validate()`` call,
so that everything a run cannot use is reported at once, in one line naming each key, before
the model loads (several used to fail only when first used, some minutes into the warm-up).
It imports nothing of :mod:`recipe.local_engine.config` (which imports it): the vocabularies
the checks and the config share (:data:`WARMUP_LR_SCHEDULES`) are defined here.
"""

from __future__ import annotations

import os
from pathlib import Path

from data.warmup_traces import REFINE_STYLES
from recipe.metrics_file import logger_problems
from recipe.pasr_config import non_finite_problems
from recipe.rrr_config import judge_problem, method_problem
from runtime.gqa_attention import ATTENTIONS
from runtime.model_loading import DEVICES, resolve_device

WARMUP_LR_SCHEDULES = ("constant", "cosine")  # warmup.lr_schedule


def config_problems(cfg) -> list[str]:
    """Every problem of ``cfg`` (a ``LocalTrainConfig``) at once, across every section, each
    naming its key: a user fixes them in one go, not one per attempt. Empty when the config runs."""
    problems = non_finite_problems(cfg)  # every section, pasr.* included
    if problem := method_problem(cfg.method):
        problems.append(problem)
    problems += cfg.pasr.value_problems()
    problems += cfg.rrr.problems()
    if cfg.model.dtype not in ("float32", "bfloat16"):
        problems.append(f"model.dtype must be float32 or bfloat16, got {cfg.model.dtype!r}")
    if cfg.model.rollout_dtype not in ("auto", "float32", "bfloat16"):
        problems.append(f"model.rollout_dtype must be auto, float32 or bfloat16, got {cfg.model.rollout_dtype!r}")
    if cfg.warmup.refine_style not in REFINE_STYLES:
        problems.append(
            f"warmup.refine_style must be one of {', '.join(REFINE_STYLES)}, got {cfg.warmup.refine_style!r}"
        )
    for name in ("refine_fraction", "plain_fraction", "reflection_fraction", "retry_fraction"):
        if not 0.0 <= getattr(cfg.warmup, name) <= 1.0:
            problems.append(f"warmup.{name} must be in [0, 1]")
    if cfg.warmup.reflection_fraction + cfg.warmup.retry_fraction > 1.0:
        problems.append("warmup.reflection_fraction + warmup.retry_fraction must be <= 1")
    if cfg.data.difficulty not in (1, 2, 3):
        problems.append(f"data.difficulty must be 1, 2 or 3, got {cfg.data.difficulty}")
    if cfg.model.device not in DEVICES:
        problems.append(f"model.device must be {', '.join(DEVICES)}, got {cfg.model.device!r}")
    elif cfg.model.device == "cuda":
        try:
            resolve_device("cuda")
        except ValueError as exc:
            problems.append(f"model.device: {exc}")
    if cfg.model.attention not in ATTENTIONS:
        problems.append(f"model.attention must be {' or '.join(ATTENTIONS)}, got {cfg.model.attention!r}")
    for name in ("queries_per_step", "max_new_tokens", "gen_batch_size", "eval_batch_size"):
        if getattr(cfg.rollout, name) < 1:
            problems.append(f"rollout.{name} must be >= 1")
    for section, name in (("trainer", "steps"), ("warmup", "steps")):
        if getattr(getattr(cfg, section), name) < 0:
            problems.append(f"{section}.{name} must be >= 0, got {getattr(getattr(cfg, section), name)}")
    for name in ("save_every", "keep_last"):
        if getattr(cfg.trainer, name) < 1:
            problems.append(f"trainer.{name} must be >= 1, got {getattr(cfg.trainer, name)}")
    t = cfg.trainer
    if t.eval_sampled_k < 0 or not t.eval_temperature > 0:
        problems.append(
            f"trainer.eval_sampled_k must be >= 0 and trainer.eval_temperature > 0, got "
            f"{t.eval_sampled_k} and {t.eval_temperature}"
        )
    if t.eval_sampled_k and cfg.method != "pasr":
        problems.append(f"trainer.eval_sampled_k samples PASR's refine prompt; set it to 0 for method={cfg.method}")
    # Everything below used to fail only when first used, some of it after the warm-up had
    # run for minutes (or, for a negative temperature, not at all: it meant greedy).
    r, a, w, d = cfg.rollout, cfg.algo, cfg.warmup, cfg.data
    # what verl's core_algos.kl_penalty and agg_loss accept (the local engine calls them)
    kl_types = ("kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3")
    agg_modes = ("token-mean", "token-sum", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm")
    if r.eval_max_new_tokens < 1:
        problems.append("rollout.eval_max_new_tokens must be >= 1")
    if not r.temperature > 0:
        problems.append(f"rollout.temperature must be > 0 (GRPO needs sampled rollouts), got {r.temperature}")
    if not 0 < r.top_p <= 1:
        problems.append(f"rollout.top_p must be in (0, 1], got {r.top_p}")
    for key, value in (
        ("algo.lr", a.lr),
        ("warmup.lr", w.lr),
        ("algo.clip_ratio", a.clip_ratio),
        ("algo.max_grad_norm", a.max_grad_norm),
    ):
        if not value > 0:
            problems.append(f"{key} must be > 0, got {value}")
    for section, name in (
        ("algo", "micro_batch_size"),
        ("algo", "ppo_epochs"),
        ("warmup", "batch_size"),
        ("warmup", "micro_batch_size"),
        ("warmup", "n_traces"),
    ):
        if getattr(getattr(cfg, section), name) < 1:
            problems.append(f"{section}.{name} must be >= 1, got {getattr(getattr(cfg, section), name)}")
    if w.lr_schedule not in WARMUP_LR_SCHEDULES:
        problems.append(f"warmup.lr_schedule must be one of {', '.join(WARMUP_LR_SCHEDULES)}, got {w.lr_schedule!r}")
    if a.lr_warmup_steps < 0:
        problems.append(f"algo.lr_warmup_steps must be >= 0, got {a.lr_warmup_steps}")
    if a.kl_coef < 0:
        problems.append(f"algo.kl_coef must be >= 0, got {a.kl_coef}")
    if a.kl_type.removesuffix("+") not in kl_types:
        problems.append(f"algo.kl_type must be one of {', '.join(kl_types)} (optionally with +), got {a.kl_type!r}")
    if a.loss_agg_mode not in agg_modes:
        problems.append(f"algo.loss_agg_mode must be one of {', '.join(agg_modes)}, got {a.loss_agg_mode!r}")
    if problem := threads_problem(cfg.model.threads):
        problems.append(problem)
    seeds = [("trainer.seed", cfg.trainer.seed), ("warmup.seed", w.seed), ("data.seed", d.seed)]
    seeds += [("rollout.seed", r.seed)] if r.seed is not None else []
    for key, seed in seeds:
        if not 0 <= seed <= MAX_SEED:  # numpy's seeds, the RL and warm-up batch orders among them
            problems.append(f"{key} must be in [0, {MAX_SEED}], got {seed}")
    problems += logger_problems(cfg.trainer.logger)
    if d.train_size < 1:
        problems.append(f"data.train_size must be >= 1, got {d.train_size}")
    if d.eval_size < (1 if cfg.trainer.evaluates else 0):
        problems.append(f"data.eval_size must be >= 1 while an evaluation is on (trainer.eval_*), got {d.eval_size}")
    if cfg.method == "rrr" and judge_problem(cfg.pasr.judge.kind):
        problems.append(judge_problem(cfg.pasr.judge.kind))
    if (d.source == "countdown") != (cfg.pasr.judge.kind == "countdown"):
        problems.append(
            f"data.source={d.source} with pasr.judge.kind={cfg.pasr.judge.kind}: Countdown rows need the "
            "countdown judge and only they can use it (set both, or use --preset rrr)"
        )
    if d.source != "synthetic":
        from data.examples import DatasetError
        from data.loaders import get_dataset, looks_like_path

        if looks_like_path(d.source) or Path(d.source).expanduser().exists():
            if not Path(d.source).expanduser().is_file():
                problems.append(f"data.source: data file not found: {d.source}")
        else:
            try:
                get_dataset(d.source)
            except DatasetError as exc:
                problems.append(f"data.source: {exc}")
    return problems


MAX_SEED = 2**32 - 1  # numpy's legacy seeding (np.random.seed) takes [0, 2**32 - 1]


def threads_problem(threads: int) -> str | None:
    """Why ``model.threads`` cannot be used on this machine, or None: torch starts that many
    threads (100000 ran out of memory), and more than the cores only makes them wait on each other."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if threads < 0 or threads > cores:
        return f"model.threads must be 0 (measured at start) or 1 to the {cores} CPU cores here, got {threads}"
    return None
