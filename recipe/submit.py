"""``pasr submit``: run PASR training on a Ray cluster as a Ray job.

    pasr submit --address http://HEAD:8265 [--engine verl|local] [--follow] [--working-dir .] -- OVERRIDES...

The repository (``--working-dir``, default ``.``) is uploaded as the job's ``working_dir``, minus
what ``recipe/runtime_env.yaml`` excludes (.git, runs/, outputs/, checkpoints/, parquet files,
weights, caches), and the entrypoint runs on the head node:

* ``--engine verl`` (default): ``python3 -m recipe.main_pasr OVERRIDES`` (Hydra overrides);
* ``--engine local``: ``python3 -m recipe train OVERRIDES`` (the local engine's arguments).

Before submitting, the dashboard must answer (a wrong address fails with a message saying so)
and, for ``--engine verl``, the cluster must have ``trainer.nnodes`` nodes with
``trainer.n_gpus_per_node`` GPUs each, read from the overrides or ``recipe/config/
pasr_trainer.yaml`` (``--no-gpu-check`` skips it). The job id is printed on stdout; ``--follow``
then streams the logs and exits with the job's outcome (0 succeeded, 1 failed, 3 stopped).
See ``recipe/jobs.py`` for authentication (``RAY_AUTH_TOKEN``) and ``pasr jobs``.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from recipe.cli import CliError

REPO_MARKER = Path("recipe") / "main_pasr.py"
RUNTIME_ENV_FILE = Path(__file__).resolve().parent / "runtime_env.yaml"
ENTRYPOINTS = {
    "verl": ["python3", "-m", "recipe.main_pasr"],
    "local": ["python3", "-m", "recipe", "train"],
}


def build_entrypoint(engine: str, overrides: list[str], entrypoint: str | None = None) -> str:
    """The shell command the job runs (overrides quoted one by one)."""
    head = entrypoint if entrypoint else " ".join(ENTRYPOINTS[engine])
    return " ".join([head, *(shlex.quote(o) for o in overrides)])


def build_runtime_env(working_dir: Path, env: list[str] | None = None, base_file: Path = RUNTIME_ENV_FILE) -> dict:
    """``recipe/runtime_env.yaml`` with ``working_dir`` set and ``--env`` variables added."""
    from omegaconf import OmegaConf

    runtime_env = OmegaConf.to_container(OmegaConf.load(base_file), resolve=True) if base_file.is_file() else {}
    runtime_env["working_dir"] = str(working_dir)
    env_vars = dict(runtime_env.get("env_vars") or {})
    for item in env or []:
        key, sep, value = item.partition("=")
        if not key:
            raise CliError(f"--env {item!r}: expected KEY=VALUE or KEY")
        if not sep:  # KEY alone: this shell's value
            if key not in os.environ:
                raise CliError(f"--env {key}: not set in this environment (use KEY=VALUE)")
            value = os.environ[key]
        env_vars[key] = value
    if env_vars:
        runtime_env["env_vars"] = env_vars
    else:
        runtime_env.pop("env_vars", None)
    return runtime_env


def _override_value(overrides: list[str], key: str) -> str | None:
    value = None
    for o in overrides:
        k, sep, v = o.partition("=")
        if sep and k.lstrip("+~") == key:
            value = v
    return value


def required_gpus(overrides: list[str], config_file: Path | None = None) -> tuple[int, int]:
    """``(nnodes, n_gpus_per_node)`` from the overrides, else from ``pasr_trainer.yaml``."""
    from omegaconf import OmegaConf

    config_file = config_file or Path(__file__).resolve().parent / "config" / "pasr_trainer.yaml"
    trainer = OmegaConf.load(config_file).get("trainer", {})
    out = []
    for key, default in (("nnodes", trainer.get("nnodes", 1)), ("n_gpus_per_node", trainer.get("n_gpus_per_node", 8))):
        raw = _override_value(overrides, f"trainer.{key}")
        try:
            out.append(int(raw if raw is not None else default))
        except ValueError:
            raise CliError(f"trainer.{key}={raw}: not an integer") from None
    return out[0], out[1]


def relative_path_warnings(overrides: list[str]) -> list[str]:
    """Paths that a Ray job would resolve inside its temporary working directory."""
    out = []
    ckpt = _override_value(overrides, "trainer.default_local_dir")
    if ckpt is None or not (ckpt.startswith(("/", "~", "hdfs://", "s3://", "gs://"))):
        out.append(
            f"trainer.default_local_dir={ckpt or 'checkpoints/${trainer.project_name}/${trainer.experiment_name}'} is "
            "relative: in a Ray job it lands in the job's temporary working directory; pass an absolute path "
            "on storage every node sees to keep checkpoints, rollout dumps and resume"
        )
    return out


def cluster_node_gpus(address: str, timeout_s: float = 30.0) -> list[float]:
    """GPUs of each alive node, from the dashboard's state API (``timeout_s`` bounds the request)."""
    from ray.exceptions import AuthenticationError
    from ray.util.state.api import StateApiClient
    from ray.util.state.common import ListApiOptions, StateResource

    from recipe.jobs import _auth_hint, auth_headers

    try:
        client = StateApiClient(address=address, headers={"Content-Type": "application/json", **auth_headers()})
        options = ListApiOptions(detail=True, timeout=max(1, round(timeout_s)))  # the state API takes whole seconds
        nodes = client.list(StateResource.NODES, options=options, raise_on_missing_output=False)
    except AuthenticationError:
        raise CliError(_auth_hint(address)) from None
    except Exception as exc:  # the jobs API answered, so this is a state-API problem worth naming
        raise CliError(f"cannot list the nodes of {address} for the GPU check ({exc}); --no-gpu-check skips it") from None
    gpus = []
    for node in nodes:
        node = node if isinstance(node, dict) else node.__dict__
        if str(node.get("state", "ALIVE")).upper() == "ALIVE":
            gpus.append(float((node.get("resources_total") or {}).get("GPU", 0)))
    return gpus


