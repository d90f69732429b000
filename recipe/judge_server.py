"""``pasr judge serve``: an LLM judge served by vLLM on GPUs of the Ray cluster, as part of the
training job.

    pasr judge serve --judge-model Qwen/Qwen2.5-14B-Instruct --judge-gpus 2 -- python3 -m recipe.main_pasr OVERRIDES
    pasr judge serve --judge-model Qwen/Qwen2.5-14B-Instruct --judge-gpus 2     # serve until stopped; prints the URL

A Ray actor that asks for ``--judge-gpus`` GPUs (``num_gpus=N``: Ray places it on a node with N
free GPUs and sets its ``CUDA_VISIBLE_DEVICES`` to them) runs ``vllm serve MODEL`` with tensor
parallelism N, and this process waits until ``/v1/models`` answers with the model. The command
after ``--`` (a training command that takes Hydra overrides) then runs with the judge appended:
``pasr.judge.base_url=http://NODE_IP:PORT/v1``, ``pasr.judge.model``, ``pasr.judge.kind=openai``
unless the command sets a kind, and ``trainer.n_gpus_per_node`` = the judge node's GPUs - N
unless the command sets it (more than that is refused before the judge loads); ``RAY_ADDRESS``
names the same cluster, so verl's trainer takes the remaining GPUs of it. When the command ends
the judge is stopped and this exits with the command's status. ``--serve-command`` replaces
``vllm serve`` (``{model}``, ``{port}``, ``{gpus}`` are filled in): the tests run
``benchmarks/fake_openai_server.py`` there.

Signals: while the command runs, SIGTERM and SIGINT are not forwarded to it. ``ray job stop``
(``pasr jobs stop``) signals every process of a job, and Ctrl-C every process of the terminal's
group, so the trainer already has the signal: it finishes its step, checkpoints and exits, and a
second signal would make it stop at once without a checkpoint. This process keeps the judge up
until then. While the judge is still loading, a signal stops it and exits.

The serve process dies with its actor: it gets SIGTERM when the actor's process exits
(``PR_SET_PDEATHSIG``), and Ray ends the actor when this process (its owner) ends, so a job
killed outright leaves no vLLM server holding GPUs.

The cluster: ``--address HOST:PORT`` (its GCS address, 6379 by default), else ``RAY_ADDRESS`` (a
Ray job's own), else the last ``ray start`` on this machine, else a new local Ray; an address
that is wrong, not one (a dashboard URL), or a cluster in token mode without its token is one
line within ``--connect-timeout`` (:mod:`recipe.ray_cluster`). Before anything starts, the flags
are checked (``--ready-timeout`` a finite number > 0: a negative one made Ray abort inside and
leave its agents behind) and so is the command (``shutil.which``: one that does not exist would
fail only after the judge loaded). Readiness is the judge this command started answering on its
port, not any server there (:mod:`recipe.judge_process`).

Why a Ray actor and not verl 0.9.1's own reward-model server (``reward.reward_model``:
``RewardModelManager`` in ``verl/experimental/reward_loop/reward_model.py``, vLLM replicas of verl's
rollout classes behind a router, optionally on a ``reward_pool`` of its own GPUs): that server
belongs to verl's reward loop, which creates it, puts it to sleep after start-up when
``free_cache_engine`` is set and wakes it to score; PASR switches that loop off and scores in its
rollout wrapper (``recipe/verl_engine/agent_loop.py``), so the server would be started by a loop
that never wakes it, and its router address exists only inside the task runner. The actor runs
the same ``vllm serve`` a user runs by hand, answers the same OpenAI API the judge client and
``pasr eval --judge-base-url`` use, and can be tested on a CPU with a fake server in its place.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from data.cli_errors import CliError
from recipe.judge_process import PROBE_INTERVAL_S, JudgeProcess
from recipe.ray_cluster import DEFAULT_CONNECT_TIMEOUT_S, DEFAULT_GCS_PORT, connect_ray, timeout_problem

DEFAULT_SERVE_COMMAND = (
    "vllm serve {model} --host 0.0.0.0 --port {port} --served-model-name {model} "
    "--tensor-parallel-size {gpus} --distributed-executor-backend mp --gpu-memory-utilization 0.9"
)
DEFAULT_READY_TIMEOUT_S = 1800.0  # a 14B judge loads in minutes; a first download can take longer
JUDGE_KEYS = ("pasr.judge.base_url", "pasr.judge.model")  # set by this command, never by the wrapped one


@dataclass
class ServedJudge:
    """A judge this process started: where it answers and what it holds."""

    model: str
    gpus: int
    base_url: str
    node_ip: str
    node_gpus: int
    gpu_ids: list[str]
    log: str
    actor: Any = field(repr=False, default=None)

    def stop(self) -> None:
        import ray

        if self.actor is None:
            return
        try:
            ray.get(self.actor.stop.remote(), timeout=60)
        except Exception:  # the actor is gone already: its serve process got SIGTERM with it
            pass
        ray.kill(self.actor)
        self.actor = None


def _say(message: str) -> None:
    print(f"pasr judge: {message}", file=sys.stderr, flush=True)


def cluster_nodes() -> dict[str, tuple[str, int]]:
    """``{node id: (address, GPUs)}`` of the connected cluster's alive nodes; the address is the
    one Ray's nodes reach each other at."""
    import ray

    return {
        n["NodeID"]: (str(n.get("NodeManagerAddress")), int(n.get("Resources", {}).get("GPU", 0)))
        for n in ray.nodes()
        if n.get("Alive")
    }


