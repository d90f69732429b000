"""The Ray actor's body of ``pasr judge serve`` (:mod:`recipe.judge_server`): one serve process
(``vllm serve``) on the GPUs Ray gave the actor, and whether the server answering on its port is
that process.

Readiness is "``/v1/models`` on the port serves the model" *and* "the listening socket belongs to
the process this actor started" (or one of its session: vLLM's API server, a wrapper's child).
Before, any server on the port that answered with the model's name made the judge ready: with
``--port 8000`` and an earlier judge still up there, the training command ran against a server
this command did not start (and that vLLM, still loading, then failed to bind). So the port must
be free when the serve process starts, and at readiness the socket's owner is read from
``/proc`` (Linux; where it cannot be read, the free port at start and the live process are what
is checked).
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess

PROBE_INTERVAL_S = 2.0


def _die_with_parent() -> None:  # pragma: no cover - runs in the forked child
    """In the serve process before exec: SIGTERM when the actor's process exits (Linux)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("", 0))
        return int(sock.getsockname()[1])


def port_taken(port: int) -> bool:
    """Whether something listens on ``port`` of this machine already (any address): binding the
    wildcard address as a server would then fail, as the serve process's bind would."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a closed socket's TIME_WAIT is no owner
        try:
            sock.bind(("", port))
        except OSError:
            return True
    return False


def _listening_inodes(port: int) -> set[int] | None:
    """The inodes of the TCP sockets listening on ``port`` (``/proc/net/tcp{,6}``), or None
    when ``/proc`` cannot be read."""
    inodes: set[int] = set()
    read_any = False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as fh:
                rows = fh.read().splitlines()[1:]
        except OSError:
            continue
        read_any = True
        for row in rows:
            fields = row.split()
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                inodes.add(int(fields[9]))
    return inodes if read_any else None


def _session_sockets(session: int) -> set[int]:
    """The socket inodes held by the processes of session ``session`` (the serve process started
    its own: its pid), read from ``/proc/PID/stat`` and ``/proc/PID/fd``."""
    inodes: set[int] = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()  # after "(comm)": state ppid pgrp session ...
            if int(fields[3]) != session:
                continue
            for fd in os.listdir(f"/proc/{pid}/fd"):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    inodes.add(int(link[8:-1]))
        except (OSError, IndexError, ValueError):
            continue
    return inodes


def owns_port(session: int, port: int) -> bool | None:
    """Whether a process of session ``session`` holds the socket listening on ``port``; None
    when that cannot be read (no ``/proc``, or nothing listens)."""
    listening = _listening_inodes(port)
    if not listening:
        return None
    return bool(listening & _session_sockets(session))


class JudgeProcess:
    """The Ray actor's body: one serve process on the GPUs Ray gave the actor. Its methods
    answer with plain values (an error is a string), so the caller prints one line, not a
    Ray traceback."""

    def __init__(self, serve_command: str, model: str, gpus: int, port: int = 0, log: str | None = None) -> None:
        import tempfile

        self.chosen_port = bool(port)
        self.port = int(port) or free_port()
        filled = serve_command.format(model=shlex.quote(model), port=self.port, gpus=gpus)
        self.command = shlex.split(filled)
        self.log = log or os.path.join(tempfile.gettempdir(), f"pasr-judge-{self.port}.log")
        self.proc: subprocess.Popen | None = None

    def launch(self, where: str = "this node") -> str | None:
        """Start the serve process; why it could not be started, or None."""
        if port_taken(self.port):
            how = "pick another --port, or 0 for a free one" if self.chosen_port else "try again"
            return (
                f"port {self.port} on {where} is in use already (another judge or server?): the judge would not "
                f"be the server answering there; stop that server or {how}"
            )
        try:
            os.makedirs(os.path.dirname(os.path.abspath(self.log)), exist_ok=True)
            log = open(self.log, "ab")
        except OSError as exc:
            return f"cannot write the judge's log {self.log} on {where}: {exc.strerror or exc}"
        try:
            self.proc = subprocess.Popen(
                self.command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        except OSError as exc:
            hint = " (pip install -e '.[gpu]' on every node installs vLLM)" if self.command[0] == "vllm" else ""
            return f"cannot run {self.command[0]!r} on {where}: {exc.strerror or exc}{hint}"
        finally:
            log.close()
        return None

    def start(self) -> dict:
        """Start the serve process; where it runs, or ``{"problem": ...}``."""
        import ray

        node_ip = ray.util.get_node_ip_address()  # for messages; the URL takes Ray's address of the node
        if problem := self.launch(node_ip):
            return {"problem": problem}
        assert self.proc is not None
        return {
            "node_id": ray.get_runtime_context().get_node_id(),
            "port": self.port,
            "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
            "log": self.log,
            "pid": self.proc.pid,
        }

    def _last_log_line(self) -> str:
        try:
            with open(self.log, "rb") as fh:
                fh.seek(max(0, os.path.getsize(self.log) - 4096))
                lines = [ln.strip() for ln in fh.read().decode("utf-8", "replace").splitlines() if ln.strip()]
        except OSError:
            return ""
        return lines[-1][:300] if lines else ""

    def probe(self, model: str) -> tuple[str, str]:
        """One look: ``("ready", "")``, ``("starting", "")``, or ``("failed", why)``. Ready only
        when the server answering on the port is the serve process's (:func:`owns_port`)."""
        import httpx

        assert self.proc is not None
        rc = self.proc.poll()
        if rc is not None:
            last = self._last_log_line()
            return "failed", f"the serve command exited with status {rc}" + (f"; its last line: {last}" if last else "")
        try:
            resp = httpx.get(f"http://127.0.0.1:{self.port}/v1/models", timeout=PROBE_INTERVAL_S)
        except httpx.HTTPError:
            return "starting", ""
        if resp.status_code != 200:
            return "starting", ""
        try:
            served = [str(m.get("id")) for m in resp.json().get("data", [])]
        except (ValueError, AttributeError):
            return "starting", ""
        if owns_port(self.proc.pid, self.port) is False:
            return "failed", (
                f"port {self.port} answers, but not from the serve command this judge started (pid {self.proc.pid}): "
                "another server took the port; stop it or pick another --port"
            )
        if model not in served:
            return "failed", f"the server answers but serves {', '.join(served) or 'no model'}, not {model}"
        return "ready", ""

    def stop(self, grace_s: float = 30.0) -> int | None:
        """SIGTERM to the serve process's group (vLLM's engine workers too), SIGKILL after
        ``grace_s``; its exit status."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                return self.proc.wait(wait)
            except subprocess.TimeoutExpired:
                continue
        return self.proc.poll()
