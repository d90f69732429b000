"""The command lines the GPU benchmarks run, built from one benchmark's ``args``: the local
engine's warm-up, PASR run and evaluation (``python -m recipe train`` with the check's overrides),
and verl's driver with the overrides and data that make it train what the local engine trains.

Why a module of their own: ``gpu_check`` (verl beside the local engine), ``gpu_scale`` (three
seeds of PASR and its control) and ``pasr_ab`` (the refine term's A/B) build their runs from the
same pieces, so that a warm-up, an RL run and an evaluation mean the same in each. They read the
options of ``gpu_check``'s parser (``gpu_scale.with_`` fills them in for the others). Moved here
from :mod:`benchmarks.gpu_check`, which still re-exports them.
"""

from __future__ import annotations

import sys
from pathlib import Path

from benchmarks import sampled_rows

VERL_DRIVER = "recipe.main_pasr"


GPU_GEN_BATCH = 256


def local_common(args) -> list[str]:
    """Overrides every local-engine run of the check shares (warm-up, parity run, evaluations).
    The ``<think>`` prefill (``pasr.prefill_think``) is the preset's, and :func:`verl_overrides`
    gives verl the same: both engines put it in the prompt, so the warm-up, both RL phases and
    every evaluation here prompt the model alike."""
    qps = [] if not args.queries_per_step else [f"rollout.queries_per_step={args.queries_per_step}"]
    # on a GPU a step's rollouts in one generation batch (as vLLM takes them all): decoding a 135M
    # model is latency-bound there, and the preset's 64 made two rounds of a 96-rollout step
    # (the local engine stepped 13-23 s against verl's 6.85 on the H200, issue #65); pasr_ab does the same
    gen = [f"rollout.gen_batch_size={GPU_GEN_BATCH}"] if str(args.device).startswith("cuda") else []
    return [
        f"model.device={args.device}",
        *gen,
        f"data.eval_size={args.eval_size}",
        *qps,
        f"trainer.seed={args.seed}",
        f"warmup.seed={args.seed}",
        f"warmup.lr_schedule={args.warmup_lr_schedule}",
        "trainer.eval_plain=false",
        *sampled_rows.overrides(args),  # mean@K at T=0.5 beside every greedy evaluation
        "trainer.dump_rollouts=true",
        *args.local_override,
    ]


def local_cmd(args, run_dir: Path, *overrides: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "recipe",
        "train",
        "--preset",
        args.preset,
        "--run-dir",
        str(run_dir),
        *local_common(args),
        *overrides,
    ]


def warmup_cmd(args, run_dir: Path, cfg, evaluate: bool = True) -> list[str]:
    """The warm-up and its evaluation (``eval/warmup.jsonl``), checkpointed once at its end: the
    default's checkpoint every 10 steps cost 20 of its 82 s on the H100. ``evaluate`` False: the
    checkpoint only (``--part learn`` evaluates it beside verl's start-up instead of before it)."""
    return local_cmd(
        args,
        run_dir,
        "trainer.steps=0",
        f"trainer.save_every={cfg.warmup.steps}",
        "trainer.eval_at_start=false",
        f"trainer.eval_after_warmup={str(evaluate).lower()}",
    )


def eval_cmd(args, run_dir: Path, model: str | Path) -> list[str]:
    """A greedy evaluation of ``model`` on the held-out problems (``eval/base.jsonl``)."""
    return local_cmd(
        args,
        run_dir,
        f"model.path={model}",
        "warmup.steps=0",
        "trainer.steps=0",
        "trainer.eval_at_start=true",
        "trainer.eval_after_warmup=false",
        "trainer.eval_at_end=false",
    )


# What the local engine changes to train as verl does, in this check's parity runs: verl keeps the
# rows of groups without reward spread in its token-mean loss (their KL gradient included), which
# the local engine skips by default (algo.skip_zero_adv) to save CPU time. Skipping them gave the
# local engine's steps a gradient norm 2-3x verl's (0.5-1.4 against 0.16-0.65) on the H200 on
# 2026-11-28, and its held-out accuracy fell where verl's held (docs/results/gpu_check.md).
PARITY = ("algo.skip_zero_adv=false",)


