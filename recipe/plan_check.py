"""``pasr check``: a dry run of a verl training run, before a cluster's GPUs are held.

    pasr check -- OVERRIDES                                  # the overrides of python3 -m recipe.main_pasr
    pasr check --judge-model Qwen/Qwen2.5-14B-Instruct --judge-gpus 2 -- OVERRIDES   # judge served by the job
    DRY_RUN=1 bash recipe/scripts/run_pasr_qwen2_5_7b.sh    # the run script's own command, checked

It composes the config as ``python3 -m recipe.main_pasr --cfg job`` does (same yaml files, read
from the installed verl's folder without importing verl, which imports torch: seconds instead of
most of a minute) and runs the config checks of the run's own preflight; reads the first rows of
each data file through the loaders (:func:`data.loaders.load_file`) and checks the columns verl's
dataset and the PASR rollout read; pings an LLM judge (one request, a short timeout: a judge that
does not answer is one FAIL line, not a crash); checks the GPU and batch arithmetic verl asserts
only after start-up (:func:`batch_problems`) and that the checkpoint and dump folders can be
written; and prints the plan: GPUs per role, rollouts and tokens per step, steps, and an estimate
of the step time scaled from the last measured GPU step (:func:`step_estimate`). Every problem is
one ``FAIL`` line; the exit status is 2 when there is one, else 0. Nothing here needs a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from data.cli_errors import CliError

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
TRAIN_COMMAND = ("-m", "recipe.main_pasr")
PLACEHOLDER_JUDGE_URL = "http://judge-node:8000/v1"  # `pasr judge serve` fills in the real one at run time
BF16_PEAK_TFLOPS = {"H100": 989.0, "H200": 989.0, "H800": 989.0, "A100": 312.0, "A800": 312.0, "L40S": 362.0}
# benchmarks/gpu_check.py trains the embedded SmolLM2-135M (its measured steps are that model's)
MEASURED_MODEL = ("SmolLM2-135M", 135e6)


# --------------------------------------------------------------------------- the report
@dataclass
class Report:
    lines: list[tuple[str, str, str]] = field(default_factory=list)  # (status, topic, text)
    plan: list[tuple[str, str]] = field(default_factory=list)

    def ok(self, topic: str, text: str) -> None:
        self.lines.append(("ok", topic, text))

    def fail(self, topic: str, text: str) -> None:
        self.lines.append(("FAIL", topic, text))

    def note(self, topic: str, text: str) -> None:
        self.lines.append(("note", topic, text))

    @property
    def problems(self) -> int:
        return sum(status == "FAIL" for status, _, _ in self.lines)

    def render(self) -> str:
        out = [f"  {status:<5} {topic:<9} {text}" for status, topic, text in self.lines]
        if self.plan:
            out.append("plan:")
            out += [f"  {key:<16} {text}" for key, text in self.plan]
        n = self.problems
        out.append(
            f"pasr check: {n} problem(s): fix the FAIL line(s) before GPUs are held"
            if n
            else "pasr check: no problem found"
        )
        return "\n".join(out)


# --------------------------------------------------------------------------- config
def verl_config_dir() -> Path:
    """The installed verl's ``trainer/config`` folder, found without importing verl."""
    import importlib.util

    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        raise CliError("verl is not installed: pip install -e . installs verl==0.9.1")
    return Path(list(spec.submodule_search_locations)[0]) / "trainer" / "config"


def compose(overrides: list[str]):
    """The config ``python3 -m recipe.main_pasr OVERRIDES`` runs: ``pasr_trainer.yaml`` over
    verl's ``ppo_trainer``, with verl's folder on the search path as a file path instead of
    ``pkg://verl.trainer.config`` (the same files; the package import costs torch's)."""
    from recipe.verl_engine.config import compose_config

    return compose_config([*overrides, f"hydra.searchpath=[file://{verl_config_dir()}]"])