def node_gpus() -> dict[str, int]:
    """GPUs of each alive node of the connected cluster, by node id."""
    return {node: gpus for node, (_, gpus) in cluster_nodes().items()}


def serve_judge(
    model: str,
    gpus: int,
    *,
    serve_command: str = DEFAULT_SERVE_COMMAND,
    port: int = 0,
    ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S,
    log: str | None = None,
    say=_say,
) -> ServedJudge:
    """Start the judge on ``gpus`` GPUs of the connected Ray cluster and wait until it serves
    ``model``; a :class:`CliError` (the judge stopped) when it cannot."""
    import ray

    if why := timeout_problem("--ready-timeout", ready_timeout_s):
        raise CliError(why)  # before any actor: Ray aborts inside on a negative timeout

    sizes = node_gpus()
    if not any(n >= gpus for n in sizes.values()):
        have = ", ".join(str(n) for n in sizes.values()) or "no nodes"
        raise CliError(f"the judge needs {gpus} GPU(s) on one node but the Ray cluster's nodes have {have} GPU(s)")
    from ray.exceptions import GetTimeoutError, RayError

    actor = ray.remote(JudgeProcess).options(num_gpus=gpus).remote(serve_command, model, gpus, port, log)
    judge = ServedJudge(model, gpus, "", "", 0, [], log or "", actor)
    try:
        try:
            started = ray.get(actor.start.remote(), timeout=ready_timeout_s)
        except GetTimeoutError:
            raise CliError(
                f"no node of the Ray cluster had {gpus} free GPU(s) for the judge within {ready_timeout_s:.0f} s "
                "(another job holds them?); --ready-timeout waits longer"
            ) from None
        except RayError as exc:
            raise CliError(f"the judge's Ray actor failed: {str(exc).strip().splitlines()[0]}") from None
        if "problem" in started:
            raise CliError(started["problem"])
        judge.node_ip, judge.node_gpus = cluster_nodes()[started["node_id"]]
        judge.gpu_ids, judge.log = started["gpu_ids"], started["log"]
        judge.base_url = f"http://{judge.node_ip}:{started['port']}/v1"
        say(f"starting {model} on GPU(s) {','.join(judge.gpu_ids) or '-'} of {judge.node_ip} (log: {judge.log} there)")
        t0 = last = time.monotonic()
        while True:
            try:
                state, why = ray.get(actor.probe.remote(model))
            except RayError as exc:
                raise CliError(f"the judge's Ray actor failed: {str(exc).strip().splitlines()[0]}") from None
            if state == "ready":
                say(f"{model} answers at {judge.base_url} after {time.monotonic() - t0:.0f} s")
                return judge
            if state == "failed":
                raise CliError(f"the judge {model} did not start: {why} (log: {judge.log} on {judge.node_ip})")
            if time.monotonic() - t0 > ready_timeout_s:
                raise CliError(
                    f"the judge {model} did not answer at {judge.base_url}/models within {ready_timeout_s:.0f} s "
                    f"(log: {judge.log} on {judge.node_ip}); --ready-timeout waits longer"
                )
            if time.monotonic() - last >= 60:
                say(f"waiting for {model} to load ({time.monotonic() - t0:.0f} s)")
                last = time.monotonic()
            time.sleep(PROBE_INTERVAL_S)
    except BaseException:
        judge.stop()
        raise