def local_pasr_cmd(args, run_dir: Path, warm: Path, parity: bool = False) -> list[str]:
    """The local engine's PASR steps from the same warm-up (``eval/final.jsonl``). ``--part learn``
    keeps every step's weights instead (``checkpoints/step_N``, the optimizer state in the newest
    only) and evaluates none: verl's step count is known only when the deadline stops it, and the
    local row is evaluated at that step. ``parity``: trained as verl trains (:data:`PARITY`)."""
    if args.part == "learn":
        every = ["trainer.save_every=1", f"trainer.keep_last={args.steps}", "trainer.eval_at_end=false"]
    else:
        every = ["trainer.eval_at_end=true"]
    return local_cmd(
        args,
        run_dir,
        f"model.path={warm}",
        "warmup.steps=0",
        f"trainer.steps={args.steps}",
        "trainer.eval_at_start=false",
        "trainer.eval_after_warmup=false",
        *every,
        *(PARITY if parity else ()),
    )


def local_settings(args):
    """The local engine's config for this check (the reward and the sizes verl copies)."""
    from recipe.local_engine.config import load_config

    return load_config(
        preset=args.preset, overrides=[o for o in local_common(args) if not o.startswith("model.device")]
    )


def verl_overrides(args, cfg, train_file: Path, val_file: Path, model: Path, ckpt_dir: Path) -> list[str]:
    """``recipe.main_pasr`` overrides that train what the local engine's ``cfg`` trains.

    Same as the local engine: the data (synthetic arithmetic, its train seed), queries per step,
    group sizes (``pasr.n_refine`` refine + ``pasr.n_plain`` plain rollouts), temperature, response
    budget, every ``pasr.*`` reward setting and prompt, the ``<think>`` prefill, the RL learning rate and its linear
    ramp, AdamW without weight decay, KL (low-var, 0.04), clip 0.2, grad-norm clip, one optimizer step
    per RL step (the mini-batch is the whole batch), GRPO with std normalisation.
    Where they differ, by verl's design: rollouts sample from vLLM in bf16 (the local engine
    samples from its fp32 policy), verl shuffles the training set with its own sampler, and it
    keeps zero-advantage rows in the loss's token mean (the check's local runs do too: :data:`PARITY`). The ramp
    matches: verl logged lr 1e-6, 2e-6, ... at steps 1, 2, ... on the H100 run.
    Start-up choices for a small model on one GPU are the setup ``small_one_gpu``
    (recipe/config/setup/small_one_gpu.yaml: eager vLLM, no torch.compile, no offload, one
    agent-loop worker, no DataLoader workers, no FlashInfer autotune, no dashboard); here also no
    validation (this check evaluates on its own held-out set). ``--enforce-eager false`` turns graph
    capture and the autotune back on."""
    p = cfg.pasr
    algo = cfg.algo
    out = [
        # verl's start-up choices for a small model on one GPU (recipe/config/setup/small_one_gpu.yaml)
        "setup=small_one_gpu",
        "method=pasr",
        f"data.train_files={train_file}",
        f"data.val_files={val_file}",
        f"data.train_batch_size={cfg.rollout.queries_per_step}",
        "data.max_prompt_length=512",
        f"data.max_response_length={cfg.rollout.max_new_tokens}",
        f"data.seed={args.seed}",
        f"actor_rollout_ref.model.path={model}",
        f"actor_rollout_ref.actor.optim.lr={algo.lr}",
        f"actor_rollout_ref.actor.optim.lr_warmup_steps={algo.lr_warmup_steps if algo.lr_warmup_steps > 0 else -1}",
        "actor_rollout_ref.actor.optim.weight_decay=0.0",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={cfg.rollout.queries_per_step}",
        f"actor_rollout_ref.actor.ppo_epochs={algo.ppo_epochs}",
        f"actor_rollout_ref.actor.clip_ratio={algo.clip_ratio}",
        f"actor_rollout_ref.actor.clip_ratio_low={algo.clip_ratio}",
        f"actor_rollout_ref.actor.clip_ratio_high={algo.clip_ratio}",
        f"actor_rollout_ref.actor.grad_clip={algo.max_grad_norm}",
        f"actor_rollout_ref.actor.use_kl_loss={str(algo.kl_coef > 0).lower()}",
        f"actor_rollout_ref.actor.kl_loss_coef={algo.kl_coef}",
        f"actor_rollout_ref.actor.kl_loss_type={algo.kl_type}",
        f"actor_rollout_ref.actor.loss_agg_mode={algo.loss_agg_mode}",
        f"actor_rollout_ref.rollout.gpu_memory_utilization={args.gpu_memory_utilization}",
        f"actor_rollout_ref.rollout.enforce_eager={str(args.enforce_eager).lower()}",
        "actor_rollout_ref.rollout.engine_kwargs.vllm.enable_flashinfer_autotune="
        f"{str(not args.enforce_eager).lower()}",
        f"actor_rollout_ref.rollout.temperature={cfg.rollout.temperature}",
        f"actor_rollout_ref.rollout.top_p={cfg.rollout.top_p}",
        f"algorithm.norm_adv_by_std_in_grpo={str(algo.norm_adv_by_std).lower()}",
        f"pasr.n_refine={p.n_refine}",
        f"pasr.n_plain={p.n_plain}",
        f"pasr.tie_value={p.tie_value}",
        f"pasr.zeta={p.zeta}",
        f"pasr.empty_refine_value={'null' if p.empty_refine_value is None else p.empty_refine_value}",
        f"pasr.refine_compare={p.refine_compare}",
        f"pasr.weights.format={p.weights.format}",
        f"pasr.weights.acc={p.weights.acc}",
        f"pasr.weights.refine={p.weights.refine}",
        f"pasr.prompts.refine={p.prompts.refine}",
        f"pasr.prompts.plain={p.prompts.plain}",
        f"pasr.prefill_think={str(p.prefill_think).lower()}",
        f"pasr.judge.kind={p.judge.kind}",
        "pasr_verl.dump_validation=false",
        "trainer.total_epochs=1",
        f"trainer.total_training_steps={args.steps}",
        # learn: a checkpoint at the end (or at the deadline's stop) only; each costs seconds
        f"trainer.save_freq={args.steps if args.part == 'learn' else args.save_every}",
        "trainer.test_freq=-1",
        "trainer.val_before_train=false",
        "trainer.max_actor_ckpt_to_keep=2",
        "trainer.resume_mode=auto",
        f"trainer.default_local_dir={ckpt_dir}",
        "trainer.experiment_name=gpu-check",
        "trainer.logger=[console]",
    ]
    if args.part == "learn":  # verl starts before its model is written: the warm-up runs beside its start-up
        out.append(f"pasr_verl.wait_for_model_s={args.budget_s}")
    return [*out, *args.verl_override]


