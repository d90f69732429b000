"""Each part of a local PASR run beside its floor on this CPU, and a peer's step beside ours.

Issue 36 asks the demo to learn by getting faster, not by shrinking until nothing is learned.
To know which part can get faster, and by how much, each part is set beside its *floor*: the
time its arithmetic alone would take on this CPU. The floor counts the FLOPs of the very step
that was timed, from the model's shapes and the step's real tokens (each distinct prompt and
each prompt prefix several prompts share counted once, as the engine runs them; responses at
their sampled lengths, no padding; causal attention over each token's own context), and divides
them by the rate this CPU reaches on matmuls of the same shapes (the model's linear maps at the
same number of rows: one decode step's live rows, one micro-batch's tokens) in the dtype the
engine ran. ``measured / floor`` is how much of a part is not arithmetic: padding, rows kept past
their stop, per-call overhead, copies, memory-bound decode steps. The issue's target is 2x on an
AVX2 CPU. Outside every floor: AdamW's step (memory-bound; its seconds are shown beside the
update's), syncing the rollout copy's weights, judging.

Parts, each the trainer's own code on the real embedded model (``LocalPasrTrainer``, the
default ``LocalTrainConfig``):

* **warm-up step**: ``warmup_step`` on ``warmup_batch`` (forward, backward, AdamW); its step 1
  runs first, untimed, to warm the allocator, the kernels and AdamW's state;
* **PASR step**: ``pasr_step`` (the RL phase's second; its first, untimed, makes the reference,
  the rollout copy and a fresh AdamW's state), split into generation (sampled refine and plain
  rollouts), reward (judging; no floor), log-probs (the frozen reference's forward over the
  trained rows, ``fill_logprobs``; the old log-probs come from the update's own forward with one
  PPO epoch) and update (the policy's forward and backward over the trained rows, AdamW);
* **evaluation**: ``_evaluate`` on ``--eval-n`` held-out problems, greedy.

The update trains every refine row (``algo.skip_zero_adv=false``): a step whose groups happen to
have no reward spread would skip its update and time nothing; this way the update is the same
work in every run, the work TRL's ``GRPOTrainer`` always does (it trains zero-advantage rows).

The peer: TRL's ``GRPOTrainer`` (the optional ``bench`` extra: ``pip install -e .[bench]``;
skipped with a message when ``trl`` is not installed) from the policy our parts left (two
warm-up steps already make the model stop where the base model writes to the budget), with the
same 8 queries x 4 completions, completion budget, sampling, learning rate, KL weight,
micro-batch and dtype, on the same threads; its last training step is timed (the first warms
up), beside ours. Both columns are the same CPU in the same run: on a shared machine the load
averages before and after, and ``--note``, go into ``--out``.

    python -m benchmarks.step_floors --threads 1 --eval-n 32 --out benchmarks/results/step_floors.json
    python -m benchmarks.step_floors --dtype float32 --no-trl model.path=runs/x/checkpoints/step_000160
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from recipe.prompt_prefill import shared_prefixes

# Rows of the probe matmuls: from one decode row to a long micro-batch; rates in between are
# interpolated in log(rows), beyond the ends held.
LINEAR_ROWS = (1, 4, 16, 64, 256, 1024)
LOGIT_ROWS = (1, 4, 16, 64, 256)  # the output layer saturates sooner, and a 49k-wide probe is slow
TRAIN_KINDS = ("warm-up step", "log-probs", "update")  # the parts that run in the update's dtype
SUBJECT = ["warmup.steps=2", "trainer.steps=2", "algo.skip_zero_adv=false", "trainer.dump_rollouts=false"]


# ---------------------------------------------------------------- FLOP counting (pure)
@dataclass(frozen=True)
class Shapes:
    """What a decoder's FLOPs depend on (a Llama-style model: grouped-query attention, gated MLP,
    an output layer as wide as the vocabulary)."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int

    @classmethod
    def of(cls, config) -> "Shapes":
        heads = config.num_attention_heads
        return cls(config.hidden_size, config.num_hidden_layers, heads, config.num_key_value_heads,
                   getattr(config, "head_dim", None) or config.hidden_size // heads, config.intermediate_size,
                   config.vocab_size)

    def linear_shapes(self, rows: int) -> list[tuple[int, int, int]]:
        """One layer's matmuls for ``rows`` tokens, as ``(m, k, n)``: q, k, v, o; gate, up, down."""
        h, q, kv, i = self.hidden, self.heads * self.head_dim, self.kv_heads * self.head_dim, self.intermediate
        return [(rows, h, q), (rows, h, kv), (rows, h, kv), (rows, q, h), (rows, h, i), (rows, h, i), (rows, i, h)]

    @property
    def token_flops(self) -> int:
        """Forward FLOPs of one token through every layer's linear maps."""
        return self.layers * sum(2 * k * n for _, k, n in self.linear_shapes(1))

    @property
    def pair_flops(self) -> int:
        """Forward FLOPs of one query attending to one key in every layer: its score and its
        weighted value, each a dot product of ``head_dim`` per query head."""
        return 4 * self.layers * self.heads * self.head_dim

    @property
    def logit_flops(self) -> int:
        """Forward FLOPs of one row of logits (the output layer)."""
        return 2 * self.hidden * self.vocab


