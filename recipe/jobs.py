"""``pasr jobs``: status, logs and stop of Ray jobs submitted with ``pasr submit``.

    pasr jobs status raysubmit_XXXX --address http://HEAD:8265
    pasr jobs logs   raysubmit_XXXX --address http://HEAD:8265 [--follow]
    pasr jobs stop   raysubmit_XXXX --address http://HEAD:8265 [--wait]
    pasr jobs list   --address http://HEAD:8265

The address is the head's dashboard (Ray Jobs API), ``http://HEAD:8265`` by default port; it may
also come from ``RAY_API_SERVER_ADDRESS`` or an ``http(s)://`` ``RAY_ADDRESS``.

Authentication. Ray 2.60 protects the dashboard with a token when the cluster runs in token mode
(``RAY_AUTH_MODE=token``, or a plain ``ray start`` that found ``~/.ray/auth_token``), while a
client whose own ``RAY_AUTH_MODE`` is unset sends none. These commands therefore send a token
whenever one is available, whatever ``RAY_AUTH_MODE`` says (except ``disabled``):
``RAY_AUTH_TOKEN``, else the file ``RAY_AUTH_TOKEN_PATH``, else ``~/.ray/auth_token`` (what a head
started on this machine uses). A cluster without token mode ignores it. For a remote cluster in
token mode, copy its token (``ray get-auth-token`` on the head) into ``RAY_AUTH_TOKEN``.

``logs --follow`` (and ``pasr submit --follow``) exit with the job's outcome: 0 succeeded,
1 failed, 3 stopped; 4 when the dashboard stops answering while they follow (the head died or
is unreachable): the job's outcome is then unknown, so that is said in one line with how to find
the job (``pasr jobs status``/``list``) and stop it (``pasr jobs stop``) once the head answers
again, never a traceback and exit 1 ("failed") for a job that may still be training.

Every request to the dashboard is bounded by ``--timeout`` (Ray's SDK sets no limit, so an
address that accepts the connection and never answers, such as a wrong port behind a proxy
or a stopped head whose socket lingers, would hang the command with no output).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
import time
from pathlib import Path

from data.cli_errors import CliError

EXIT_BY_STATUS = {"SUCCEEDED": 0, "FAILED": 1, "STOPPED": 3}
EXIT_HEAD_LOST = 4  # --follow lost the dashboard: the job's outcome is unknown
FOLLOW_EXIT_CODES = "exit status: 0 succeeded, 1 failed, 3 stopped, 4 lost the Ray head (the job's outcome unknown)"
DEFAULT_PORT = 8265
DEFAULT_TIMEOUT_S = 30.0
# how long --follow keeps asking a dashboard that stopped answering (a head restarting) before it
# says it lost it
HEAD_LOST_AFTER_S = 60.0


# --------------------------------------------------------------------------- connection
def default_address(environ=None) -> str | None:
    environ = os.environ if environ is None else environ
    for key in ("RAY_API_SERVER_ADDRESS", "RAY_ADDRESS"):
        value = environ.get(key, "")
        if value.startswith(("http://", "https://")):
            return value
    return None


def normalize_address(address: str | None, environ=None) -> str:
    """``http://host:port`` of the dashboard (scheme and default port added, trailing / dropped)."""
    address = (address or default_address(environ) or "").strip()
    if not address:
        raise CliError(
            "no Ray address: pass --address http://HEAD:8265 (the head's dashboard) or set RAY_API_SERVER_ADDRESS"
        )
    if address.startswith("ray://"):
        raise CliError(f"{address} is a Ray Client address; pass the dashboard address, http://HEAD:{DEFAULT_PORT}")
    if "://" not in address:
        address = "http://" + address
    scheme, rest = address.split("://", 1)
    host = rest.rstrip("/")
    if ":" not in host.rsplit("]", 1)[-1]:
        host = f"{host}:{DEFAULT_PORT}"
    return f"{scheme}://{host}"


def auth_token(environ=None) -> str | None:
    """The Ray auth token to send, or None (see the module docstring for the order)."""
    environ = os.environ if environ is None else environ
    if environ.get("RAY_AUTH_MODE", "").lower() == "disabled":
        return None
    token = environ.get("RAY_AUTH_TOKEN", "").strip()
    if token:
        return token
    candidates = [
        environ.get("RAY_AUTH_TOKEN_PATH"),
        str(Path(environ.get("HOME") or Path.home()) / ".ray" / "auth_token"),
    ]
    for path in candidates:
        if path:
            try:
                token = Path(path).expanduser().read_text(encoding="utf-8").strip()
            except OSError:
                continue
            if token:
                return token
    return None