# --------------------------------------------------------------------------- the wrapped command
def _set_keys(args: list[str]) -> dict[str, str]:
    """``{key: value}`` of the ``key=value`` overrides in a command line (``+``/``++`` dropped)."""
    out = {}
    for arg in args:
        key, sep, value = arg.partition("=")
        if sep and key and not key.startswith("-"):
            out[key.lstrip("+")] = value
    return out


def training_gpus_problem(args: list[str], gpus: int, node_gpu_count: int) -> str | None:
    """Why the command's ``trainer.n_gpus_per_node`` does not fit beside a ``gpus``-GPU judge on a
    node of ``node_gpu_count`` GPUs, or None."""
    rest = node_gpu_count - gpus
    if rest <= 0:
        return f"the judge takes {gpus} of the node's {node_gpu_count} GPU(s): none is left to train on"
    value = _set_keys(args).get("trainer.n_gpus_per_node")
    if value is None:
        return None
    try:
        asked = int(value)
    except ValueError:
        return None  # Hydra refuses it in the command itself
    if asked > rest:
        return (
            f"trainer.n_gpus_per_node={asked} but the judge takes {gpus} of the node's {node_gpu_count} GPU(s): "
            f"at most {rest} are left to train on (drop the override to get {rest})"
        )
    return None


def judge_overrides(args: list[str], judge: ServedJudge) -> list[str]:
    """The overrides appended to the command: the judge's address and model, the ``openai``
    kind unless the command sets one, and the training GPUs unless the command sets them."""
    keys = _set_keys(args)
    taken = [k for k in JUDGE_KEYS if k in keys]
    if taken:
        raise CliError(f"the command sets {', '.join(taken)}: pasr judge serve sets it to the judge it starts; drop it")
    extra = [f"pasr.judge.base_url={judge.base_url}", f"pasr.judge.model={judge.model}"]
    if "pasr.judge.kind" not in keys:
        extra.append("pasr.judge.kind=openai")
    if "trainer.n_gpus_per_node" not in keys:
        extra.append(f"trainer.n_gpus_per_node={judge.node_gpus - judge.gpus}")
    return extra


def _gcs_address() -> str:
    import ray

    return ray.get_runtime_context().gcs_address