@dataclass(frozen=True)
class Work:
    """FLOPs of one kind (``linear`` | ``attention`` | ``logits``) in calls of ``rows`` rows:
    the rows set the matmul shape, hence the rate the floor divides by."""

    kind: str
    rows: int
    flops: float


def _triangle(n: int) -> int:
    """Query-key pairs of ``n`` causal tokens from position 0: 1 + 2 + ... + n."""
    return n * (n + 1) // 2


def pass_work(shapes: Shapes, prompts: Sequence[Sequence[int]], responses: Sequence[Sequence[int]]) -> list[Work]:
    """One forward pass that scores ``responses`` after ``prompts`` (the update's log-probs, the
    warm-up's loss), in one call.

    Prompt pieces are counted once each, as :mod:`recipe.prompt_prefill` runs them: each prefix
    that rows share (:func:`recipe.prompt_prefill.shared_prefixes`) and each distinct prompt's
    rest. A response of ``R`` tokens feeds ``R - 1`` of them (its last token is predicted, never
    fed) and needs ``R`` rows of logits. Every fed token attends to itself and what precedes it."""
    if len(prompts) != len(responses):
        raise ValueError(f"{len(prompts)} prompts but {len(responses)} responses")
    shared = shared_prefixes([list(p) for p in prompts]) if prompts else []
    prefixes = {tuple(p[:n]) for p, n in zip(prompts, shared) if n}
    rests = {(tuple(p), n) for p, n in zip(prompts, shared)}
    tokens = sum(map(len, prefixes)) + sum(len(p) - n for p, n in rests)
    pairs = sum(_triangle(len(x)) for x in prefixes) + sum(_triangle(len(p)) - _triangle(n) for p, n in rests)
    logits = 0
    for p, r in zip(prompts, responses):
        if r:
            tokens += len(r) - 1
            pairs += _triangle(len(p) + len(r) - 1) - _triangle(len(p))
            logits += len(r)
    return [w for w in (Work("linear", tokens, tokens * shapes.token_flops),
                        Work("attention", tokens, pairs * shapes.pair_flops),
                        Work("logits", logits, logits * shapes.logit_flops)) if w.flops]


def generation_work(shapes: Shapes, prompts: Sequence[Sequence[int]], responses: Sequence[Sequence[int]],
                    batch_size: int) -> list[Work]:
    """Generating ``responses`` to ``prompts`` in the engine's batches
    (:func:`recipe.hf_generate.length_batches` of ``batch_size``): each batch's prompt pass
    (:func:`pass_work`), then one decode step per new token with the rows still writing.

    The FLOPs are those of :func:`pass_work` over the same rows (the same tokens are fed and the
    same logits taken), but a decode step's matmuls have only as many rows as rows are still
    writing, which is why its rate, and so its floor, differ from a pass's. A row that has
    stopped costs nothing here (the engine drops stopped rows every 16 tokens)."""
    from recipe.hf_generate import length_batches

    work: list[Work] = []
    for batch in length_batches([len(p) for p in prompts], batch_size):
        rows = [(prompts[i], responses[i]) for i in batch]
        work += pass_work(shapes, [p for p, _ in rows], [[] for _ in rows])
        first = sum(1 for _, r in rows if r)  # each row's first token: the prompt pass's last hidden state
        if first:
            work.append(Work("logits", first, first * shapes.logit_flops))
        for j in range(1, max((len(r) for _, r in rows), default=0)):
            live = [(p, r) for p, r in rows if len(r) > j]  # feeding token j - 1 to sample token j
            m = len(live)
            work += [Work("linear", m, m * shapes.token_flops),
                     Work("attention", m, sum(len(p) + j for p, _ in live) * shapes.pair_flops),
                     Work("logits", m, m * shapes.logit_flops)]
    return work


