"""Joining a Ray cluster as a driver (``pasr judge serve``): the address checked, reached and
authenticated in seconds, or one line saying which and what to do.

``pasr submit`` and ``pasr jobs`` talk to the head's dashboard over HTTP (``http://HEAD:8265``,
:mod:`recipe.jobs`); ``pasr judge serve`` runs actors, so it joins the cluster itself, at its GCS
address ``HOST:PORT`` (6379 by default: what ``ray start --address`` and a Ray job's
``RAY_ADDRESS`` hold). Ray's own ``ray.init`` to a wrong address retries for minutes printing
warnings (3.5 min for a closed port here), and to a cluster in token mode without the token it
retries for 20 s and raises a bare ``ConnectionError``. So before ``ray.init``:

* the address's form is checked (a dashboard URL is named as one);
* a TCP connection is made within the connect timeout, and the server must answer the HTTP/2
  preface as gRPC does (Ray's GCS); a web server there (the dashboard's port) or silence is one
  line (skipped with ``RAY_USE_TLS``, whose handshake comes first);
* Ray's token authentication: a token is sent whenever one is available, as ``pasr jobs`` does
  (``RAY_AUTH_MODE=token`` is set for this process and what it runs, unless ``RAY_AUTH_MODE`` is
  set; a cluster without token mode ignores it), and a missing or refused token is one line
  naming ``RAY_AUTH_TOKEN`` / ``RAY_AUTH_TOKEN_PATH`` / ``~/.ray/auth_token``;
* ``ray.init``'s own retries are bounded by the connect timeout (``RAY_gcs_server_port_wait_time_s``
  for the call only).
"""

from __future__ import annotations

import math
import os
import re
import socket

from data.cli_errors import CliError

DEFAULT_GCS_PORT = 6379
DEFAULT_CONNECT_TIMEOUT_S = 15.0
_HOST_PORT = re.compile(r"^(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.\-]+):(?P<port>[0-9]{1,5})$")
# the client's HTTP/2 preface and an empty SETTINGS frame: a gRPC server answers with a SETTINGS frame
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
_H2_SETTINGS = 0x04
AUTH_NOTE = (
    "if the cluster uses Ray token authentication (RAY_AUTH_MODE=token on the head), export RAY_AUTH_MODE=token "
    "and its token: RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token (`ray get-auth-token` on the head)"
)


MAX_TIMEOUT_S = 1e6  # 11.6 days: Ray takes a timeout as int64 milliseconds, and more is a typo


def timeout_problem(flag: str, value: float) -> str | None:
    """Why ``value`` is not a timeout for ``flag`` (a number of seconds > 0, at most
    :data:`MAX_TIMEOUT_S`), or None. NaN, infinity and negatives are refused before Ray sees
    them: a negative ``ray.get`` timeout aborts the process inside Ray, leaving its agents."""
    if not (isinstance(value, (int, float)) and 0 < value <= MAX_TIMEOUT_S):  # False for NaN
        return f"{flag} must be a number of seconds > 0 and at most {MAX_TIMEOUT_S:.0f}, got {value}"
    return None


def split_address(address: str, source: str) -> tuple[str, int]:
    """``(host, port)`` of a ``[ray://]HOST:PORT`` cluster address, or a one-line CliError that
    names ``source`` (``--address`` or ``RAY_ADDRESS``) and the form it takes."""
    text = address.strip()
    if text.startswith(("http://", "https://")):
        raise CliError(
            f"{source} {address} is a URL (the Ray dashboard's, as pasr submit and pasr jobs take); pasr judge "
            f"serve joins the cluster at its GCS address HOST:PORT ({DEFAULT_GCS_PORT} by default, what "
            "`ray start --address` takes)"
        )
    match = _HOST_PORT.match(text.removeprefix("ray://"))
    port = int(match.group("port")) if match else 0
    if match is None or not 0 < port < 65536:
        hint = (
            f"{text}:{DEFAULT_GCS_PORT}" if re.fullmatch(r"[A-Za-z0-9_.\-]+", text) else f"10.0.0.1:{DEFAULT_GCS_PORT}"
        )
        raise CliError(
            f"{source} {address!r} is not a Ray cluster address: give HOST:PORT, the head's GCS port "
            f"({DEFAULT_GCS_PORT} by default), e.g. {hint}"
        )
    return match.group("host").strip("[]"), port