def run_with_judge(command: list[str], judge: ServedJudge, ray_address: str | None = None) -> int:
    """Run ``command`` with the judge's overrides and the cluster's address (``ray_address``,
    ``--address``, else ``RAY_ADDRESS``, else the one joined); its exit status. SIGTERM/SIGINT
    are left to the command (see the module docstring)."""
    argv = [*command, *judge_overrides(command, judge)]
    env = {**os.environ, "RAY_ADDRESS": ray_address or os.environ.get("RAY_ADDRESS") or _gcs_address()}
    env.setdefault("OPENAI_API_KEY", "EMPTY")  # vllm serve takes any key unless started with --api-key
    _say("running " + " ".join(shlex.quote(a) for a in argv))
    proc = subprocess.Popen(argv, env=env)
    previous = {sig: signal.signal(sig, lambda *_: None) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        return proc.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


# --------------------------------------------------------------------------- CLI
def build_parser(serve: argparse.ArgumentParser) -> None:
    """The options of ``pasr judge serve`` (``pasr_cli`` makes the ``judge`` group)."""
    serve.description = (
        "Start `vllm serve MODEL` in a Ray actor holding --judge-gpus GPUs, wait until it answers, then run the "
        "command after -- with pasr.judge.base_url/model (and kind=openai, trainer.n_gpus_per_node = the node's "
        "GPUs minus the judge's, unless set) appended, and stop the judge when it ends. Without a command: serve "
        "until interrupted. The Ray cluster: --address, else RAY_ADDRESS, else the last `ray start` on this "
        "machine, else a new local one. A cluster with Ray token authentication (RAY_AUTH_MODE=token on the head) "
        "needs its token here: RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token (it is sent whenever one "
        "is found: RAY_AUTH_MODE=token is set unless RAY_AUTH_MODE is)."
    )
    serve.usage = "pasr judge serve --judge-model NAME --judge-gpus N [options] [-- COMMAND...]"
    serve.add_argument(
        "--judge-model", metavar="NAME", help="the judge model (hub name or folder), also its served name"
    )
    serve.add_argument(
        "--judge-gpus",
        type=int,
        metavar="N",
        help="GPUs for the judge (its tensor-parallel size); 2 for a 14B judge in bf16",
    )
    serve.add_argument(
        "--address",
        metavar="HOST:PORT",
        help=f"the Ray cluster's GCS address, {DEFAULT_GCS_PORT} by default (what `ray start --address` takes; "
        "not the dashboard's http://HEAD:8265); default: RAY_ADDRESS",
    )
    serve.add_argument(
        "--connect-timeout",
        type=float,
        default=DEFAULT_CONNECT_TIMEOUT_S,
        metavar="SECONDS",
        help=f"how long joining the Ray cluster may take (default {DEFAULT_CONNECT_TIMEOUT_S:.0f})",
    )
    serve.add_argument(
        "--port", type=int, default=0, metavar="PORT", help="port on the judge's node (default: a free one)"
    )
    serve.add_argument(
        "--log", metavar="FILE", help="the serve process's log, on the judge's node (default: a temp file there)"
    )
    serve.add_argument(
        "--ready-timeout",
        type=float,
        default=DEFAULT_READY_TIMEOUT_S,
        metavar="SECONDS",
        help=f"how long to wait for the judge to answer (default {DEFAULT_READY_TIMEOUT_S:.0f})",
    )
    serve.add_argument(
        "--serve-command",
        default=DEFAULT_SERVE_COMMAND,
        metavar="TEMPLATE",
        help="the serve command, {model}/{port}/{gpus} filled in (default: vllm serve with tensor parallelism {gpus})",
    )
    serve.add_argument(
        "train_command",
        nargs=argparse.REMAINDER,
        metavar="COMMAND",
        help="after --: the training command (it takes Hydra overrides)",
    )  # named train_command, not "command": that is pasr_cli's own dest


def run(args) -> int:
    command = list(args.train_command or [])
    if command and command[0] == "--":
        command = command[1:]
    if not args.judge_model:
        raise CliError("--judge-model NAME is required: the model to serve")
    if not args.judge_gpus or args.judge_gpus < 1:
        raise CliError("--judge-gpus N is required (N >= 1): the GPUs the judge takes, its tensor-parallel size")
    for flag, value in (("--ready-timeout", args.ready_timeout), ("--connect-timeout", args.connect_timeout)):
        if why := timeout_problem(flag, value):
            raise CliError(why)
    if not 0 <= args.port <= 65535:
        raise CliError(f"--port must be a port number (1-65535, or 0 for a free one), got {args.port}")
    try:
        args.serve_command.format(model="m", port=0, gpus=1)
    except (KeyError, IndexError, ValueError) as exc:
        raise CliError(f"--serve-command: only {{model}}, {{port}} and {{gpus}} can be filled in ({exc!r})") from None
    if command and shutil.which(command[0]) is None:
        raise CliError(
            f"the command {command[0]!r} after -- is not found (not on PATH, or not an executable file); "
            "nothing was started"
        )
    connect_ray(args.address, args.connect_timeout)
    if command:
        biggest = max(node_gpus().values(), default=0)
        why = training_gpus_problem(command, args.judge_gpus, biggest) if biggest >= args.judge_gpus else None
        if why:
            raise CliError(why)
    stopping: list[int] = []

    def interrupt(sig, _frame):
        stopping.append(sig)
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGINT)}
    judge = None
    try:
        judge = serve_judge(
            args.judge_model,
            args.judge_gpus,
            serve_command=args.serve_command,
            port=args.port,
            ready_timeout_s=args.ready_timeout,
            log=args.log,
        )
        if not command:
            print(judge.base_url, flush=True)
            _say("serving until interrupted (Ctrl-C or SIGTERM stops it)")
            while True:
                time.sleep(3600)
        why = training_gpus_problem(command, judge.gpus, judge.node_gpus)
        if why:
            raise CliError(why)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        return run_with_judge(command, judge, args.address)
    except KeyboardInterrupt:
        if not stopping and not command:
            return 130
        return 128 + (stopping[0] if stopping else signal.SIGINT)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if judge is not None:
            _say(f"stopping {judge.model} at {judge.base_url}")
            judge.stop()
