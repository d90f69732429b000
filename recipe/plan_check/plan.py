"""The plan ``pasr check`` prints: GPUs by role (and those idle), memory a GPU, rollouts, tokens
and judge requests a step, steps, checkpoints (:mod:`recipe.plan_check.checkpoints`), and an
estimate of the step time scaled from the last measured GPU step (:func:`step_estimate`)."""

from __future__ import annotations

import json
from pathlib import Path

from recipe.plan_check.checkpoints import checkpoint_lines
from recipe.plan_check.compose import select
from recipe.plan_check.layout import Layout, gpu_lines, memory_line
from recipe.plan_check.model import ModelShape, human
from recipe.plan_check.report import Report, seconds

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benchmarks" / "results"
BF16_PEAK_TFLOPS = {"H100": 989.0, "H200": 989.0, "H800": 989.0, "A100": 312.0, "A800": 312.0, "L40S": 362.0}
# benchmarks/gpu_check.py trains the embedded SmolLM2-135M (its measured steps are that model's)
MEASURED_MODEL = ("SmolLM2-135M", 135e6)


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
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
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


def plan_lines(
    config,
    cfg,
    report: Report,
    layout: Layout,
    shape: ModelShape,
    train_rows: int | None,
    *,
    judge_gpus: int = 0,
    node_gpus: int = 8,
    fits: bool = True,
    gpu_memory_gb: float = 80.0,
) -> None:
    """The plan of a run whose numbers are whole (``layout``); ``fits``: its GPUs fit the nodes."""
    method = str(select(config, "method", "pasr"))
    gpus, tp = layout.gpus, layout.tp
    model = str(select(config, "actor_rollout_ref.model.path"))
    bsz, n, prompt, response = layout.bsz, layout.n, layout.prompt, layout.response
    ref_offload = bool(select(config, "actor_rollout_ref.ref.fsdp_config.param_offload", False))
    gpu_lines(report, layout, node_gpus, judge_gpus, fits)
    if not fits:  # every figure below would be of GPUs the nodes do not have
        report.plan.append(("", "the rest of the plan waits for a layout that fits the nodes"))
        return
    report.plan.append(
        (
            "roles",
            f"the {gpus} training GPUs hold, in turn, the FSDP actor, the reference model"
            f"{' (offloaded to CPU between uses)' if ref_offload else ''} and vLLM's rollout "
            f"({gpus // tp} replica(s) of tensor parallel {tp})",
        )
    )
    params = shape.params
    if params is not None:
        active = f", {human(shape.active)} active a token (mixture of experts)" if shape.active else ""
        report.plan.append(("policy", f"{model}: {human(params)} parameters{active} (from {shape.source})"))
    else:
        report.plan.append(("policy", f"{model}: size {shape.source}"))
    report.plan.append(("memory a GPU", memory_line(layout, shape, gpu_memory_gb)))
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
    total = layout["trainer.total_training_steps"]
    epochs = layout.epochs
    if train_rows:
        per_epoch = train_rows // bsz
        steps = total if total else per_epoch * epochs
        report.plan.append(
            (
                "steps",
                f"{steps} ({per_epoch} a epoch: {train_rows} rows / {bsz}, x {epochs} epoch(s)"
                + (f", capped by trainer.total_training_steps={total})" if total else ")"),
            )
        )
    checkpoint_lines(config, report, layout, shape, train_rows)
    measured = measured_step()
    compute = shape.compute_params
    if compute is None or measured is None or method == "rrr":
        why = (
            "no model size"
            if compute is None
            else "no measured GPU step in benchmarks/results"
            if measured is None
            else "no RRR step measured"
        )
        report.plan.append(("step time", f"no estimate ({why})"))
        return
    estimate, floor, share = step_estimate(
        compute, gpus, bsz, n, int(cfg.n_plain), prompt + response, response, measured
    )
    m = measured
    report.plan.append(
        (
            "step time",
            f"~{seconds(estimate)} a step: an ESTIMATE, not a measurement: "
            f"{m['file']}'s mean step ({m['step']:.1f} s, "
            f"{MEASURED_MODEL[0]} on {m['gpus']} {m['device']}, "
            f"{m['bsz']} prompts x ({m['n_refine']} + {m['n_plain']}) rollouts "
            f"of <= {m['response']} tokens, {m['steps_averaged']} step(s) averaged) scaled by parameters "
            f"(x{compute / MEASURED_MODEL[1]:.0f}), tokens and GPUs ({m['gpus']} -> {gpus})",
        )
    )
    if floor is not None:
        report.plan.append(
            (
                "",
                f"an upper bound: the measured step used {100 * share:.1f}% of the GPU's bf16 peak "
                f"(a small model is bound by overheads, a {human(compute)} one much less so); "
                f"no step is faster than ~{seconds(floor)} (its FLOPs at the "
                f"bf16 peak of {gpus} {m['device'].split()[-1] if m['device'] else 'GPU'}s)",
            )
        )