def reach_problem(host: str, port: int, timeout_s: float) -> str | None:
    """Why ``host:port`` is not a Ray GCS (or Ray Client) server one can reach in ``timeout_s``,
    or None: no TCP connection, or a server that does not answer HTTP/2 as gRPC does."""
    try:
        sock = socket.create_connection((host, port), timeout=timeout_s)
    except socket.gaierror as exc:
        return f"cannot resolve {host} ({exc.strerror or exc})"
    except TimeoutError:
        return f"nothing accepted a connection at {host}:{port} within {timeout_s:g} s"
    except OSError as exc:
        return f"cannot connect to {host}:{port} ({exc.strerror or exc})"
    if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
        sock.close()
        return None  # a TLS handshake comes before HTTP/2: the connection is all that can be checked
    try:
        sock.settimeout(min(timeout_s, 5.0))
        sock.sendall(_H2_PREFACE)
        head = sock.recv(9)
    except OSError:
        head = b""
    finally:
        sock.close()
    if len(head) >= 4 and head[3] == _H2_SETTINGS:
        return None
    if head.startswith(b"HTTP/"):
        return (
            f"{host}:{port} answers HTTP/1 (a web server: the Ray dashboard's port?), not as Ray's GCS "
            f"(port {DEFAULT_GCS_PORT} by default)"
        )
    return f"{host}:{port} accepted the connection but did not answer as Ray's GCS (gRPC) does"


def _last_ray_start() -> str | None:
    """The GCS address the last ``ray start`` on this machine wrote (what ``ray.init()`` joins with
    no address), or None. Ray's private helper: when it is not there, nothing is checked."""
    try:
        from ray._private.utils import read_ray_address

        return read_ray_address(None) or None
    except Exception:
        return None


def _token_available() -> bool:
    from recipe.jobs import auth_token

    return auth_token() is not None


def connect_ray(address: str | None = None, connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S) -> None:
    """Join the cluster at ``address`` (``--address``), else ``RAY_ADDRESS``, else one ``ray start``
    ran on this machine, else start a local one; a one-line :class:`CliError` when it cannot be
    joined within about ``connect_timeout_s``."""
    if "RAY_AUTH_MODE" not in os.environ and _token_available():
        # before Ray is imported: its auth mode is read once, at import
        os.environ["RAY_AUTH_MODE"] = "token"  # ignored by a cluster without token mode
    import ray

    if ray.is_initialized():
        return
    if why := timeout_problem("--connect-timeout", connect_timeout_s):
        raise CliError(why)
    source = "--address" if address else "RAY_ADDRESS"
    address = (address or os.environ.get("RAY_ADDRESS") or "").strip() or None
    target, source = (address, source) if address is not None else (_last_ray_start(), "the last `ray start` here")
    if target is not None and target not in ("auto", "local"):
        host, port = split_address(target, source)
        if why := reach_problem(host, port, connect_timeout_s):
            fix = (
                "`ray stop` forgets it"
                if address is None
                else f"give the head's HOST:PORT ({DEFAULT_GCS_PORT} by default)"
            )
            raise CliError(
                f"cannot join the Ray cluster at {target} ({source}): {why}; {fix}, or run this on a node of the "
                "cluster (--connect-timeout waits longer)"
            )
    from ray.exceptions import AuthenticationError

    wait_key = "RAY_gcs_server_port_wait_time_s"
    saved = os.environ.get(wait_key)
    if target not in (None, "local") and saved is None:
        os.environ[wait_key] = str(max(1, math.ceil(connect_timeout_s)))  # ray.init's GCS retries, one a second
    where = f"the Ray cluster at {address}" if address else "a Ray cluster"
    try:
        ray.init(address=address, log_to_driver=False, logging_level="ERROR")
    except AuthenticationError:
        raise CliError(f"{where} refused this process's Ray auth token or got none: {AUTH_NOTE}") from None
    except (ConnectionError, RuntimeError, ValueError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise CliError(f"cannot join {where}: {first}; {AUTH_NOTE}") from None
    finally:
        if saved is None:
            os.environ.pop(wait_key, None)