def write_verl_data(cfg, data_dir: Path, n_val: int = 16) -> tuple[Path, Path]:
    """The local engine's training problems as verl's RL parquet (the refine system prompt in
    each row; PASR's rollout sets the system prompt per variant anyway), and a few held-out ones
    as the validation file verl wants even when it never validates."""
    from data.generated_sets import heldout_seed
    from data.loaders import load_examples
    from data.verl_parquet import write_rl_parquet
    from prompts import load_prompt

    d = cfg.data
    if d.source != "synthetic":
        raise SystemExit(f"gpu_check: data.source={d.source}: this check trains on the synthetic arithmetic")
    system = load_prompt(cfg.pasr.prompts.refine)
    train = load_examples("synthetic", split="train", limit=d.train_size, seed=d.seed, difficulty=d.difficulty)
    val = load_examples("synthetic", split="test", limit=n_val, seed=heldout_seed(d.seed), difficulty=d.difficulty)
    data_dir.mkdir(parents=True, exist_ok=True)
    return (
        write_rl_parquet(train, data_dir / "train.parquet", system),
        write_rl_parquet(val, data_dir / "val.parquet", system),
    )


def verl_env(args) -> dict[str, str]:
    pairs = [e.partition("=") for e in args.verl_env]
    bad = [e for e, (_, sep, _) in zip(args.verl_env, pairs) if not sep]
    if bad:
        raise SystemExit(f"gpu_check: --verl-env takes KEY=VALUE, got {', '.join(bad)}")
    return {k: v for k, _, v in pairs}


def driver_cmd(driver: str, overrides: list[str]) -> list[str]:
    head = [driver] if driver.endswith(".py") else ["-m", driver]
    return [sys.executable, *head, *overrides]
