"""The judge of a planned run: where it runs, an LLM judge pinged (or, served by the job, sized
and its heads split over its GPUs), what ``hybrid`` sends to it, and ``pasr.zeta`` against the
scores it writes."""

from __future__ import annotations

from recipe.plan_check.model import heads_problem, heads_that_fit, human, model_shape
from recipe.plan_check.report import Report

PLACEHOLDER_JUDGE_URL = "http://judge-node:8000/v1"  # `pasr judge serve` fills in the real one at run time
CONTINUOUS_ZETA = 0.05  # docs/judges_and_data.md: the tie band for a judge that grades 0.8, 0.85, 0.9
BINARY_PROMPT, CONTINUOUS_PROMPT = "judge_binary", "judge_continuous"


def zeta_finding(cfg) -> tuple[str, str] | None:
    """``(status, text)`` about ``pasr.zeta`` for an LLM judge, or None (a rule or countdown
    judge scores exactly 0 or 1: the default band only absorbs float error).

    A continuous judge (``judge_continuous``, the default prompt) moves by 0.05-0.1 between
    answers of the same quality; the refine reward compares a refine rollout's score with the
    plain ones' mean, and a difference below half that step is within the judge's resolution:
    a band under 0.025 pays +1/-1 for noise (a FAIL), one above 0.1 turns real gains into ties
    (a note). A judge prompt of the user's own is unknown: a note says what to set."""
    if cfg.judge.kind not in ("openai", "hybrid"):
        return None
    zeta, prompt = float(cfg.zeta), str(cfg.prompts.judge)
    if prompt == BINARY_PROMPT:
        return None
    if prompt != CONTINUOUS_PROMPT:
        return (
            "note",
            f"pasr.prompts.judge={prompt}: if its scores are graded (not only 0 and 1) set pasr.zeta={CONTINUOUS_ZETA} "
            f"(now {zeta:g}; docs/judges_and_data.md)",
        )
    if zeta < CONTINUOUS_ZETA / 2:
        return (
            "FAIL",
            f"pasr.zeta={zeta:g} with a continuous LLM judge (pasr.judge.kind={cfg.judge.kind}, "
            f"pasr.prompts.judge={prompt}): its scores move by 0.05-0.1 on answers of the same quality, so the refine "
            f"reward would pay +1/-1 for the judge's noise; set pasr.zeta={CONTINUOUS_ZETA} (docs/judges_and_data.md), "
            f"or pasr.prompts.judge={BINARY_PROMPT} for 0/1 scores",
        )
    if zeta > 2 * CONTINUOUS_ZETA:
        return (
            "note",
            f"pasr.zeta={zeta:g} is wider than a continuous judge's step (0.05-0.1): real improvements become ties "
            f"(pasr.tie_value); {CONTINUOUS_ZETA} is the docs' band",
        )
    return ("ok", f"pasr.zeta={zeta:g}: a tie band for the continuous judge's scores")


