"""What ``pasr submit`` checks before it contacts the cluster, so that a run the job would refuse
is refused here, in seconds, on one line (or, for the plan, the ``pasr check`` report):

* :func:`check_verl_run`: the overrides compose into a valid config (keys, types, ``pasr.*``,
  ``rrr.*``) with absolute checkpoint and dump folders;
* :func:`check_plan`: ``pasr check`` of the run (GPU and batch arithmetic, model, memory, judge,
  tracker credentials in the job's environment; ``--no-check`` skips it);
* :func:`check_local_run`: the local engine's run directory is absolute.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from data.cli_errors import CliError


def check_verl_run(overrides: list[str]):
    """The config ``python3 -m recipe.main_pasr OVERRIDES`` will run in the job, checked for what
    can be known before submitting it (keys, types, ``pasr.*``, ``rrr.*``, paths); a CliError
    otherwise.

    The config checks are the functions the job's own preflight
    (:func:`recipe.verl_engine.config.preflight`) calls, so the two cannot disagree:
    :func:`~recipe.verl_engine.config.pasr_config` and :func:`~recipe.verl_engine.config.rrr_config`
    (for every method, as there: it checks the ``rrr.*`` keys always and, with ``method=rrr``,
    ``rollout.n == rrr.n_reflections``, a binary judge, and a ``data.max_prompt_length`` that holds
    an attempt plus a reflection). Without the latter a bad RRR run would be uploaded and started
    only to fail in the job."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from recipe.pasr_config import ConfigError
    from recipe.verl_engine.config import compose_config, engine_config, pasr_config, relative_dir_problem, rrr_config

    try:
        config = compose_config(overrides)
        pasr_config(config)
        rrr_config(config)
        engine = engine_config(config)
    except (HydraException, OmegaConfBaseException, ConfigError) as exc:
        raise CliError(f"the overrides do not make a valid config: {str(exc).strip().splitlines()[0]}") from None
    why = relative_dir_problem(config, engine)
    if why:
        raise CliError(why)
    return config


class _TrainArgParser(argparse.ArgumentParser):
    """``pasr train``'s own parser, for the arguments after ``--``: a mistake is a one-line
    CliError here, not a usage message and an exit."""

    def error(self, message: str):
        raise CliError(f"the pasr train arguments after --: {message}")


def _layer_run_dir(layer) -> object:
    """``trainer.run_dir`` as a config layer (a plain container) writes it, or None."""
    trainer = layer.get("trainer") if isinstance(layer, dict) else None
    return trainer.get("run_dir") if isinstance(trainer, dict) else None


def check_local_run(argv: list[str], working_dir: Path) -> str:
    """The run directory ``python3 -m recipe train ARGV`` will write in the job; a CliError
    unless it is absolute.

    A job runs in a temporary copy of its working dir: a relative run directory lands inside it
    and is lost with it (checkpoints, metrics, rollouts), and a resubmission starts over. The
    directory is found as ``pasr train`` finds it: ``--resume``, else ``--run-dir``, else
    ``trainer.run_dir`` from the overrides over the ``--config`` file (read from the working
    dir when relative, as the job will) over the preset over the defaults, whose values
    (``runs/pasr-local``, ``runs/pasr-demo``, ...) are all relative. Only that key is looked up,
    nothing is validated: the job checks the rest on the cluster, whose GPUs and files this
    machine may not have. A value with an interpolation (``${...}``) resolves there, so it
    passes."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException
    from yaml import YAMLError

    from recipe.local_engine.cli import build_parser as build_train_parser
    from recipe.local_engine.config import TrainerConfig, preset_path
    from recipe.pasr_config import ConfigError

    parser = _TrainArgParser(prog="pasr train", add_help=False)
    build_train_parser(parser)
    args = parser.parse_args(argv)

    def load(path: Path, what: str):
        from recipe.yaml_bounds import alias_expansion_problem

        if why := alias_expansion_problem(path):  # OmegaConf.load would copy every alias: no end
            raise CliError(f"{what}: {why}")
        try:
            return OmegaConf.to_container(OmegaConf.load(path), resolve=False)
        except (OSError, UnicodeDecodeError, YAMLError) as exc:
            raise CliError(f"{what}: cannot read {path}: {str(exc).splitlines()[0]}") from None

    def layers():  # (value, where it comes from), the one pasr train uses first
        yield args.resume, "--resume"
        yield args.run_dir, "--run-dir"
        try:
            overrides = OmegaConf.to_container(
                OmegaConf.from_dotlist([o for o in args.overrides if "=" in o]), resolve=False
            )
        except (YAMLError, OmegaConfBaseException) as exc:
            raise CliError(f"the pasr train overrides after --: {str(exc).splitlines()[0]}") from None
        yield _layer_run_dir(overrides), "trainer.run_dir="
        if args.config:
            config = Path(args.config).expanduser()
            config = config if config.is_absolute() else working_dir / config
            if not config.is_file():
                raise CliError(f"--config {args.config}: no such file in the working dir {working_dir}")
            yield _layer_run_dir(load(config, "--config")), f"trainer.run_dir in --config {args.config}"
        try:
            preset = preset_path(args.preset or "default")
        except ConfigError as exc:
            raise CliError(str(exc)) from None
        source = f"the default of --preset {args.preset}" if args.preset else "the pasr train default"
        yield _layer_run_dir(load(preset, "--preset")), source
        yield TrainerConfig.run_dir, source

    run_dir, source = next((value, where) for value, where in layers() if value is not None)
    text = str(run_dir)
    if text.startswith("/") or "${" in text:
        return text
    raise CliError(
        f"the run directory {text} ({source}) is relative: in a Ray job it lands in the job's temporary copy of "
        "the working directory and is lost with it; pass an absolute --run-dir (or trainer.run_dir=) on storage "
        "every node sees, e.g. --run-dir /shared/runs/EXP"
    )


def check_plan(args, overrides: list[str], runtime_env: dict) -> None:
    """``pasr check`` of the verl run the job will start (:func:`recipe.plan_check.check`, with
    the job's environment variables and the served judge), before the cluster is contacted: a
    CliError naming how many problems, after the report on stderr. What this machine lacks of
    the run's files, folders and judge is a note there (the job reads them on the cluster)."""
    from recipe.plan_check import check

    report = check(
        overrides,
        judge_gpus=args.judge_gpus or 0,
        judge_model=args.judge_model,
        node_gpus=args.node_gpus,
        gpu_memory_gb=args.gpu_memory_gb,
        job_env=dict(runtime_env.get("env_vars") or {}),
    )
    if report.problems:
        print(report.render(), file=sys.stderr, flush=True)
        raise CliError(
            f"pasr check found {report.problems} problem(s) in the run (the FAIL lines above): verl would stop on "
            "them after minutes of start-up; fix them, or --no-check submits without the check"
        )
    print("pasr: the run's plan checked (pasr check): no problem found", file=sys.stderr, flush=True)