def micro_batches(prompts: Sequence, responses: Sequence, size: int) -> list[tuple[list, list]]:
    """Rows split as ``DataProto.split(size)`` splits the update's batch: in order, ``size`` each."""
    return [(list(prompts[i : i + size]), list(responses[i : i + size])) for i in range(0, len(prompts), size)]


def total_flops(work: Sequence[Work]) -> float:
    return sum(w.flops for w in work)


# ---------------------------------------------------------------- rates and floors
@dataclass
class Rates:
    """FLOP/s this CPU reached on the model's matmuls in one dtype, by kind and rows; forward
    shapes, and (``backward``) the two transposed products a linear layer's backward pass runs.
    Attention is charged at the linear rate: its matmuls are smaller, so this keeps the floor
    a floor."""

    dtype: str
    forward: dict[str, dict[int, float]]
    backward: dict[str, dict[int, float]]

    def at(self, kind: str, rows: int, backward: bool = False) -> float:
        table = (self.backward if backward else self.forward)["linear" if kind == "attention" else kind]
        grid = sorted(table)
        if rows <= grid[0]:
            return table[grid[0]]
        if rows >= grid[-1]:
            return table[grid[-1]]
        hi = next(g for g in grid if g >= rows)
        lo = grid[grid.index(hi) - 1]
        t = (math.log(rows) - math.log(lo)) / (math.log(hi) - math.log(lo))
        return math.exp((1 - t) * math.log(table[lo]) + t * math.log(table[hi]))


def floor_seconds(work: Sequence[Work], rates: Rates, train: bool = False) -> float:
    """Seconds ``work`` takes at ``rates``: each item's FLOPs over the rate of its kind at its
    rows; ``train`` adds the backward pass, twice the forward FLOPs (the gradients of the
    inputs and of the weights) at the backward shapes' rate."""
    seconds = sum(w.flops / rates.at(w.kind, w.rows) for w in work)
    if train:
        seconds += sum(2 * w.flops / rates.at(w.kind, w.rows, backward=True) for w in work)
    return seconds


def time_linear(dtype, rows: int, k: int, n: int, reps: int = 3) -> float:
    """Best-of-``reps`` seconds of ``F.linear`` on ``rows x k`` inputs and an ``n x k`` weight,
    after a warm-up: the layout the model's layers use. :func:`recipe.cpu_dtype.time_matmul`
    multiplies by a ``k x n`` matrix instead, which at a few rows runs another kernel (one bf16
    row through the output layer: 7 GFLOP/s that way, 17 this way, on the 2-core EPYC)."""
    import torch

    gen = torch.Generator().manual_seed(0)
    x, w = torch.randn(rows, k, generator=gen).to(dtype), torch.randn(n, k, generator=gen).to(dtype)
    torch.nn.functional.linear(x, w)
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        torch.nn.functional.linear(x, w)
        best = min(best, time.perf_counter() - start)
    return best


def measure_rates(shapes: Shapes, dtype: str, reps: int = 5) -> Rates:
    """The model's matmuls timed on this CPU (best of ``reps``) in ``dtype`` at
    :data:`LINEAR_ROWS` / :data:`LOGIT_ROWS` rows: a layer's seven linear maps together, and the
    output layer. Forward: :func:`time_linear`; backward: the two products autograd runs for a
    linear layer, ``d out @ W`` and ``d out^T @ x``, as plain matmuls
    (:func:`recipe.cpu_dtype.time_matmul`, whose layout they have)."""
    import torch

    from recipe.cpu_dtype import time_matmul

    dt = getattr(torch, dtype)

    def forward(products: list[tuple[int, int, int]]) -> float:
        return sum(2 * m * k * n for m, k, n in products) / sum(time_linear(dt, m, k, n, reps) for m, k, n in products)

    def backward(products: list[tuple[int, int, int]]) -> float:
        grads = [s for m, k, n in products for s in ((m, n, k), (n, m, k))]
        return sum(2 * m * k * n for m, k, n in grads) / sum(time_matmul(dt, s, reps) for s in grads)

    def head(rows: int) -> list[tuple[int, int, int]]:
        return [(rows, shapes.hidden, shapes.vocab)]

    return Rates(
        dtype,
        forward={"linear": {m: forward(shapes.linear_shapes(m)) for m in LINEAR_ROWS},
                 "logits": {m: forward(head(m)) for m in LOGIT_ROWS}},
        backward={"linear": {m: backward(shapes.linear_shapes(m)) for m in LINEAR_ROWS},
                  "logits": {m: backward(head(m)) for m in LOGIT_ROWS}},
    )