def auth_headers(environ=None) -> dict[str, str]:
    token = auth_token(environ)
    return {"Authorization": f"Bearer {token}"} if token else {}


def _auth_hint(address: str) -> str:
    return (
        f"the Ray dashboard at {address} requires a valid auth token (Ray token authentication): set "
        "RAY_AUTH_TOKEN to the cluster's token (`ray get-auth-token` on the head) or RAY_AUTH_TOKEN_PATH to a "
        "file holding it"
    )


def _no_answer(address: str, timeout_s: float | None = None) -> CliError:
    within = f"within {timeout_s:g} s" if timeout_s else "in time"
    return CliError(
        f"the Ray dashboard at {address} accepted the connection but did not answer {within}: is this the "
        f"dashboard port ({DEFAULT_PORT} by default) of a running head? (--timeout SECONDS waits longer)"
    )


def connect(address: str | None, timeout_s: float = DEFAULT_TIMEOUT_S):
    """A ``JobSubmissionClient`` for the dashboard at ``address`` whose every request is
    bounded by ``timeout_s`` (seconds without a byte, per request), or a one-line CliError."""
    address = normalize_address(address)
    if not timeout_s > 0:
        raise CliError(f"--timeout must be > 0 seconds, got {timeout_s:g}")
    import requests
    from ray.exceptions import AuthenticationError
    from ray.job_submission import JobSubmissionClient

    class BoundedJobSubmissionClient(JobSubmissionClient):
        # every SDK call, the version check in __init__ included, goes through _do_request
        def _do_request(self, method, endpoint, **kwargs):
            kwargs.setdefault("timeout", timeout_s)
            return super()._do_request(method, endpoint, **kwargs)

    try:
        client = BoundedJobSubmissionClient(address, headers=auth_headers())
    except AuthenticationError:
        raise CliError(_auth_hint(address)) from None
    except requests.exceptions.Timeout:
        raise _no_answer(address, timeout_s) from None
    except ConnectionError:
        raise CliError(
            f"cannot reach the Ray dashboard at {address}: is the head running, and is this its dashboard "
            f"port ({DEFAULT_PORT} by default, `ray start --head --dashboard-host=0.0.0.0`)?"
        ) from None
    except RuntimeError as exc:
        raise CliError(f"{address} does not answer like a Ray dashboard: {str(exc).splitlines()[0]}") from None
    return client


def _call(address: str, fn, *args):
    import requests
    from ray.exceptions import AuthenticationError

    try:
        return fn(*args)
    except AuthenticationError:
        raise CliError(_auth_hint(address)) from None
    except requests.exceptions.Timeout:
        raise _no_answer(address) from None
    except (RuntimeError, TypeError, ValueError) as exc:
        msg = (str(exc).splitlines() or [type(exc).__name__])[0]
        if "404" in msg or "does not exist" in msg:
            raise CliError(f"no job {args[0] if args else ''} on {address}") from None
        raise CliError(f"{address}: {msg}") from None