def build_parser(parser: argparse.ArgumentParser) -> None:
    parser.usage = "pasr submit --address URL [options] -- OVERRIDES..."
    from recipe.jobs import add_address_arg

    add_address_arg(parser)
    parser.add_argument("--engine", choices=sorted(ENTRYPOINTS), default="verl", help="verl (GPU cluster, default) or local")
    parser.add_argument("--follow", "-f", action="store_true", help="stream the job's logs; exit with its outcome")
    parser.add_argument("--working-dir", default=".", metavar="DIR", help="the repository to upload (default: .)")
    parser.add_argument("--no-gpu-check", action="store_true", help="submit even if the cluster lacks the GPUs the config asks for")
    parser.add_argument("--job-id", default=None, metavar="ID", help="submission id to use (default: Ray picks one)")
    parser.add_argument(
        "--env", action="append", default=[], metavar="KEY=VALUE", help="environment variable for the job (repeatable); KEY alone passes this shell's value, e.g. --env WANDB_API_KEY"
    )
    parser.add_argument(
        "--entrypoint", default=None, metavar="CMD", help="run CMD instead of the engine's command (the overrides are appended)"
    )
    parser.add_argument("overrides", nargs=argparse.REMAINDER, help="after --: Hydra overrides (verl) or train arguments (local)")


def run(args) -> int:
    from recipe.jobs import _call, connect, follow, normalize_address, quiet_ray_logs
    from recipe.verl_engine.config import gpu_shortfall

    overrides = list(args.overrides or [])
    if overrides and overrides[0] == "--":
        overrides = overrides[1:]
    working_dir = Path(args.working_dir).expanduser().resolve()
    if not working_dir.is_dir():
        raise CliError(f"--working-dir {args.working_dir}: not a directory")
    if args.entrypoint is None and not (working_dir / REPO_MARKER).is_file():
        raise CliError(f"--working-dir {working_dir} is not the PASR repository (no {REPO_MARKER})")

    address = normalize_address(args.address)
    quiet_ray_logs()
    client = connect(address, args.timeout)

    if args.engine == "verl" and not args.no_gpu_check:
        nnodes, per_node = required_gpus(overrides)
        why = gpu_shortfall(cluster_node_gpus(address, args.timeout), nnodes, per_node, f"the Ray cluster at {address}")
        if why:
            raise CliError(why + "; --no-gpu-check submits anyway")

    if args.engine == "verl" and args.entrypoint is None:
        for warning in relative_path_warnings(overrides):
            print(f"pasr: warning: {warning}", file=sys.stderr)

    entrypoint = build_entrypoint(args.engine, overrides, args.entrypoint)
    runtime_env = build_runtime_env(working_dir, args.env)
    job_id = _call(
        address,
        lambda: client.submit_job(
            entrypoint=entrypoint,
            runtime_env=runtime_env,
            submission_id=args.job_id,
            metadata={"pasr_engine": args.engine},
        ),
    )
    print(job_id, flush=True)
    print(f"pasr: submitted to {address}: {entrypoint}", file=sys.stderr)
    if not args.follow:
        print(f"pasr: follow with `pasr jobs logs {job_id} --address {address} --follow`", file=sys.stderr)
        return 0
    return follow(client, job_id)
