"""``pasr check``: a dry run of a verl training run, before a cluster's GPUs are held.

    pasr check -- OVERRIDES                                  # the overrides of python3 -m recipe.main_pasr
    pasr check --judge-model Qwen/Qwen2.5-14B-Instruct --judge-gpus 2 -- OVERRIDES   # judge served by the job
    DRY_RUN=1 bash recipe/scripts/run_pasr_qwen2_5_7b.sh    # the run script's own command, checked

It composes the config as ``python3 -m recipe.main_pasr --cfg job`` does (same yaml files, read
from the installed verl's folder without importing verl, which imports torch: seconds instead of
most of a minute), naming every bad override at once (:mod:`.compose`), and runs the config
checks of the run's own preflight; reads the numbers the run is laid out by as whole numbers
(:mod:`.layout`); checks the model folder, its heads at the rollout's tensor parallel size and
its memory a GPU (:mod:`.model`, :mod:`.layout`); reads the first rows of each data file through
the loaders and checks the columns verl's dataset and the PASR rollout read, that there are rows
and that validation is not on the training files (:mod:`.data`); pings an LLM judge (one request,
a short timeout: a judge that does not answer is one FAIL line, not a crash) or sizes one the job
serves, and checks ``pasr.zeta`` against its scores (:mod:`.judge`); checks the GPU and batch
arithmetic verl asserts only after start-up (:mod:`.batch`), that the checkpoint and dump folders
can be written and that the experiment tracker has its credentials (:mod:`.run_env`), and that
the checkpoint a resubmission resumes from was saved by as many GPUs as the run has
(:mod:`.checkpoints`); and prints the plan: GPUs per role and idle, memory a GPU, rollouts and
tokens per step, steps, checkpoints (how often, how many kept, their size, what a preemption
loses), and an estimate of the step time scaled from the last measured GPU step (:mod:`.plan`). Every problem is
one ``FAIL`` line; a check that builds on a refused one waits (no follow-on line that is wrong once
the first is fixed); the exit status is 2 when there is one, else 0. Nothing here needs a GPU.

``pasr submit`` runs the same check (:func:`check` with ``job_env``) before it contacts the cluster.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping

from data.cli_errors import CliError
from recipe.plan_check.batch import batch_problems
from recipe.plan_check.checkpoints import check_resume
from recipe.plan_check.compose import compose_reporting, one_line, select, strip_command
from recipe.plan_check.data import check_data, first_golds
from recipe.plan_check.judge import PLACEHOLDER_JUDGE_URL, check_judge
from recipe.plan_check.layout import check_policy, read_layout
from recipe.plan_check.plan import plan_lines
from recipe.plan_check.report import Report
from recipe.plan_check.run_env import check_dirs, check_tracker


def option_problem(
    judge_gpus: int, judge_model: str | None, node_gpus: int, rows: int, ping_timeout_s: float, gpu_memory_gb: float
) -> str | None:
    """Why the check's own options cannot describe a cluster, or None."""
    if node_gpus < 1:
        return f"--node-gpus {node_gpus}: a node has at least 1 GPU"
    if judge_gpus < 0:
        return f"--judge-gpus {judge_gpus}: the GPUs the job's judge takes, 0 (none) or more"
    if judge_gpus and not judge_model:
        return "--judge-gpus needs --judge-model NAME (the judge the job serves)"
    if judge_model and not judge_gpus:
        return "--judge-model needs --judge-gpus N >= 1 (the GPUs the job's judge takes)"
    if rows < 1:
        return f"--rows {rows}: read at least 1 row of each data file"
    if not (math.isfinite(ping_timeout_s) and ping_timeout_s > 0):
        return f"--ping-timeout {ping_timeout_s}: seconds the judge ping waits, a number > 0"
    if not (math.isfinite(gpu_memory_gb) and gpu_memory_gb > 0):
        return f"--gpu-memory-gb {gpu_memory_gb}: a GPU's memory in GB, a number > 0"
    return None


def run_overrides(
    overrides: list[str], judge_gpus: int = 0, judge_model: str | None = None, node_gpus: int = 8
) -> list[str]:
    """The overrides the run composes: the command's (``python3 -m recipe.main_pasr`` taken off)
    and, for a judge ``pasr judge serve`` serves on ``judge_gpus`` GPUs of a node of ``node_gpus``,
    what it appends (its URL a placeholder: the job learns the real one). The one composition
    ``pasr check``, ``pasr submit`` and the run scripts' dry runs share; a CliError when the
    command sets what the judge server sets."""
    overrides = strip_command(list(overrides))
    if not judge_gpus:
        return overrides
    from recipe.judge_server import ServedJudge, judge_overrides

    placeholder = ServedJudge(judge_model, judge_gpus, PLACEHOLDER_JUDGE_URL, "", node_gpus, [], "")
    return [*overrides, *judge_overrides(overrides, placeholder)]