# ---------------------------------------------------------------- the trainer's parts, timed
@dataclass
class Part:
    name: str
    seconds: float
    dtype: str | None  # what it ran in; None: no floor (judging)
    work: list[Work]
    train: bool = False
    detail: str = ""
    optimizer_s: float | None = None  # of ``seconds``, AdamW's step: memory-bound, outside the floor


@contextlib.contextmanager
def wrapped(module, name: str, wrapper):
    """``module.name`` replaced by ``wrapper(original)`` for the block: how the parts' inputs are
    seen and their inner pieces timed without touching the engine."""
    own = name in vars(module)  # a method of an instance's class is put back by removing the wrapper
    original = getattr(module, name)
    setattr(module, name, wrapper(original))
    try:
        yield
    finally:
        if own:
            setattr(module, name, original)
        else:
            delattr(module, name)


def recorder(seen: list):
    """A wrapper for :func:`wrapped` that keeps what the call returned."""
    def wrap(fn):
        def call(*args, **kwargs):
            out = fn(*args, **kwargs)
            seen.append(out)
            return out
        return call
    return wrap


def stopwatch(seconds: list):
    """A wrapper for :func:`wrapped` that adds each call's wall time to ``seconds``."""
    def wrap(fn):
        def call(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                seconds.append(time.perf_counter() - start)
        return call
    return wrap


def trained_rows(data) -> tuple[list[list[int]], list[list[int]]]:
    """(prompts, responses) of the rows in an update's batch (``DataProto`` as ``build_batch``
    packs it: left-padded prompts, right-padded responses)."""
    b = data.batch
    width = b["input_ids"].shape[1] - b["responses"].shape[1]
    prompts = [ids[:width][mask[:width].bool()].tolist() for ids, mask in zip(b["input_ids"], b["attention_mask"])]
    responses = [r[m.bool()].tolist() for r, m in zip(b["responses"], b["response_mask"])]
    return prompts, responses


def _mean_len(rows) -> float:
    return sum(map(len, rows)) / max(1, len(rows))


def time_parts(cfg, policy_dir: Path) -> tuple[list[Part], dict]:
    """The warm-up step, the PASR step's parts and the evaluation, timed on one trainer; the
    policy they leave is saved in ``policy_dir`` for the peer to start from."""
    import torch

    import recipe.local_engine.evaluate as evaluate_module
    import recipe.local_engine.pasr_step as pasr_step_module
    import recipe.local_engine.policy_update as policy_update
    from recipe.local_engine.trainer import LocalPasrTrainer

    with tempfile.TemporaryDirectory() as tmp:
        trainer = LocalPasrTrainer(cfg, Path(tmp) / "run")
        trainer.setup()
        trainer.evals = {}
        shapes = Shapes.of(trainer.model.config)
        update_dtype = "bfloat16" if trainer.algo.bf16_autocast else "float32"
        parts: list[Part] = []

        trainer.optimizer = trainer._make_optimizer("warmup")
        trainer.warmup_step(1)  # untimed: the allocator and kernels
        step = cfg.warmup.steps
        prompts, responses = trainer.warmup_batch(step)
        adam: list[float] = []
        with wrapped(trainer.optimizer, "step", stopwatch(adam)):
            metrics = trainer.warmup_step(step)
        parts.append(Part("warm-up step", metrics["timing_s/update"], update_dtype, pass_work(shapes, prompts, responses),
                          train=True, optimizer_s=sum(adam),
                          detail=f"{len(prompts)} rows, prompt {_mean_len(prompts):.0f} + target "
                                 f"{_mean_len(responses):.0f} tokens; AdamW {sum(adam):.2f} s"))
        trainer.step = step

        # The RL phase's first step makes the KL reference and the rollout copy and AdamW's state
        # (two more copies of the weights: 1 s of the first update): untimed, as step 1 above. The
        # second is what the other steps of a run cost.
        trainer.optimizer = trainer._make_optimizer(cfg.method)
        step += 1
        trainer._set_rl_lr(step)
        trainer.pasr_step(step)
        trainer.step = step
        step += 1
        trainer._set_rl_lr(step)
        gens, batches, logprob_s, adam = [], [], [], []

        def seen_rows(fn):
            def call(model, ref_model, data, *args, **kwargs):
                batches.append(trained_rows(data))
                return fn(model, ref_model, data, *args, **kwargs)
            return call

        with wrapped(pasr_step_module, "generate_step", recorder(gens)), \
                wrapped(policy_update, "fill_logprobs", lambda fn: seen_rows(stopwatch(logprob_s)(fn))), \
                wrapped(trainer.optimizer, "step", stopwatch(adam)):
            metrics = trainer.pasr_step(step)
        trainer.step = step
        rollouts = gens[0]
        g_prompts, g_responses = [g.prompt_ids for g in rollouts], [g.response_ids for g in rollouts]
        parts.append(Part("generation", metrics["timing_s/gen"], trainer.rollout_dtype,
                          generation_work(shapes, g_prompts, g_responses, cfg.rollout.gen_batch_size),
                          detail=f"{len(rollouts)} rollouts of {_mean_len(g_responses):.0f} tokens "
                                 f"(max {cfg.rollout.max_new_tokens})"))
        parts.append(Part("reward", metrics["timing_s/reward"], None, [], detail="judging, no floor"))
        t_prompts, t_responses = batches[0] if batches else ([], [])
        mbs = micro_batches(t_prompts, t_responses, cfg.algo.micro_batch_size)
        forwards = (cfg.algo.kl_coef > 0) + (cfg.algo.ppo_epochs > 1)  # reference, old policy
        ref_work = [w for p, r in mbs for w in pass_work(shapes, p, r)] * forwards
        parts.append(Part("log-probs", sum(logprob_s), update_dtype, ref_work,
                          detail=f"{forwards} forward over {len(t_prompts)} rows, micro-batches of {cfg.algo.micro_batch_size}"))
        update_work = [w for p, r in mbs for w in pass_work(shapes, p, r)] * cfg.algo.ppo_epochs
        parts.append(Part("update", metrics["timing_s/update"] - sum(logprob_s), update_dtype, update_work, train=True,
                          optimizer_s=sum(adam), detail=f"{len(t_prompts)} rows of {_mean_len(t_responses):.0f} tokens, "
                                                        f"fwd + bwd; AdamW {sum(adam):.2f} s"))

        evals: list = []
        with wrapped(evaluate_module, "generate_step", recorder(evals)):
            metrics = trainer._evaluate("bench")
        e_prompts, e_responses = [g.prompt_ids for g in evals[0]], [g.response_ids for g in evals[0]]
        parts.append(Part("evaluation", metrics["timing_s/eval"], trainer.rollout_dtype,
                          generation_work(shapes, e_prompts, e_responses, cfg.rollout.eval_batch_size),
                          detail=f"{len(trainer.heldout)} problems, {len(evals[0])} greedy rows of "
                                 f"{_mean_len(e_responses):.0f} tokens"))
        # The peer samples from these weights, not the base model's: two warm-up steps already
        # teach the model to stop (base: most rollouts run to the budget), and a peer writing
        # three times the tokens would be timing another step.
        trainer.model.save_pretrained(policy_dir)
        trainer.tokenizer.save_pretrained(policy_dir)
        subject = {"shapes": shapes, "rollout_dtype": trainer.rollout_dtype, "update_dtype": update_dtype,
                   "threads": torch.get_num_threads(), "attention": trainer.attention,
                   "step_rollouts": len(rollouts), "step_trained_rows": len(t_prompts),
                   "step_response_tokens": sum(map(len, g_responses)), "step_trained_tokens": sum(map(len, t_responses)),
                   "policy_dir": str(policy_dir),
                   "train": trainer.train, "prompts": trainer.prompts, "tokenizer": trainer.tokenizer}
    return parts, subject


# ---------------------------------------------------------------- the peer
def trl_step(cfg, subject: dict, steps: int) -> dict:
    """TRL ``GRPOTrainer`` on the same model (the policy our parts left), 8 queries x 4 completions (``queries_per_step`` x
    ``pasr.n_refine``: the rows PASR trains), completion budget, sampling, optimiser, KL weight,
    micro-batch, dtype and threads; the same refine prompts, ``<think>`` prefill included, as
    text (TRL then applies no template). ``steps`` training steps; the last is the figure."""
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from transformers.trainer_callback import PrinterCallback
    from trl import GRPOConfig, GRPOTrainer

    from recipe.hf_generate import render_prompts
    from recipe.local_engine.rollout import THINK_PREFILL

    tok, prompts = subject["tokenizer"], subject["prompts"]
    prefill = THINK_PREFILL if cfg.rollout.prefill_think else ""
    queries = subject["train"][: cfg.rollout.queries_per_step * steps]
    rendered = render_prompts(tok, [prompts.refine_chat(q.question) for q in queries], prefill)
    texts = [tok.decode(ids) for ids in rendered]
    same_tokens = sum(tok(t, add_special_tokens=False)["input_ids"] == ids for t, ids in zip(texts, rendered))
    data = Dataset.from_dict({"prompt": texts, "answer": [str(q.answer) for q in queries]})

    def reward(completions, answer, **_):
        """Whether the gold answer appears: what is judged does not change what is computed."""
        return [float(a in c) for c, a in zip(completions, answer)]

    class Clock(TrainerCallback):
        def __init__(self):
            self.marks, self.logs = [], []

        def on_train_begin(self, args, state, control, **kw):
            self.marks.append(time.perf_counter())

        def on_step_end(self, args, state, control, **kw):
            self.marks.append(time.perf_counter())

        def on_log(self, args, state, control, logs=None, **kw):
            self.logs.append(dict(logs or {}))

    n = cfg.pasr.n_refine
    rows = cfg.rollout.queries_per_step * n
    micro = min(cfg.algo.micro_batch_size, rows)
    bf16 = subject["update_dtype"] == "bfloat16"
    with tempfile.TemporaryDirectory() as tmp:
        args = GRPOConfig(
            output_dir=tmp, use_cpu=True, bf16=bf16, seed=0, max_steps=steps, report_to="none", save_strategy="no",
            logging_steps=1, disable_tqdm=True, dataloader_num_workers=0, shuffle_dataset=False,
            per_device_train_batch_size=micro, gradient_accumulation_steps=rows // micro, num_generations=n,
            max_completion_length=cfg.rollout.max_new_tokens, temperature=cfg.rollout.temperature,
            top_p=cfg.rollout.top_p, learning_rate=cfg.algo.lr, beta=cfg.algo.kl_coef, epsilon=cfg.algo.clip_ratio,
            max_grad_norm=cfg.algo.max_grad_norm, lr_scheduler_type="constant", warmup_steps=0,
            model_init_kwargs={"dtype": "float32", "attn_implementation": "sdpa"},  # transformers' own
        )
        clock = Clock()
        trainer = GRPOTrainer(model=subject["policy_dir"], reward_funcs=reward, args=args, train_dataset=data,
                              processing_class=tok, callbacks=[clock])
        trainer.remove_callback(PrinterCallback)  # its log dicts would bury the table
        torch.set_num_threads(subject["threads"])  # what our parts ran on, whatever TRL set up
        trainer.train()
    seconds = [b - a for a, b in zip(clock.marks, clock.marks[1:])]
    lengths = [x["completions/mean_length"] for x in clock.logs if "completions/mean_length" in x]
    import trl

    return {"version": trl.__version__, "step_s": seconds[-1], "steps_s": seconds, "rows": rows,
            "completion_mean_length": lengths[-1] if lengths else None, "bf16": bf16,
            "prompts_same_tokens": f"{same_tokens}/{len(texts)}"}


def trl_available() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("trl") is not None
    except (ImportError, ValueError):  # a broken or blocked install counts as none
        return False


# ---------------------------------------------------------------- report
def git_commit() -> str:
    try:
        root = Path(__file__).resolve().parents[1]
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True).stdout.strip()
        return sha + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def rows_of(parts: list[Part], rates: dict[str, Rates]) -> list[dict]:
    """One row per part, and the PASR step's total after its last part: measured seconds,
    GFLOP (forward and backward), and per measured dtype the floor and measured/floor."""
    step_names = ("generation", "reward", "log-probs", "update")
    step = [p for p in parts if p.name in step_names]

    def row(name, group, dtype, detail):
        r = {"part": name, "measured_s": sum(p.seconds for p in group),
             "optimizer_s": sum(p.optimizer_s or 0.0 for p in group) if any(p.optimizer_s for p in group) else None,
             "gflop": sum(total_flops(p.work) * (3 if p.train else 1) for p in group) / 1e9,
             "dtype": dtype, "detail": detail}
        for d, rate in rates.items():
            floor = sum(floor_seconds(p.work, rate, p.train) for p in group if p.dtype) if any(p.dtype for p in group) else None
            r[f"floor_{d}_s"], r[f"ratio_{d}"] = floor, (r["measured_s"] / floor if floor else None)
        return r

    out = []
    for p in parts:
        out.append(row(p.name, [p], p.dtype or "-", p.detail))
        if p.name == step_names[-1]:
            out.append(row("PASR step", step, "/".join(sorted({q.dtype for q in step if q.dtype})), "the four above"))
    return out