def cluster_node_gpus(address: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> list[float]:
    """GPUs of each alive node, from the dashboard's state API (``timeout_s`` bounds the request)."""
    from ray.exceptions import AuthenticationError
    from ray.util.state.api import StateApiClient
    from ray.util.state.common import ListApiOptions, StateResource

    try:
        client = StateApiClient(address=address, headers={"Content-Type": "application/json", **auth_headers()})
        options = ListApiOptions(detail=True, timeout=max(1, round(timeout_s)))  # the state API takes whole seconds
        nodes = client.list(StateResource.NODES, options=options, raise_on_missing_output=False)
    except AuthenticationError:
        raise CliError(_auth_hint(address)) from None
    except Exception as exc:  # the jobs API answered, so this is a state-API problem worth naming
        raise CliError(
            f"cannot list the nodes of {address} for the GPU check ({exc}); --no-gpu-check skips it"
        ) from None
    gpus = []
    for node in nodes:
        node = node if isinstance(node, dict) else node.__dict__
        if str(node.get("state", "ALIVE")).upper() == "ALIVE":
            gpus.append(float((node.get("resources_total") or {}).get("GPU", 0)))
    return gpus


# --------------------------------------------------------------------------- follow
class HeadLost(Exception):
    """The dashboard stopped answering while a job was followed."""


def _unreachable_errors() -> tuple[type[BaseException], ...]:
    """What the job SDK raises when the dashboard does not answer: requests' connection errors
    and timeouts (status calls), aiohttp's and OSError (the log stream), RuntimeError (the SDK's
    wrapping of a failed request, e.g. HTTP 5xx from a dashboard whose head is going down)."""
    import aiohttp
    import requests

    return (
        requests.exceptions.ConnectionError,
        requests.exceptions.Timeout,
        aiohttp.ClientError,
        OSError,
        RuntimeError,
    )


def follow(client, job_id: str, out=None, poll_s: float = 0.5, address: str | None = None) -> int:
    """Stream a job's logs until it ends; returns the exit code for its final status, or
    :data:`EXIT_HEAD_LOST` after one line saying so when the dashboard stops answering."""
    out = out or sys.stdout

    async def _tail() -> None:
        async for chunk in client.tail_job_logs(job_id):
            out.write(chunk)
            out.flush()

    settle_s: float | None = 30.0  # the stream closes when the job ends; its status follows
    try:
        asyncio.run(_tail())
    except _unreachable_errors() as exc:  # the log stream broke off: keep polling the status instead
        why = (str(exc).splitlines() or [type(exc).__name__])[0]
        print(f"pasr: log stream ended early ({why}); waiting for the job", file=sys.stderr)
        settle_s = None
    try:
        status = wait_terminal(client, job_id, poll_s=poll_s, timeout_s=settle_s, lost_after_s=HEAD_LOST_AFTER_S)
    except HeadLost as exc:
        where = f" --address {address}" if address else ""
        print(
            f"pasr: lost the Ray head{f' at {address}' if address else ''} while following job {job_id} ({exc}): "
            f"its outcome is unknown and it may still be running; once the head answers, see it with "
            f"`pasr jobs status {job_id}{where}` (or `pasr jobs list{where}`) and stop it with "
            f"`pasr jobs stop {job_id}{where}`",
            file=sys.stderr,
        )
        return EXIT_HEAD_LOST
    return report_status(client, job_id, status)


def wait_terminal(
    client, job_id: str, poll_s: float = 0.5, timeout_s: float | None = None, lost_after_s: float | None = None
) -> str:
    """The job's status once terminal (or once ``timeout_s`` has passed). With ``lost_after_s``,
    a dashboard that answers no status query for that long is :class:`HeadLost`."""
    start = time.monotonic()
    unanswered_since = None
    while True:
        try:
            status = client.get_job_status(job_id)
        except _unreachable_errors() as exc:
            if lost_after_s is None:
                raise
            now = time.monotonic()
            unanswered_since = now if unanswered_since is None else unanswered_since
            if now - unanswered_since >= lost_after_s:
                raise HeadLost(f"no answer for {now - unanswered_since:.0f} s: {type(exc).__name__}") from None
            time.sleep(poll_s)
            continue
        unanswered_since = None
        if status.is_terminal() or (timeout_s is not None and time.monotonic() - start > timeout_s):
            return str(status.value if hasattr(status, "value") else status)
        time.sleep(poll_s)


# Ray's JobInfo.message for a failed entrypoint: "Job entrypoint command failed with exit code
# N, last available logs (truncated to 20,000 chars):" then the last lines of the logs (Ray's
# job_supervisor.py); the clause announces what follows on the next lines.
_LOGS_FOLLOW = re.compile(r",?\s*last available logs(?: \([^)]*\))?:\s*$")


def split_message(message: str | None) -> tuple[str, str, bool]:
    """(headline, the lines after it, whether those are the job's logs) of a job's status
    message. Printing only the first line left Ray's headline announcing logs that never came:
    the headline comes back without that clause, and says plainly when the tail it announced
    is empty. Other messages (a runtime env that failed to set up, say) keep their lines."""
    headline, _, rest = (message or "").strip().partition("\n")
    rest = rest.strip("\n")
    if not _LOGS_FOLLOW.search(headline):
        return headline, rest, False
    headline = _LOGS_FOLLOW.sub("", headline)
    if not rest.strip():
        return headline + "; the job left no logs", "", False
    return headline, rest, True


def report_status(client, job_id: str, status: str) -> int:
    """The job's final line after ``--follow`` (its logs were streamed above it)."""
    message = ""
    try:
        message = split_message(client.get_job_info(job_id).message)[0]
    except Exception:  # status is what matters; the message is a courtesy
        pass
    print(f"pasr: job {job_id} {status}" + (f": {message}" if message else ""), file=sys.stderr)
    return EXIT_BY_STATUS.get(status, 1)


STOP_WAIT_ENV = "RAY_JOB_STOP_WAIT_TIME_S"
RAY_STOP_WAIT_S = "3"  # Ray's own default of STOP_WAIT_ENV


def stop_message(job_id: str, info) -> str:
    """What ``pasr jobs stop`` stopped (the job's status when asked and its entrypoint, without
    credentials) and what comes next: SIGTERM, and Ray's SIGKILL after the job's
    ``RAY_JOB_STOP_WAIT_TIME_S`` (``pasr submit`` sets 900 s: time for a step and a checkpoint)."""
    from rewards.judges.redact import redact_url

    entrypoint = " ".join(redact_url(getattr(info, "entrypoint", None) or "").split())
    if len(entrypoint) > 160:
        entrypoint = entrypoint[:157] + "..."
    env = ((getattr(info, "runtime_env", None) or {}).get("env_vars") or {}) if info is not None else {}
    wait_s = str(env.get(STOP_WAIT_ENV, RAY_STOP_WAIT_S))
    status = getattr(info, "status", None)
    return (
        f"pasr: stopping job {job_id} ({status}): {entrypoint or 'entrypoint unknown'}\n"
        f"pasr: SIGTERM sent: a PASR training run finishes its step, saves a checkpoint and exits; Ray kills "
        f"the job {wait_s} s after the signal ({STOP_WAIT_ENV}); `pasr jobs status {job_id}` says when it "
        "has STOPPED (or stop with --wait)"
    )


# --------------------------------------------------------------------------- CLI
def add_address_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--address",
        default=None,
        metavar="URL",
        help=f"the Ray head's dashboard, e.g. http://HEAD:{DEFAULT_PORT} (default: $RAY_API_SERVER_ADDRESS)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help=f"give up on a dashboard request that gets no answer for this long (default {DEFAULT_TIMEOUT_S:g})",
    )