def check_served_judge(report: Report, model: str, gpus: int, node_gpus: int, gpu_memory_gb: float) -> None:
    """A judge the job serves (``pasr judge serve``): its heads split over its ``gpus`` (vLLM's
    tensor parallel size) and its weights leave room for a KV cache."""
    shape = model_shape(model)
    if shape.heads is None:
        report.note(
            "judge",
            f"{model}: attention heads unknown (no local config.json): "
            f"vLLM needs them divisible by --judge-gpus {gpus}",
        )
    elif why := heads_problem(shape, gpus):
        fit = ", ".join(str(t) for t in heads_that_fit(shape, node_gpus))
        report.fail("judge", f"--judge-gpus {gpus}: {model}: {why} (vLLM refuses it); GPU counts that split: {fit}")
    if shape.params is None:
        report.note(
            "judge", f"{model} on {gpus} GPU(s), served by the job (pasr judge serve); its size is {shape.source}"
        )
        return
    weights = shape.params * 2 / 1e9
    per_gpu = weights / gpus
    line = (
        f"{model} ({human(shape.params)} from {shape.source}): {weights:.0f} GB of bf16 weights, "
        f"{per_gpu:.0f} GB a GPU at tensor parallel {gpus}, "
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


BINARY_JUDGES = ("rule", "countdown")  # scores 0 or 1 only


def refine_term_note(cfg) -> str | None:
    """When the refine term can reach GRPO's advantages (docs/design.md, "When the refine term
    acts"): with a 0/1 judge only through rollouts that do not refine; the margin reward is a line
    in any score, so with it even a graded judge does not help."""
    if not cfg.weights.refine:
        return None
    why = "pasr/refine_term/live_groups shows its reach (docs/design.md#when-the-refine-term-acts)"
    if cfg.judge.kind in BINARY_JUDGES:
        return (
            f"pasr.judge.kind={cfg.judge.kind} scores 0 or 1: GRPO cancels the refine term in every group whose "
            f"rollouts all refine, so it acts only through rollouts that do not refine; {why}"
        )
    if cfg.refine_compare == "margin":
        return (
            "pasr.refine_compare=margin pays acc - baseline, a line in the score: GRPO cancels it in every group "
            f"whose rollouts all refine, whatever the judge; {why}"
        )
    return None


def check_judge(
    cfg,
    report: Report,
    served_gpus: int,
    ping_timeout_s: float,
    gpu_memory_gb: float,
    data_golds: list[str],
    *,
    node_gpus: int = 8,
    here: bool = True,
    judge_refused: bool = False,
) -> None:
    """The judge: where it runs, an LLM judge pinged (or, served by the job, sized), what
    ``hybrid`` sends to it and the tie band. With ``here`` false (a job elsewhere) a judge that
    does not answer from this machine is a note: the job pings it from the cluster at its start.
    ``judge_refused``: the served judge's overrides were refused (a FAIL line already says why),
    so its kind is not the run's."""
    kind = cfg.judge.kind
    if note := refine_term_note(cfg):
        report.note("reward", note)
    if kind not in ("openai", "hybrid"):
        if served_gpus and not judge_refused:
            report.fail(
                "judge",
                f"a judge is served on {served_gpus} GPU(s) but pasr.judge.kind={kind} never asks it: "
                "set pasr.judge.kind=openai (or drop --judge-gpus and train on those GPUs)",
            )
        elif not served_gpus:
            report.ok("judge", f"pasr.judge.kind={kind}: scored in the trainer's process, no GPU")
        return
    if served_gpus:
        check_served_judge(report, cfg.judge.model, served_gpus, node_gpus, gpu_memory_gb)
    else:
        from dataclasses import replace

        from recipe.verl_engine.config import check_judge_endpoint

        # the run's own ping (one request), with a short timeout and no retry: a dry run answers in seconds
        quick = replace(cfg, judge=replace(cfg.judge, timeout_s=min(cfg.judge.timeout_s, ping_timeout_s), retries=0))
        why = check_judge_endpoint(quick)
        if why and here:
            report.fail("judge", why)
        elif why:
            report.note("judge", f"{why} (from this machine; the job pings it from the cluster at its start)")
        else:
            report.ok("judge", f"{cfg.judge.base_url} answers and serves {cfg.judge.model}")
    if finding := zeta_finding(cfg):
        status, text = finding
        {"FAIL": report.fail, "note": report.note, "ok": report.ok}[status]("judge", text)
    if kind == "hybrid" and data_golds:
        from rewards.judges.hybrid import gold_is_math

        to_llm = sum(not gold_is_math(g) for g in data_golds)
        report.note(
            "judge",
            f"hybrid: {to_llm} of the first {len(data_golds)} training golds go to the LLM judge, the others to "
            "Math-Verify (math golds); pasr.judge.kind=openai asks the LLM judge for every rollout",
        )