def strip_command(args: list[str]) -> list[str]:
    """The overrides of ``[python3 -m recipe.main_pasr] OVERRIDES`` (the run scripts pass the
    whole training command)."""
    if len(args) >= 3 and Path(args[0]).name.startswith("python") and tuple(args[1:3]) == TRAIN_COMMAND:
        return args[3:]
    return args


def _select(config, key: str, default=None):
    from omegaconf import OmegaConf

    return OmegaConf.select(config, key, default=default)


# --------------------------------------------------------------------------- sizes
_SIZE = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s*([BbMm])(?![A-Za-z])")


def model_params(path: str) -> tuple[float | None, str]:
    """Parameters of a model and where the figure comes from: its ``config.json`` when the path
    is a local folder (embeddings, attention with its key/value heads, gated MLP), else the size
    in its name (``Qwen2.5-7B-Instruct`` -> 7e9)."""
    config = Path(os.path.expanduser(str(path))) / "config.json"
    if config.is_file():
        try:
            c = json.loads(config.read_text())
            h, layers, vocab = int(c["hidden_size"]), int(c["num_hidden_layers"]), int(c["vocab_size"])
            inter = int(c.get("intermediate_size", 4 * h))
            heads = int(c.get("num_attention_heads", 1))
            kv = int(c.get("num_key_value_heads", heads)) * (h // heads)
            per_layer = 2 * h * h + 2 * h * kv + 3 * h * inter
            embed = vocab * h * (1 if c.get("tie_word_embeddings") else 2)
            return float(layers * per_layer + embed), "its config.json"
        except (ValueError, KeyError, ZeroDivisionError, TypeError):
            pass
    sizes = _SIZE.findall(Path(str(path)).name)
    if not sizes:
        return None, "unknown (no config.json here, no size in the name)"
    number, unit = sizes[-1]
    return float(number) * (1e9 if unit.lower() == "b" else 1e6), "its name"


def _human(params: float) -> str:
    return f"{params / 1e9:.1f}B" if params >= 1e9 else f"{params / 1e6:.0f}M"


# --------------------------------------------------------------------------- checks
def _data_files(config, key: str) -> list[str]:
    value = _select(config, key)
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


def check_data(config, report: Report, rows: int) -> int | None:
    """Each of ``data.train_files`` / ``data.val_files``: there, a verl RL parquet, its first rows
    read through the loaders. The training rows (None when unknown)."""
    from data.examples import DatasetError
    from data.loaders import load_file
    from data.verl_parquet import parquet_rows, rl_file_problem

    prompt_key = str(_select(config, "data.prompt_key", "prompt"))
    train_rows: int | None = 0
    for key in ("data.train_files", "data.val_files"):
        for name in _data_files(config, key):
            path = Path(os.path.expanduser(name))
            if not path.is_file():
                split = "train" if key == "data.train_files" else "test"
                report.fail(
                    "data",
                    f"{key}={name}: no such file here; `pasr data prepare --dataset NAME_OR_FILE --split {split} "
                    "--out DIR` writes DIR/<name>_" + split + ".parquet (or run pasr check where the file is)",
                )
                train_rows = None if key == "data.train_files" else train_rows
                continue
            if path.suffix.lower() != ".parquet":
                report.fail(
                    "data",
                    f"{key}={name}: verl reads parquet; write one with `pasr data prepare --dataset {name} --out DIR`",
                )
                train_rows = None if key == "data.train_files" else train_rows
                continue
            why = rl_file_problem(path, prompt_key, rows)
            if why is None:
                try:
                    first = load_file(path, limit=rows)
                except DatasetError as exc:
                    why = str(exc)
            if why:
                report.fail("data", f"{key}={name}: {why}")
                train_rows = None if key == "data.train_files" else train_rows
                continue
            n = parquet_rows(path)
            if key == "data.train_files" and train_rows is not None:
                train_rows += n
            sample = first[0] if first else None
            shown = f'; row 1: "{_short(sample.question, 60)}" -> gold {_short(sample.answer, 30)}' if sample else ""
            report.ok("data", f"{key}={name}: {n} rows, read through the loaders{shown}")
    return train_rows or None


def _short(text: str, width: int) -> str:
    one = " ".join(str(text).split())
    return one if len(one) <= width else one[: width - 3] + "..."


def check_judge(
    config, cfg, report: Report, served_gpus: int, ping_timeout_s: float, gpu_memory_gb: float, data_golds: list[str]
) -> None:
    """The judge: where it runs, an LLM judge pinged (or, served by the job, sized), and what
    ``hybrid`` sends to it."""
    kind = cfg.judge.kind
    if kind not in ("openai", "hybrid"):
        if served_gpus:
            report.fail(
                "judge",
                f"a judge is served on {served_gpus} GPU(s) but pasr.judge.kind={kind} never asks it: "
                "set pasr.judge.kind=openai (or drop --judge-gpus and train on those GPUs)",
            )
        else:
            report.ok("judge", f"pasr.judge.kind={kind}: scored in the trainer's process, no GPU")
        return
    if served_gpus:
        params, source = model_params(cfg.judge.model)
        if params is None:
            report.note(
                "judge",
                f"{cfg.judge.model} on {served_gpus} GPU(s), served by the job (pasr judge serve); "
                f"its size is {source}",
            )
        else:
            weights = params * 2 / 1e9
            per_gpu = weights / served_gpus
            line = (
                f"{cfg.judge.model} ({_human(params)} from {source}): {weights:.0f} GB of bf16 weights, "
                f"{per_gpu:.0f} GB a GPU at tensor parallel {served_gpus}, "
                "served by the job (pasr judge serve; not pinged: it starts with the job)"
            )
            if per_gpu > 0.75 * 0.9 * gpu_memory_gb:  # vLLM takes 90% of a GPU; keep a quarter of it for the KV cache
                report.fail(
                    "judge",
                    line + f"; leaves less than a quarter of 90% of a {gpu_memory_gb:.0f} GB GPU for the KV cache: "
                    "more --judge-gpus",
                )
            else:
                report.ok("judge", line)
    else:
        from dataclasses import replace

        from recipe.verl_engine.config import check_judge_endpoint

        # the run's own ping (one request), with a short timeout and no retry: a dry run answers in seconds
        quick = replace(cfg, judge=replace(cfg.judge, timeout_s=min(cfg.judge.timeout_s, ping_timeout_s), retries=0))
        why = check_judge_endpoint(quick)
        if why:
            report.fail("judge", why)
        else:
            report.ok("judge", f"{cfg.judge.base_url} answers and serves {cfg.judge.model}")
    if kind == "hybrid" and data_golds:
        from rewards.judges.hybrid import gold_is_math

        to_llm = sum(not gold_is_math(g) for g in data_golds)
        report.note(
            "judge",
            f"hybrid: {to_llm} of the first {len(data_golds)} training golds go to the LLM judge, the others to "
            "Math-Verify (math golds); pasr.judge.kind=openai asks the LLM judge for every rollout",
        )


def batch_problems(config) -> list[str]:
    """The GPU and batch arithmetic verl asserts only once its workers are up, one line each.

    * ``rollout.tensor_model_parallel_size`` divides ``trainer.n_gpus_per_node`` (a vLLM replica
      sits on one node);
    * a step's ``data.train_batch_size x rollout.n`` trained rows split evenly over the training
      GPUs (``trainer.balance_batch`` partitions them into equal parts, one a GPU; without it the
      dispatch chunks them the same way);
    * they make whole mini-batches of ``ppo_mini_batch_size x rollout.n`` rows, and a mini-batch
      splits evenly over the data-parallel ranks (verl's engine worker asserts it);
    * a micro-batch holds a whole sequence: with ``use_dynamic_bsz`` each ``*_max_token_len_per_gpu``
      is at least ``max_prompt_length + max_response_length``, without it the mini-batch a GPU
      gets is a whole number of ``ppo_micro_batch_size_per_gpu``."""
    problems = []
    nnodes, per_node = int(_select(config, "trainer.nnodes", 1)), int(_select(config, "trainer.n_gpus_per_node", 1))
    gpus = nnodes * per_node
    tp = int(_select(config, "actor_rollout_ref.rollout.tensor_model_parallel_size", 1) or 1)
    if per_node % tp:
        problems.append(
            f"actor_rollout_ref.rollout.tensor_model_parallel_size={tp} "
            f"does not divide trainer.n_gpus_per_node={per_node}: "
            "a vLLM replica holds tp GPUs of one node"
        )
    bsz = int(_select(config, "data.train_batch_size"))
    n = int(_select(config, "actor_rollout_ref.rollout.n", 1))
    mini = int(_select(config, "actor_rollout_ref.actor.ppo_mini_batch_size"))
    sp = int(_select(config, "actor_rollout_ref.actor.ulysses_sequence_parallel_size", 1) or 1)
    dp = max(1, gpus // sp)
    rows = bsz * n
    if rows % gpus:
        problems.append(
            f"data.train_batch_size={bsz} x rollout.n={n} = {rows} trained rows a step do not split evenly over the "
            f"{gpus} training GPU(s) (trainer.nnodes={nnodes} x trainer.n_gpus_per_node={per_node}): "
            f"verl gives every GPU the same number of rows; use a train_batch_size whose x{n} is a multiple of {gpus}"
            + _nearest(bsz, lambda b: (b * n) % gpus == 0)
        )
    if mini > bsz or bsz % mini:
        problems.append(
            f"data.train_batch_size={bsz} is not a whole number of actor.ppo_mini_batch_size={mini} "
            f"(a step updates in mini-batches of {mini} x {n} rows)"
        )
    elif (mini * n) % dp:
        problems.append(
            f"actor.ppo_mini_batch_size={mini} x rollout.n={n} = {mini * n} rows a mini-batch do not split over {dp} "
            f"data-parallel rank(s): verl asserts it; use a mini-batch whose x{n} is a multiple of {dp}"
            + _nearest(mini, lambda m: (m * n) % dp == 0 and bsz % m == 0)
        )
    seq = int(_select(config, "data.max_prompt_length", 0)) + int(_select(config, "data.max_response_length", 0))
    if _select(config, "actor_rollout_ref.actor.use_dynamic_bsz", False):
        for key in (
            "actor_rollout_ref.actor.ppo_max_token_len_per_gpu",
            "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu",
            "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu",
        ):
            limit = _select(config, key)
            if limit is not None and int(limit) < seq:
                problems.append(
                    f"{key}={limit} is less than a whole sequence (max_prompt_length + max_response_length = {seq})"
                )
    else:
        micro = _select(config, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu")
        if micro is None:
            problems.append(
                "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu is unset and use_dynamic_bsz=false: set one"
            )
        elif (mini * n // dp) % int(micro):
            problems.append(
                f"a GPU's share of a mini-batch ({mini} x {n} / {dp} = {mini * n // dp} rows) is not a whole number of "
                f"ppo_micro_batch_size_per_gpu={micro}"
            )
    return problems


def _nearest(value: int, fits) -> str:
    below = next((v for v in range(value, 0, -1) if fits(v)), None)
    above = next((v for v in range(value, 8 * value + 2) if fits(v)), None)
    found = [str(v) for v in dict.fromkeys([below, above]) if v]
    return f" (e.g. {' or '.join(found)})" if found else ""


def check_dirs(config, engine, report: Report) -> None:
    """The checkpoint and dump folders: absolute (a job's relative folder is lost with it) and
    writable here (the nearest folder that exists), nothing created."""
    from recipe.verl_engine.config import REMOTE_PREFIXES

    dirs = {"trainer.default_local_dir": _select(config, "trainer.default_local_dir")}
    if engine.rollout_dir:
        dirs["pasr_verl.rollout_dir"] = engine.rollout_dir
    for key, value in dirs.items():
        if value is None:
            continue
        text = str(value)
        if text.startswith(REMOTE_PREFIXES):
            report.note("dirs", f"{key}={text}: remote storage, not checked")
            continue
        path = Path(os.path.expanduser(text))
        existing = next((p for p in [path, *path.parents] if p.exists()), None)
        if existing is None or not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
            report.fail("dirs", f"{key}={text}: cannot be written here ({existing} is not a writable folder)")
            continue
        where = "exists" if existing == path else f"will be made in {existing}"
        relative = (
            ""
            if path.is_absolute()
            else "; relative: pasr submit refuses it (a job's copy of the repository is temporary)"
        )
        report.ok("dirs", f"{key}={text}: writable ({where}){relative}")


# --------------------------------------------------------------------------- the plan
def measured_step(results: Path = RESULTS) -> dict | None:
    """The last verl step measured on a GPU: ``gpu_check.json`` (what benchmarks/gpu_check.py
    writes last), else the newest dated ``gpu_check_*.json`` with step timings; its settings."""
    dated = sorted((p for p in results.glob("gpu_check_*.json")), reverse=True)
    for path in [results / "gpu_check.json", *dated]:
        try:
            data = json.loads(path.read_text())
            parts = data["timings"]["mean_step"]
            settings = dict(o.split("=", 1) for o in data["settings"]["verl_overrides"] if "=" in o)
            return {
                "file": path.name,
                "device": str(data.get("device", "")).split(",")[0],
                "parts": {k: float(parts[k]) for k in ("gen", "old_log_prob", "ref", "update_actor")},
                "step": float(parts["step"]),
                "steps_averaged": int(data["timings"].get("n_steps_averaged", 0)),
                "bsz": int(settings["data.train_batch_size"]),
                "n_refine": int(settings["pasr.n_refine"]),
                "n_plain": int(settings["pasr.n_plain"]),
                "seq": int(settings["data.max_prompt_length"]) + int(settings["data.max_response_length"]),
                "response": int(settings["data.max_response_length"]),
                "gpus": int(settings.get("trainer.n_gpus_per_node", 1)) * int(settings.get("trainer.nnodes", 1)),
            }
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return None


def _peak_tflops(device: str) -> float | None:
    return next((v for k, v in BF16_PEAK_TFLOPS.items() if k in device), None)


def step_estimate(
    params: float, gpus: int, bsz: int, n_refine: int, n_plain: int, seq: int, response: int, measured: dict
) -> tuple[float, float | None, float | None]:
    """(estimate, floor, the measured step's share of the GPU's bf16 peak), in seconds.

    The estimate scales each measured part linearly: generation by parameters x generated
    tokens (``bsz x (n_refine + n_plain) x max_response_length``), the log-prob passes and the
    update by parameters x trained tokens (``bsz x n_refine x (prompt + response)``), both divided
    by the GPUs. The measured step is a 135M model's, far from the GPU's compute limit, so this
    overstates a large model's step; the floor is the step's FLOPs (2 per parameter and token
    for generation and each log-prob pass, 6 for the update) at the bf16 peak of every GPU."""
    m = measured
    p_ratio = params / MEASURED_MODEL[1]
    gen_ratio = (bsz * (n_refine + n_plain) * response) / (m["bsz"] * (m["n_refine"] + m["n_plain"]) * m["response"])
    train_ratio = (bsz * n_refine * seq) / (m["bsz"] * m["n_refine"] * m["seq"])
    gpu_ratio = gpus / m["gpus"]
    parts = m["parts"]
    estimate = (
        (parts["gen"] * gen_ratio + (parts["old_log_prob"] + parts["ref"] + parts["update_actor"]) * train_ratio)
        * p_ratio
        / gpu_ratio
    )
    peak = _peak_tflops(m["device"])
    if peak is None:
        return estimate, None, None

    def flops(p: float, b: int, nr: int, npl: int, s: int, r: int) -> float:
        return 2 * p * b * (nr + npl) * r + (2 + 2 + 6) * p * b * nr * s

    floor = flops(params, bsz, n_refine, n_plain, seq, response) / (gpus * peak * 1e12)
    measured_share = flops(MEASURED_MODEL[1], m["bsz"], m["n_refine"], m["n_plain"], m["seq"], m["response"]) / (
        m["step"] * m["gpus"] * peak * 1e12
    )
    return estimate, floor, measured_share


def plan_lines(config, cfg, report: Report, judge_gpus: int, train_rows: int | None) -> None:
    method = str(_select(config, "method", "pasr"))
    nnodes, per_node = int(_select(config, "trainer.nnodes", 1)), int(_select(config, "trainer.n_gpus_per_node", 1))
    gpus = nnodes * per_node
    tp = int(_select(config, "actor_rollout_ref.rollout.tensor_model_parallel_size", 1) or 1)
    model = str(_select(config, "actor_rollout_ref.model.path"))
    params, source = model_params(model)
    bsz = int(_select(config, "data.train_batch_size"))
    n = int(_select(config, "actor_rollout_ref.rollout.n", 1))
    prompt, response = int(_select(config, "data.max_prompt_length")), int(_select(config, "data.max_response_length"))
    ref_offload = bool(_select(config, "actor_rollout_ref.ref.fsdp_config.param_offload", False))
    judge = f" + {judge_gpus} judge (vLLM, tensor parallel {judge_gpus}, on one node)" if judge_gpus else ""
    report.plan.append(("GPUs", f"{gpus + judge_gpus} = {gpus} training ({nnodes} node(s) x {per_node}){judge}"))
    report.plan.append(
        (
            "roles",
            f"the {gpus} training GPUs hold, in turn, the FSDP actor, the reference model"
            f"{' (offloaded to CPU between uses)' if ref_offload else ''} and vLLM's rollout "
            f"({gpus // tp} replica(s) of tensor parallel {tp})",
        )
    )
    if params is not None:
        report.plan.append(("policy", f"{model}: {_human(params)} parameters (from {source})"))
    if method == "rrr":
        report.plan.append(
            (
                "rollouts a step",
                f"{bsz} first attempts, then up to {n} reflections and {n} retries per failed one "
                f"(up to {bsz * (1 + 2 * n)}); {bsz * n} rows trained",
            )
        )
        generated, trained = bsz * (1 + 2 * n), bsz * n
    else:
        plain = int(cfg.n_plain)
        generated, trained = bsz * (n + plain), bsz * n
        report.plan.append(
            (
                "rollouts a step",
                f"{generated} = {bsz} prompts x ({n} refine + {plain} plain); {trained} refine rows trained",
            )
        )
    report.plan.append(
        (
            "tokens a step",
            f"<= {generated * response:,} generated ({response} a response), <= {trained * (prompt + response):,} "
            f"through log-probs and the update ({prompt} + {response} a row)",
        )
    )
    if cfg.judge.kind in ("openai", "hybrid"):
        asked = "every rollout" if cfg.judge.kind == "openai" else "the rollouts whose gold is not math (hybrid)"
        report.plan.append(
            (
                "judge requests",
                f"<= {generated} a step, {asked}, after generation; each <= {prompt + response:,} "
                f"tokens of question and answer plus the judge prompt (identical answers cached)",
            )
        )
    total = _select(config, "trainer.total_training_steps")
    epochs = int(_select(config, "trainer.total_epochs", 1))
    if train_rows:
        per_epoch = train_rows // bsz
        steps = int(total) if total else per_epoch * epochs
        report.plan.append(
            (
                "steps",
                f"{steps} ({per_epoch} a epoch: {train_rows} rows / {bsz}, x {epochs} epoch(s)"
                + (f", capped by trainer.total_training_steps={total})" if total else ")"),
            )
        )
    measured = measured_step()
    if params is None or measured is None or method == "rrr":
        why = (
            "no model size"
            if params is None
            else "no measured GPU step in benchmarks/results"
            if measured is None
            else "no RRR step measured"
        )
        report.plan.append(("step time", f"no estimate ({why})"))
        return
    estimate, floor, share = step_estimate(
        params, gpus, bsz, n, int(cfg.n_plain), prompt + response, response, measured
    )
    m = measured
    report.plan.append(
        (
            "step time",
            f"~{_seconds(estimate)} a step: an ESTIMATE, not a measurement: "
            f"{m['file']}'s mean step ({m['step']:.1f} s, "
            f"{MEASURED_MODEL[0]} on {m['gpus']} {m['device']}, "
            f"{m['bsz']} prompts x ({m['n_refine']} + {m['n_plain']}) rollouts "
            f"of <= {m['response']} tokens, {m['steps_averaged']} step(s) averaged) scaled by parameters "
            f"(x{params / MEASURED_MODEL[1]:.0f}), tokens and GPUs ({m['gpus']} -> {gpus})",
        )
    )
    if floor is not None:
        report.plan.append(
            (
                "",
                f"an upper bound: the measured step used {100 * share:.1f}% of the GPU's bf16 peak "
                f"(a small model is bound by overheads, a {_human(params)} one much less so); "
                f"no step is faster than ~{_seconds(floor)} (its FLOPs at the "
                f"bf16 peak of {gpus} {m['device'].split()[-1] if m['device'] else 'GPU'}s)",
            )
        )


def _seconds(s: float) -> str:
    if s >= 3600:
        return f"{s / 3600:.1f} h"
    if s >= 120:
        return f"{s / 60:.0f} min"
    return f"{s:.0f} s"


# --------------------------------------------------------------------------- entry
def check(
    overrides: list[str],
    *,
    judge_gpus: int = 0,
    judge_model: str | None = None,
    node_gpus: int = 8,
    rows: int = 3,
    ping_timeout_s: float = 5.0,
    gpu_memory_gb: float = 80.0,
) -> Report:
    """The whole check of the run ``python3 -m recipe.main_pasr OVERRIDES`` (served judge: as
    ``pasr judge serve --judge-gpus N --judge-model M -- ...`` runs it, on nodes of ``node_gpus``)."""
    from hydra.errors import HydraException
    from omegaconf import OmegaConf, open_dict
    from omegaconf.errors import OmegaConfBaseException

    from recipe.pasr_config import ConfigError
    from recipe.verl_engine.config import PreflightError, engine_config, pasr_config, preflight

    report = Report()
    overrides = strip_command(list(overrides))
    if judge_gpus:
        from recipe.judge_server import ServedJudge, judge_overrides, training_gpus_problem

        if not judge_model:
            raise CliError("--judge-gpus needs --judge-model NAME (the judge the job serves)")
        why = training_gpus_problem(overrides, judge_gpus, node_gpus)
        if why:
            report.fail("GPUs", why + f" (--node-gpus {node_gpus})")
        placeholder = ServedJudge(judge_model, judge_gpus, PLACEHOLDER_JUDGE_URL, "", node_gpus, [], "")
        try:
            overrides = [*overrides, *judge_overrides(overrides, placeholder)]
        except CliError as exc:
            report.fail("judge", str(exc))
    try:
        config = compose(overrides)
        cfg = pasr_config(config)
        engine = engine_config(config)
        unchecked = OmegaConf.create(OmegaConf.to_container(config, resolve=False))
        with open_dict(unchecked):
            unchecked.pasr_verl.check_resources = False  # the GPUs are planned here, not present
            unchecked.pasr_verl.check_judge = False  # pinged below, with a short timeout
        preflight(unchecked, find_module=lambda name: True)
    except (HydraException, OmegaConfBaseException, ConfigError, PreflightError) as exc:
        report.fail("config", str(exc).strip().splitlines()[0])
        return report
    report.ok(
        "config",
        "composed as `python3 -m recipe.main_pasr --cfg job` composes it; method, pasr.*, rrr.*, pasr_verl.* valid",
    )
    per_node = int(_select(config, "trainer.n_gpus_per_node", 1))
    if not judge_gpus and per_node > node_gpus:
        report.fail("GPUs", f"trainer.n_gpus_per_node={per_node} but a node has {node_gpus} GPU(s) (--node-gpus)")
    train_rows = check_data(config, report, rows)
    bsz = int(_select(config, "data.train_batch_size"))
    if train_rows is not None and train_rows < bsz:
        report.fail(
            "data",
            f"data.train_files hold {train_rows} rows, fewer than data.train_batch_size={bsz}: verl's loader "
            "drops a partial batch, so there is no step to train",
        )
    golds = _first_golds(config, rows) if cfg.judge.kind == "hybrid" else []
    check_judge(config, cfg, report, judge_gpus, ping_timeout_s, gpu_memory_gb, golds)
    problems = batch_problems(config)
    for line in problems:
        report.fail("batch", line)
    if not problems:
        report.ok(
            "batch",
            "GPU and batch arithmetic: rows split over the GPUs, whole mini-batches, micro-batches hold a sequence",
        )
    check_dirs(config, engine, report)
    plan_lines(config, cfg, report, judge_gpus, train_rows)
    return report


def _first_golds(config, rows: int) -> list[str]:
    from data.examples import DatasetError
    from data.loaders import load_file

    golds = []
    for name in _data_files(config, "data.train_files"):
        try:
            golds += [e.answer for e in load_file(os.path.expanduser(name), limit=max(rows, 20))]
        except (DatasetError, OSError):
            pass
    return golds


def build_parser(parser: argparse.ArgumentParser) -> None:
    parser.usage = (
        "pasr check [--judge-model NAME --judge-gpus N] [options] -- [python3 -m recipe.main_pasr] OVERRIDES..."
    )
    parser.add_argument(
        "--judge-model", metavar="NAME", help="the judge the job serves with pasr judge serve (with --judge-gpus)"
    )
    parser.add_argument(
        "--judge-gpus",
        type=int,
        default=0,
        metavar="N",
        help="GPUs the job's judge takes (pasr judge serve --judge-gpus)",
    )
    parser.add_argument(
        "--node-gpus", type=int, default=8, metavar="N", help="GPUs a node of the cluster has (default 8)"
    )
    parser.add_argument("--rows", type=int, default=3, metavar="N", help="rows read from each data file (default 3)")
    parser.add_argument(
        "--ping-timeout", type=float, default=5.0, metavar="SECONDS", help="how long the judge ping waits (default 5)"
    )
    parser.add_argument(
        "--gpu-memory-gb",
        type=float,
        default=80.0,
        metavar="GB",
        help="memory of a GPU, for the judge's size (default 80)",
    )
    parser.add_argument(
        "overrides", nargs=argparse.REMAINDER, help="after --: the Hydra overrides of the run (or its whole command)"
    )


def run(args) -> int:
    overrides = list(args.overrides or [])
    if overrides and overrides[0] == "--":
        overrides = overrides[1:]
    report = check(
        overrides,
        judge_gpus=args.judge_gpus,
        judge_model=args.judge_model,
        node_gpus=args.node_gpus,
        rows=args.rows,
        ping_timeout_s=args.ping_timeout,
        gpu_memory_gb=args.gpu_memory_gb,
    )
    print(report.render(), flush=True)
    return 2 if report.problems else 0