def check(
    overrides: list[str],
    *,
    judge_gpus: int = 0,
    judge_model: str | None = None,
    node_gpus: int = 8,
    rows: int = 3,
    ping_timeout_s: float = 5.0,
    gpu_memory_gb: float = 80.0,
    job_env: Mapping[str, str] | None = None,
) -> Report:
    """The whole check of the run ``python3 -m recipe.main_pasr OVERRIDES`` (served judge: as
    ``pasr judge serve --judge-gpus N --judge-model M -- ...`` runs it, on nodes of ``node_gpus``).
    ``job_env``: the run is a Ray job with these environment variables (``pasr submit``): its
    files, folders and judge are the cluster's, so what this machine lacks of them is a note,
    and the tracker's credentials are looked for in the job's environment."""
    from omegaconf import OmegaConf, open_dict
    from omegaconf.errors import OmegaConfBaseException

    from recipe.pasr_config import ConfigError
    from recipe.verl_engine.config import PreflightError, engine_config, pasr_config, preflight

    if why := option_problem(judge_gpus, judge_model, node_gpus, rows, ping_timeout_s, gpu_memory_gb):
        raise CliError(why)
    here = job_env is None
    report = Report()
    overrides = strip_command(list(overrides))
    judge_refused = False
    if judge_gpus:
        from recipe.judge_server import training_gpus_problem

        why = training_gpus_problem(overrides, judge_gpus, node_gpus)
        if why:
            report.fail("GPUs", why + f" (--node-gpus {node_gpus})")
        try:
            overrides = run_overrides(overrides, judge_gpus, judge_model, node_gpus)
        except CliError as exc:
            report.fail("judge", str(exc))
            judge_refused = True
    config, problems = compose_reporting(overrides)
    for line in problems:
        report.fail("config", line)
    if config is None:
        return report
    try:
        cfg = pasr_config(config)
        engine = engine_config(config)
        unchecked = OmegaConf.create(OmegaConf.to_container(config, resolve=False))
        with open_dict(unchecked):
            unchecked.pasr_verl.check_resources = False  # the GPUs are planned here, not present
            unchecked.pasr_verl.check_judge = False  # pinged below, with a short timeout
        preflight(unchecked, find_module=lambda name: True)
    except (OmegaConfBaseException, ConfigError, PreflightError, TypeError, ValueError) as exc:
        report.fail("config", one_line(exc))
        return report
    report.ok(
        "config",
        "composed as `python3 -m recipe.main_pasr --cfg job` composes it; method, pasr.*, rrr.*, pasr_verl.* valid",
    )
    layout, bad = read_layout(config)
    for line in bad:
        report.fail("config", line)
    if layout is not None and not judge_gpus and layout.per_node > node_gpus:
        report.fail(
            "GPUs", f"trainer.n_gpus_per_node={layout.per_node} but a node has {node_gpus} GPU(s) (--node-gpus)"
        )
    fits = not report.failed("GPUs")
    train_rows = check_data(config, report, rows, here, batch=layout.bsz if layout else None)
    shape = check_policy(config, report, layout, gpu_memory_gb, here)
    golds = first_golds(config, rows) if cfg.judge.kind == "hybrid" else []
    check_judge(
        cfg,
        report,
        judge_gpus,
        ping_timeout_s,
        gpu_memory_gb,
        golds,
        node_gpus=node_gpus,
        here=here,
        judge_refused=judge_refused,
    )
    fitting = None if fits or layout is None else min(layout.per_node, node_gpus - judge_gpus)
    if layout is None:
        report.note("batch", "GPU and batch arithmetic and the plan wait for whole numbers in the keys above")
    elif fitting is not None and fitting < 1:
        report.note("batch", "GPU and batch arithmetic wait for GPUs to train on (the GPUs line above)")
    else:
        if fitting is not None:  # on the GPUs that fit, not the refused count: right once that is fixed
            report.note(
                "batch",
                f"GPU and batch arithmetic checked on {fitting} GPU(s) a node, what the nodes leave to training",
            )
        problems = batch_problems(config, per_node=fitting)
        for line in problems:
            report.fail("batch", line)
        if not problems:
            report.ok(
                "batch",
                "GPU and batch arithmetic: rows split over the GPUs, whole mini-batches, micro-batches hold a sequence",
            )
    check_dirs(config, engine, report, here)
    if layout is not None and fits:
        check_resume(config, report, layout)
    check_tracker(config, report, job_env)
    if layout is not None:
        plan_lines(
            config,
            cfg,
            report,
            layout,
            shape,
            train_rows,
            judge_gpus=judge_gpus,
            node_gpus=node_gpus,
            fits=fits,
            gpu_memory_gb=gpu_memory_gb,
        )
    return report


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
        help="memory of a GPU, for the model's and the judge's memory a GPU (default 80)",
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


__all__ = ["PLACEHOLDER_JUDGE_URL", "Report", "build_parser", "check", "run", "run_overrides", "select"]
