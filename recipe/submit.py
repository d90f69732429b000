"""``pasr submit``: run PASR training on a Ray cluster as a Ray job.

    pasr submit --address http://HEAD:8265 [--engine verl|local] [--follow] [--working-dir .] -- OVERRIDES...

This is ``ray job submit`` with the recipe's entrypoint and runtime env, and where it only wraps
it, it follows its semantics: ``--submission-id`` (``--job-id`` is Ray's deprecated spelling),
``--runtime-env FILE`` (default ``recipe/runtime_env.yaml``) with ``--working-dir`` (default
``.``) overriding the file's, ``--metadata-json``, and with ``--entrypoint CMD`` nothing of the
recipe is checked, as Ray would not (``--entrypoint-num-gpus N`` reserves GPUs for such a
command, an evaluation with vLLM, so that Ray runs it on a node with N free GPUs instead of the
head). The runtime env uploads the repository minus what the file
excludes (.git, runs/, checkpoints/, parquet files, weights, caches), what ``.gitignore`` lists
(Ray reads it) and what ``.git/info/exclude`` lists (Ray does not; added here), and sets
``RAY_JOB_STOP_WAIT_TIME_S`` (900 s), so that ``ray job stop`` / ``pasr jobs stop`` leave the run
time to checkpoint after SIGTERM; ``--env KEY=VALUE`` adds or overrides a variable. The
entrypoint runs on the head node:

* ``--engine verl`` (default): ``python3 -m recipe.main_pasr OVERRIDES`` (Hydra overrides);
* ``--engine local``: ``python3 -m recipe train OVERRIDES`` (the local engine's arguments).

For the verl engine's own entrypoint it first composes the overrides into the config the job
will run (:func:`recipe.verl_engine.config.compose_config`) and refuses, with one line and exit
status 2, a bad key, an invalid ``pasr.*`` / ``rrr.*`` setting (with ``method=rrr`` also what
the RRR rollout needs: ``rollout.n``, a binary judge, prompt room for a retry), a relative
``trainer.default_local_dir`` or ``pasr_verl.rollout_dir`` (in a job it lands in a temporary
copy of the working dir, so a resubmission silently starts from scratch); then runs ``pasr
check`` on the run before the cluster is contacted (:func:`recipe.submit_checks.check_plan`:
GPU and batch arithmetic, model, memory a GPU, the judge, the tracker's key in the job's
``--env``; nodes described by ``--node-gpus`` / ``--gpu-memory-gb``) and refuses a plan with a
problem, its report on stderr (``--no-check`` skips it); and refuses a cluster without
``trainer.nnodes`` nodes of ``trainer.n_gpus_per_node`` GPUs (``--no-gpu-check`` skips that
one). For the local engine's entrypoint it refuses, the same way, a relative run directory
(:func:`~recipe.submit_checks.check_local_run`): the presets' defaults all are, so such a job needs
``--run-dir /shared/...`` (or ``trainer.run_dir=``). The dashboard must answer. The job id is printed on stdout;
unlike ``ray job submit``, which waits unless ``--no-wait``, it returns at once unless
``--follow``, which streams the logs and exits with the job's outcome (0 succeeded, 1 failed,
3 stopped; 4 when the Ray head stops answering: one line then says how to find and stop the
job). See ``recipe/jobs.py`` for authentication (``RAY_AUTH_TOKEN``) and ``pasr jobs``.

Two additions to the verl entrypoint (:func:`recipe_entrypoint`): ``--train-dataset`` /
``--val-dataset`` (a set of ``pasr data list`` or a file on the cluster's storage, with
``--question-field`` / ``--answer-field`` for a file of another layout) are prepared by the job
itself into ``--data-dir`` (``pasr data prepare``; the names it gives become ``data.train_files``
/ ``data.val_files``), and ``--judge-model`` / ``--judge-gpus`` run the training under
``pasr judge serve`` (:mod:`recipe.judge_server`), which serves the judge on GPUs of the same
cluster and trains on the rest of its node.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from data.cli_errors import CliError
from data.cli_flags import add_alias
from recipe.submit_checks import check_local_run, check_plan, check_verl_run

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


def data_steps(
    train: str | None, val: str | None, data_dir: str | None, mapping: dict[str, str]
) -> tuple[list[list[str]], list[str]]:
    """(the ``pasr data prepare`` commands the job runs first, the ``data.*_files`` overrides
    naming what they write) for ``--train-dataset`` / ``--val-dataset``. The field mapping goes
    to each source that is a file (a named set has its own layout). Each command keeps a file
    the first submission prepared (``--keep-existing``): a resubmission after a preemption reads
    neither the hub nor the source again."""
    from argparse import Namespace

    from data.loaders import looks_like_path
    from data.prepare import output_file

    sources = [
        (s, split, key)
        for s, split, key in ((train, "train", "data.train_files"), (val, "test", "data.val_files"))
        if s
    ]
    if not sources:
        if mapping:
            raise CliError(
                f"--{'/--'.join(k.replace('_', '-') for k in mapping)}: only with --train-dataset/--val-dataset"
            )
        return [], []
    if not data_dir or not data_dir.startswith("/"):
        raise CliError(
            "--train-dataset/--val-dataset need --data-dir /ABSOLUTE/DIR on storage every node sees: the job prepares "
            "the parquet files there (a relative folder would be in the job's temporary copy of the repository)"
        )
    commands, overrides = [], []
    for source, split, key in sources:
        # --keep-existing: a resubmission trains on what the first job prepared (no hub, no source read)
        cmd = ["python3", "-m", "recipe", "data", "prepare", "--dataset", source, "--split", split, "--keep-existing"]
        cmd += ["--out", data_dir]
        if looks_like_path(source):
            cmd += [arg for k, v in mapping.items() for arg in ("--" + k.replace("_", "-"), v)]
        commands.append(cmd)
        overrides.append(f"{key}={output_file(Namespace(dataset=source, split=split, out=data_dir))}")
    return commands, overrides


def recipe_entrypoint(overrides: list[str], prepare: list[list[str]] = (), judge: list[str] = ()) -> str:
    """The verl job's shell command: the data preparation steps, then (under ``pasr judge serve``
    when ``judge`` holds its arguments) ``python3 -m recipe.main_pasr OVERRIDES``."""
    train = ["python3", "-m", "recipe", "judge", "serve", *judge, "--"] if judge else []
    train += [*ENTRYPOINTS["verl"], *overrides]
    return " && ".join(shlex.join(cmd) for cmd in [*prepare, train])


def git_info_excludes(working_dir: Path) -> list[str]:
    """The patterns of ``.git/info/exclude``, git's ignore list of one clone. Ray's upload skips
    what ``.gitignore`` lists but never reads this file, so a large folder ignored only there (a
    local environment bundle of 400 MB did it) went up with the job and Ray refused the upload
    (over its 100 MiB limit). The syntax is the one Ray's ``excludes`` take (gitignore's)."""
    path = working_dir / ".git" / "info" / "exclude"
    if not path.is_file():
        return []
    lines = (line.strip() for line in path.read_text(errors="replace").splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def build_runtime_env(working_dir: Path, env: list[str] | None = None, base_file: Path = RUNTIME_ENV_FILE) -> dict:
    """``recipe/runtime_env.yaml`` with ``working_dir`` set, the clone's ``.git/info/exclude``
    patterns added to ``excludes`` and ``--env`` variables added."""
    from omegaconf import OmegaConf

    runtime_env = OmegaConf.to_container(OmegaConf.load(base_file), resolve=True) if base_file.is_file() else {}
    runtime_env["working_dir"] = str(working_dir)
    excludes = list(runtime_env.get("excludes") or [])
    excludes += [p for p in git_info_excludes(working_dir) if p not in excludes]
    if excludes:
        runtime_env["excludes"] = excludes
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


def build_parser(parser: argparse.ArgumentParser) -> None:
    parser.usage = "pasr submit --address URL [options] -- OVERRIDES..."
    from recipe.jobs import add_address_arg

    add_address_arg(parser)
    parser.add_argument(
        "--engine", choices=sorted(ENTRYPOINTS), default="verl", help="verl (GPU cluster, default) or local"
    )
    from recipe.jobs import FOLLOW_EXIT_CODES

    parser.add_argument("--follow", "-f", action="store_true", help=f"stream the job's logs; {FOLLOW_EXIT_CODES}")
    parser.add_argument(
        "--working-dir",
        default=".",
        metavar="DIR",
        help="the repository to upload (default: .); overrides the runtime env file's",
    )
    parser.add_argument(
        "--runtime-env",
        type=Path,
        default=RUNTIME_ENV_FILE,
        metavar="FILE",
        help="the job's runtime env, a YAML file as for `ray job submit --runtime-env` "
        "(default: recipe/runtime_env.yaml)",
    )
    parser.add_argument(
        "--no-gpu-check", action="store_true", help="submit even if the cluster lacks the GPUs the config asks for"
    )
    parser.add_argument(
        "--no-check",
        action="store_true",
        help="submit without `pasr check` of the run (verl engine; by default a plan it refuses is not submitted)",
    )
    parser.add_argument(
        "--node-gpus",
        type=int,
        default=8,
        metavar="N",
        help="GPUs a node of the cluster has, for the plan check (default 8)",
    )
    parser.add_argument(
        "--gpu-memory-gb",
        type=float,
        default=80.0,
        metavar="GB",
        help="memory of a GPU, for the plan check's memory a GPU (default 80)",
    )
    submission_id = parser.add_argument(
        "--submission-id",
        dest="submission_id",
        default=None,
        metavar="ID",
        help="submission id to use (default: Ray picks one)",
    )
    add_alias(parser, "--job-id", submission_id)  # Ray's older name
    parser.add_argument(
        "--metadata-json", default=None, metavar="JSON", help="metadata to attach to the job (a JSON object)"
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="environment variable for the job (repeatable); KEY alone passes this shell's value, "
        "e.g. --env WANDB_API_KEY",
    )
    parser.add_argument(
        "--entrypoint",
        default=None,
        metavar="CMD",
        help="run CMD instead of the engine's command (the overrides are appended); "
        "nothing of the recipe is checked then",
    )
    parser.add_argument(
        "--entrypoint-num-gpus",
        type=float,
        default=None,
        metavar="N",
        help="GPUs Ray reserves for the entrypoint itself (as ray job submit's flag): it then runs on a node "
        "with N free GPUs, not on the head, e.g. --entrypoint 'python3 -m recipe eval ... --backend vllm'",
    )
    data = parser.add_argument_group("data prepared by the job (verl engine)")
    data.add_argument(
        "--train-dataset",
        metavar="NAME_OR_FILE",
        help="a set of `pasr data list` or a file on the cluster's storage, "
        "prepared into --data-dir as data.train_files",
    )
    data.add_argument("--val-dataset", metavar="NAME_OR_FILE", help="the same for data.val_files (split test)")
    data.add_argument(
        "--question-field",
        metavar="FIELD",
        help="the question field of a data file of another layout (as pasr data prepare)",
    )
    data.add_argument("--answer-field", metavar="FIELD", help="its reference answer field")
    data.add_argument(
        "--data-dir", metavar="DIR", help="absolute folder on storage every node sees, for the prepared parquet files"
    )
    judge = parser.add_argument_group("an LLM judge served by the job (verl engine; pasr judge serve)")
    judge.add_argument("--judge-model", metavar="NAME", help="the judge model to serve with vLLM (its served name too)")
    judge.add_argument(
        "--judge-gpus",
        type=int,
        metavar="N",
        help="GPUs of the cluster for the judge; training takes the rest of its node",
    )
    parser.add_argument(
        "overrides", nargs=argparse.REMAINDER, help="after --: Hydra overrides (verl) or train arguments (local)"
    )


_JOB_ADDITIONS = (
    "train_dataset",
    "val_dataset",
    "question_field",
    "answer_field",
    "data_dir",
    "judge_model",
    "judge_gpus",
)


def job_additions(args, overrides: list[str]) -> tuple[list[str], list[list[str]], list[str]]:
    """(the job's overrides with the prepared files named, the preparation commands, the
    overrides the config check composes: with what ``pasr judge serve`` adds in the job)."""
    mapping = {k: v for k, v in (("question_field", args.question_field), ("answer_field", args.answer_field)) if v}
    prepare, data_overrides = data_steps(args.train_dataset, args.val_dataset, args.data_dir, mapping)
    own = {o.split("=", 1)[0].lstrip("+") for o in overrides if "=" in o}
    twice = [o.split("=", 1)[0] for o in data_overrides if o.split("=", 1)[0] in own]
    if twice:
        raise CliError(f"{', '.join(twice)} is set by --train-dataset/--val-dataset and after -- too: keep one")
    overrides = [*data_overrides, *overrides]
    if bool(args.judge_model) != bool(args.judge_gpus):
        raise CliError("--judge-model and --judge-gpus go together: the judge to serve and the GPUs it takes")
    if not args.judge_model:
        return overrides, prepare, overrides
    if args.judge_gpus < 1:
        raise CliError("--judge-gpus N: N >= 1")
    from recipe.judge_server import ServedJudge, judge_overrides
    from recipe.plan_check.judge import PLACEHOLDER_JUDGE_URL

    placeholder = ServedJudge(args.judge_model, args.judge_gpus, PLACEHOLDER_JUDGE_URL, "", 0, [], "")
    # the judge's URL, model and kind as the job gets them; its training GPUs depend on the node it lands on
    added = [o for o in judge_overrides(overrides, placeholder) if not o.startswith("trainer.n_gpus_per_node=")]
    return overrides, prepare, [*overrides, *added]


def _metadata(engine: str, metadata_json: str | None) -> dict[str, str]:
    import json

    metadata = {"pasr_engine": engine}
    if metadata_json is not None:
        try:
            extra = json.loads(metadata_json)
        except ValueError as exc:
            raise CliError(f"--metadata-json: not JSON ({exc})") from None
        if not isinstance(extra, dict):
            raise CliError("--metadata-json: expected a JSON object")
        metadata.update({str(k): str(v) for k, v in extra.items()})
    return metadata


def run(args) -> int:
    from recipe.jobs import _call, cluster_node_gpus, connect, follow, normalize_address, quiet_ray_logs
    from recipe.verl_engine.config import gpu_shortfall, required_gpus

    overrides = list(args.overrides or [])
    if overrides and overrides[0] == "--":
        overrides = overrides[1:]
    working_dir = Path(args.working_dir).expanduser().resolve()
    if not working_dir.is_dir():
        raise CliError(f"--working-dir {args.working_dir}: not a directory")
    if args.entrypoint is None and not (working_dir / REPO_MARKER).is_file():
        raise CliError(f"--working-dir {working_dir} is not the PASR repository (no {REPO_MARKER})")
    if args.entrypoint_num_gpus is not None and not 0 <= args.entrypoint_num_gpus < float("inf"):
        raise CliError(f"--entrypoint-num-gpus {args.entrypoint_num_gpus}: a number of GPUs >= 0")
    if not args.runtime_env.is_file():
        raise CliError(f"--runtime-env {args.runtime_env}: no such file")
    runtime_env = build_runtime_env(working_dir, args.env, args.runtime_env)
    metadata = _metadata(args.engine, args.metadata_json)
    recipe_run = args.engine == "verl" and args.entrypoint is None
    prepare, judge_args, checked = [], [], overrides
    if recipe_run:
        overrides, prepare, checked = job_additions(args, overrides)
    elif any(getattr(args, k) for k in _JOB_ADDITIONS):
        raise CliError(
            f"{'/'.join('--' + k.replace('_', '-') for k in _JOB_ADDITIONS)}: only for the verl engine's own entrypoint"
        )
    config = check_verl_run(checked) if recipe_run else None
    if recipe_run and not args.no_check:
        check_plan(args, overrides, runtime_env)
    if recipe_run and args.judge_model:
        log = f"{config.trainer.default_local_dir}/judge_vllm.log"
        judge_args = ["--judge-model", args.judge_model, "--judge-gpus", str(args.judge_gpus), "--log", log]
    if args.engine == "local" and args.entrypoint is None:
        check_local_run(overrides, working_dir)

    address = normalize_address(args.address)
    quiet_ray_logs()
    client = connect(address, args.timeout)

    if config is not None and not args.no_gpu_check:
        nnodes, per_node = required_gpus(config)
        node_gpus = cluster_node_gpus(address, args.timeout)
        why = gpu_shortfall(node_gpus, nnodes, per_node, f"the Ray cluster at {address}")
        if args.judge_model and not why:
            from recipe.judge_server import training_gpus_problem

            why = training_gpus_problem(overrides, args.judge_gpus, int(max(node_gpus, default=0)))
        if why:
            raise CliError(why + "; --no-gpu-check submits anyway")

    if prepare or judge_args:
        entrypoint = recipe_entrypoint(overrides, prepare, judge_args)
    else:
        entrypoint = build_entrypoint(args.engine, overrides, args.entrypoint)
    placement = {} if args.entrypoint_num_gpus is None else {"entrypoint_num_gpus": args.entrypoint_num_gpus}
    job_id = _call(
        address,
        lambda: client.submit_job(
            entrypoint=entrypoint,
            runtime_env=runtime_env,
            submission_id=args.submission_id,
            metadata=metadata,
            **placement,
        ),
    )
    print(job_id, flush=True)
    from rewards.judges.redact import redact_url

    print(f"pasr: submitted to {address}: {redact_url(entrypoint)}", file=sys.stderr)
    if not args.follow:
        print(f"pasr: follow with `pasr jobs logs {job_id} --address {address} --follow`", file=sys.stderr)
        return 0
    return follow(client, job_id, address=address)