def print_table(rows: list[dict], dtypes: list[str]) -> None:
    def cell(v, spec):
        return "-" if v is None else format(v, spec)

    head = f"{'part':<14}{'ran in':>10}{'measured s':>12}{'GFLOP':>9}"
    head += "".join(f"{f'floor {d} s':>18}{'x floor':>9}" for d in dtypes)
    print(head + "  what")
    for row in rows:
        line = f"{row['part']:<14}{row['dtype']:>10}{row['measured_s']:>12.2f}{row['gflop']:>9.1f}"
        line += "".join(f"{cell(row[f'floor_{d}_s'], '.2f'):>18}{cell(row[f'ratio_{d}'], '.1f'):>9}" for d in dtypes)
        print(line + f"  {row['detail']}")


def print_peer(peer: dict, subject: dict, step_s: float) -> None:
    """TRL's step beside ours, in time and per rollout token (the two write different numbers of
    tokens: PASR also samples plain rollouts, and sampled lengths differ); adds the per-token
    ratio to ``peer``."""
    ours = {"step_s": step_s, "rollouts": subject["step_rollouts"], "rollout_tokens": subject["step_response_tokens"],
            "trained": subject["step_trained_rows"], "trained_tokens": subject["step_trained_tokens"]}
    theirs = {"step_s": peer["step_s"], "rollouts": peer["rows"], "trained": peer["rows"],
              "rollout_tokens": round(peer["rows"] * (peer["completion_mean_length"] or 0))}
    theirs["trained_tokens"] = theirs["rollout_tokens"]  # GRPOTrainer trains every completion
    print(f"{'':<26}{'step s':>9}{'rollouts':>10}{'tokens':>8}{'trained':>9}{'tokens':>8}{'s / 1k rollout tokens':>23}")
    for name, c in (("TRL GRPOTrainer", theirs), ("PASR step (local engine)", ours)):
        per_k = c["step_s"] / c["rollout_tokens"] * 1000 if c["rollout_tokens"] else float("nan")
        print(f"{name:<26}{c['step_s']:>9.2f}{c['rollouts']:>10}{c['rollout_tokens']:>8}{c['trained']:>9}"
              f"{c['trained_tokens']:>8}{per_k:>23.2f}")
    per_token = (step_s / ours["rollout_tokens"]) / (peer["step_s"] / theirs["rollout_tokens"]) if theirs["rollout_tokens"] else None
    print(f"PASR step / TRL step: {step_s / peer['step_s']:.2f}x in time"
          + (f", {per_token:.2f}x per rollout token" if per_token else ""))
    peer.update(rollout_tokens=theirs["rollout_tokens"], pasr_per_rollout_token_ratio=per_token)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: the engine's probe, model.threads=0)")
    parser.add_argument("--dtype", choices=("auto", "float32", "bfloat16"), default="auto",
                        help="rollouts and update autocast: the engine's probe (auto) or forced")
    parser.add_argument("--eval-n", type=int, default=64, help="held-out problems in the evaluation (data.eval_size)")
    parser.add_argument("--trl-steps", type=int, default=2, help="TRL GRPOTrainer steps (the last is timed)")
    parser.add_argument("--no-trl", action="store_true", help="skip the TRL peer")
    parser.add_argument("--note", default="", help="what else ran on the machine (written to --out)")
    parser.add_argument("--out", help="write the table as JSON here (e.g. benchmarks/results/step_floors.json)")
    parser.add_argument("overrides", nargs="*", help="key=value overrides of the local defaults (model.path=...)")
    args = parser.parse_args(argv)

    from benchmarks.training_stages import cpu_info
    from recipe.cpu_dtype import resolve_dtype
    from recipe.local_engine.config import load_config

    dtype = [] if args.dtype == "auto" else [f"model.rollout_dtype={args.dtype}",
                                              f"algo.bf16_autocast={str(args.dtype == 'bfloat16').lower()}"]
    cfg = load_config(overrides=[*SUBJECT, f"model.threads={args.threads}", f"data.eval_size={args.eval_n}", *dtype,
                                 *args.overrides])
    load_before = os.getloadavg()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as work:
        parts, subject = time_parts(cfg, Path(work) / "policy")
        ran = {p.dtype for p in parts if p.dtype}
        dtypes = ["bfloat16", "float32"] if "bfloat16" in ran else ["float32"]
        rates = {d: measure_rates(subject["shapes"], d) for d in dtypes}
        rows = rows_of(parts, rates)
        peer = None
        if args.no_trl:
            peer_note = "skipped (--no-trl)"
        elif not trl_available():
            peer_note = "skipped: trl is not installed (pip install -e .[bench], or pip install trl)"
        else:
            peer = trl_step(cfg, subject, args.trl_steps)
            peer_note = f"trl {peer['version']}"
    load_after = os.getloadavg()

    print(f"\nOne local PASR run's parts beside their floors (FLOPs / this CPU's matmul rate at the same shapes); "
          f"{subject['threads']} torch thread(s), {subject['attention']} attention, rollouts {subject['rollout_dtype']}, "
          f"update {subject['update_dtype']}; load average {load_before[0]:.1f} before, {load_after[0]:.1f} after")
    print_table(rows, dtypes)
    for d, r in rates.items():
        print(f"{d} matmul rate, GFLOP/s by rows: linear "
              + ", ".join(f"{m}: {v / 1e9:.0f}" for m, v in r.forward["linear"].items())
              + "; logits " + ", ".join(f"{m}: {v / 1e9:.0f}" for m, v in r.forward["logits"].items()))
    step_s = next(row["measured_s"] for row in rows if row["part"] == "PASR step")
    print(f"\npeer: TRL GRPOTrainer, {cfg.rollout.queries_per_step} queries x {cfg.pasr.n_refine} completions, "
          f"max {cfg.rollout.max_new_tokens} tokens: {peer_note}")
    if peer:
        print_peer(peer, subject, step_s)
    print(f"({time.perf_counter() - started:.0f} s in all)")

    if args.out:
        result = {
            "cpu": {**cpu_info(), "threads": subject["threads"]},
            "dtype": {"requested": args.dtype, "rollout": subject["rollout_dtype"], "update": subject["update_dtype"],
                      "probe": resolve_dtype(args.dtype).describe()},
            "commit": git_commit(), "overrides": [*SUBJECT, *args.overrides], "eval_n": args.eval_n,
            "load": {"loadavg_before": load_before, "loadavg_after": load_after, "note": args.note},
            "parts": rows,
            "rates_gflops": {d: {"forward": {k: {m: v / 1e9 for m, v in t.items()} for k, t in r.forward.items()},
                                 "backward": {k: {m: v / 1e9 for m, v in t.items()} for k, t in r.backward.items()}}
                             for d, r in rates.items()},
            "peer": {"note": peer_note, **(peer or {}), "pasr_step_s": step_s,
                     "pasr_rollouts": subject["step_rollouts"], "pasr_rollout_tokens": subject["step_response_tokens"],
                     "pasr_trained_rows": subject["step_trained_rows"], "pasr_trained_tokens": subject["step_trained_tokens"]},
        }
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