def build_parser(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="jobs_command", metavar="ACTION")
    sub.required = True
    st = sub.add_parser("status", help="print a job's status and message")
    lg = sub.add_parser("logs", help="print a job's logs (--follow: stream them until the job ends)")
    lg.add_argument("--follow", "-f", action="store_true", help=f"stream until the job ends; {FOLLOW_EXIT_CODES}")
    sp = sub.add_parser("stop", help="ask a job to stop")
    sp.add_argument("--wait", action="store_true", help="wait until the job has stopped")
    ls = sub.add_parser("list", help="list the cluster's jobs")
    for p in (st, lg, sp):
        p.add_argument("job_id", metavar="ID", help="the job's submission id (printed by pasr submit)")
    for p in (st, lg, sp, ls):
        add_address_arg(p)


def quiet_ray_logs() -> None:
    """Ray's job SDK logs every packaging step at INFO on stderr; keep warnings only."""
    import logging

    for name in (
        "ray.dashboard.modules.dashboard_sdk",
        "ray._private.runtime_env.packaging",
        "ray.dashboard.modules.job.sdk",
    ):
        logging.getLogger(name).setLevel(logging.WARNING)


def run(args) -> int:
    address = normalize_address(args.address)
    cmd = args.jobs_command
    if cmd != "list" and not args.job_id.strip():
        raise CliError("empty job id")
    quiet_ray_logs()
    client = connect(address, args.timeout)
    if cmd == "list":
        jobs = _call(address, client.list_jobs)
        from rewards.judges.redact import redact_url

        for job in sorted(jobs, key=lambda j: j.start_time or 0):
            print(f"{job.submission_id or job.job_id}\t{job.status}\t{redact_url(job.entrypoint or '')}")
        return 0
    job_id = args.job_id
    if cmd == "status":
        status = _call(address, client.get_job_status, job_id)
        info = _call(address, client.get_job_info, job_id)
        headline, rest, are_logs = split_message(info.message)
        print(f"{job_id}\t{status}" + (f"\t{headline}" if headline else ""))
        if are_logs:
            print(f"last lines of its logs (all of them: pasr jobs logs {job_id}):")
        if rest:
            print(rest)
        return 0
    if cmd == "logs":
        _call(address, client.get_job_status, job_id)  # a clear error for an unknown id
        if args.follow:
            return follow(client, job_id, address=address)
        sys.stdout.write(_call(address, client.get_job_logs, job_id))
        return 0
    if cmd == "stop":
        info = _call(address, client.get_job_info, job_id)  # what is stopped, said before it is
        stopped = _call(address, client.stop_job, job_id)
        if not stopped:
            status = _call(address, client.get_job_status, job_id)
            print(f"pasr: job {job_id} had already ended ({status})", file=sys.stderr)
            return 0
        print(stop_message(job_id, info), file=sys.stderr, flush=True)
        if args.wait:
            status = wait_terminal(client, job_id)
            print(f"{job_id}\t{status}")
        return 0
    raise CliError(f"unknown action {cmd}")
