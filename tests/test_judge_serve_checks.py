"""``pasr judge serve`` before anything starts (issues 63 and 64): its flags, its command and the
Ray address are checked in seconds with one line each, a cluster in token mode without its token
is named, and the judge is ready only when the server on its port is the one it started
(recipe/judge_server.py, recipe/ray_cluster.py, recipe/judge_process.py). No Ray is started here:
the address checks fail before ``ray.init``, and ``ray.init`` is replaced where its errors are
the point."""

from __future__ import annotations

import socket
import sys
import threading
import time

import pytest

from benchmarks.fake_openai_server import FakeOpenAIServer
from pasr_cli import main as pasr_main
from recipe.judge_process import JudgeProcess, free_port

SLEEPER = f'{sys.executable} -c "import time; time.sleep(30)"'  # a serve command that never serves


@pytest.fixture(autouse=True)
def ray_env_restored(monkeypatch):
    """`judge serve` sets RAY_AUTH_MODE (a token found) and Ray's GCS wait for its own process and
    what it runs: called in-process here, the next test module's Ray head must not inherit them."""
    for key in ("RAY_AUTH_MODE", "RAY_gcs_server_port_wait_time_s"):
        monkeypatch.setenv(key, "")  # records the value before (or its absence) for the undo,
        monkeypatch.delenv(key)  # which restores it whatever the test's code set meanwhile


@pytest.fixture
def no_ray(monkeypatch):
    """Ray is neither joined nor started: joining it fails the test (every check comes first)."""
    import recipe.judge_server as judge_server

    def joined(*_a, **_k):
        raise AssertionError("pasr judge serve joined a Ray cluster before its flags and command were checked")

    monkeypatch.setattr(judge_server, "connect_ray", joined)


def _serve(capsys, *argv):
    capsys.readouterr()
    rc = pasr_main(["judge", "serve", "--judge-model", "m", "--judge-gpus", "1", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--ready-timeout", "-1"], "--ready-timeout must be a number of seconds > 0"),  # aborted inside Ray before
        (["--ready-timeout", "nan"], "--ready-timeout must be a number of seconds > 0"),
        (["--ready-timeout", "inf"], "--ready-timeout must be a number of seconds > 0"),
        (["--ready-timeout", "1e300"], "and at most 1000000, got 1e+300"),
        (["--connect-timeout", "0"], "--connect-timeout must be a number of seconds > 0"),
        (["--port", "-1"], "--port must be a port number"),
        (["--", "no-such-trainer-7f3a", "a=1"], "the command 'no-such-trainer-7f3a' after -- is not found"),
    ],
)
def test_bad_flags_and_a_missing_command_are_one_line_before_ray(no_ray, capsys, argv, message):
    rc, out, err = _serve(capsys, *argv)
    assert rc == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("pasr judge: error: ") and message in err, err


def test_serve_judge_refuses_a_bad_ready_timeout_before_any_actor():
    from data.cli_errors import CliError
    from recipe.judge_server import serve_judge

    with pytest.raises(CliError, match="--ready-timeout must be a number of seconds > 0 and at most 1000000, got -5"):
        serve_judge("m", 1, ready_timeout_s=-5)  # no Ray here: it is refused before any call to it


@pytest.fixture
def bare_ray(monkeypatch):
    """Ray not joined in this process, no RAY_ADDRESS, no token to send (the environment stays)."""
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        pytest.skip("a Ray is joined in this process already")
    import recipe.ray_cluster as ray_cluster

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(ray_cluster, "_token_available", lambda: False)
    monkeypatch.setattr(ray_cluster, "_last_ray_start", lambda: None)

    def init(**_kw):
        raise AssertionError("ray.init was called for an address that should have been refused")

    monkeypatch.setattr(ray, "init", init)
    return ray


class _SilentServer:
    """Accepts connections and never says a byte (a proxy's wrong port, a hung process)."""

    def __enter__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def _accept(self):
        try:
            while True:
                self.held.append(self.sock.accept()[0])
        except OSError:
            pass

    def __exit__(self, *exc):
        self.sock.close()
        for conn in self.held:
            conn.close()


@pytest.mark.parametrize(
    "address, message",
    [
        ("http://head:8265", "--address http://head:8265 is a URL (the Ray dashboard's"),
        ("not an address", "--address 'not an address' is not a Ray cluster address: give HOST:PORT"),
        ("head", "e.g. head:6379"),
        ("head:99999", "is not a Ray cluster address"),
        ("CLOSED", "cannot join the Ray cluster at 127.0.0.1:PORT (--address): cannot connect to 127.0.0.1:PORT"),
        ("HTTP", "answers HTTP/1 (a web server: the Ray dashboard's port?), not as Ray's GCS"),
        ("SILENT", "accepted the connection but did not answer as Ray's GCS (gRPC) does"),
    ],
)
def test_a_wrong_address_is_one_line_in_seconds(bare_ray, capsys, address, message):
    """Ray's own ray.init to a closed port retried for 3.5 minutes printing warnings; a
    dashboard URL or a web server's port hung the same way."""
    with FakeOpenAIServer() as web, _SilentServer() as silent:
        port = {"CLOSED": free_port(), "HTTP": web.port, "SILENT": silent.port}.get(address)
        if port is not None:
            address, message = f"127.0.0.1:{port}", message.replace("PORT", str(port))
        t0 = time.monotonic()
        rc, out, err = _serve(capsys, "--address", address, "--connect-timeout", "2")
    assert rc == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err, err
    assert message in err, err
    assert time.monotonic() - t0 < 10


def test_ray_address_from_the_environment_is_named(bare_ray, monkeypatch, capsys):
    port = free_port()
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{port}")
    rc, _, err = _serve(capsys, "--connect-timeout", "2")
    assert rc == 2 and f"cannot join the Ray cluster at 127.0.0.1:{port} (RAY_ADDRESS)" in err, err


@pytest.mark.parametrize("failure", ["auth", "connection"])
def test_a_cluster_that_wants_a_token_is_one_line_with_the_auth_note(bare_ray, monkeypatch, capsys, failure):
    """Without the token, ray.init raises AuthenticationError (RAY_AUTH_MODE=token) or, after 20 s
    of warnings, a bare ConnectionError (RAY_AUTH_MODE unset): both were tracebacks."""
    from ray.exceptions import AuthenticationError

    def init(**_kw):
        if failure == "auth":
            raise AuthenticationError("Token authentication is enabled but no authentication token was found")
        raise ConnectionError("Failed to connect to Ray cluster at 10.0.0.1:6379")

    monkeypatch.setattr(bare_ray, "init", init)
    rc, out, err = _serve(capsys)
    assert rc == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err, err
    assert "RAY_AUTH_MODE=token" in err and "RAY_AUTH_TOKEN" in err and "ray get-auth-token" in err


def test_a_token_found_is_sent(bare_ray, monkeypatch):
    """As pasr jobs does: a token that is available is sent (RAY_AUTH_MODE=token for this process
    and the command it runs), unless RAY_AUTH_MODE says otherwise."""
    import os

    import recipe.ray_cluster as ray_cluster

    joined = []
    monkeypatch.setattr(bare_ray, "init", lambda **kw: joined.append(kw))
    monkeypatch.setattr(ray_cluster, "_token_available", lambda: True)
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    ray_cluster.connect_ray(None, 2)
    assert os.environ["RAY_AUTH_MODE"] == "token" and joined
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    ray_cluster.connect_ray(None, 2)
    assert os.environ["RAY_AUTH_MODE"] == "disabled"


def test_the_judge_is_ready_only_on_a_server_it_started():
    """The serve command is still loading (it has not bound its port) when another server that
    serves the same model name takes the port: that server is not the judge."""
    judge = JudgeProcess(SLEEPER, "fake-judge", 1, port=free_port())
    assert judge.launch() is None
    try:
        with FakeOpenAIServer(port=judge.port):  # "fake-judge" at the judge's port, not the judge's process
            state, why = judge.probe("fake-judge")
        assert state == "failed" and "answers, but not from the serve command this judge started" in why, why
    finally:
        judge.stop(grace_s=5)
    real = JudgeProcess(
        f"{sys.executable} -m benchmarks.fake_openai_server --latency-ms 0 --port {{port}}", "fake-judge", 1
    )
    assert real.launch() is None
    try:
        deadline = time.monotonic() + 60
        while (state := real.probe("fake-judge"))[0] == "starting" and time.monotonic() < deadline:
            time.sleep(0.3)
        assert state == ("ready", "")  # its own server: ready
    finally:
        real.stop(grace_s=5)


def test_a_port_in_use_is_refused_before_the_serve_process_starts():
    with FakeOpenAIServer() as other:
        judge = JudgeProcess(SLEEPER, "fake-judge", 1, port=other.port)
        why = judge.launch()
    assert judge.proc is None and why and f"port {other.port} on this node is in use already" in why
    assert "pick another --port, or 0 for a free one" in why


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for sock in socks:
        sock.bind(("127.0.0.1", 0))
    ports = [sock.getsockname()[1] for sock in socks]
    for sock in socks:
        sock.close()
    return ports


@pytest.mark.slow
def test_a_real_head_in_token_mode(tmp_path):
    """A real ``ray start --head`` in token mode: without the token, one line naming it after the
    connect timeout (was a traceback after 20 s of warnings); with the token in ~/.ray and
    RAY_AUTH_MODE unset, the cluster is joined (it then has no GPU for the judge: that line)."""
    import os
    import shutil
    import signal
    import subprocess
    import tempfile
    import uuid
    from pathlib import Path

    if shutil.which("ray") is None:
        pytest.skip("no ray command")
    root = Path(tempfile.mkdtemp(prefix="pasr-rt-", dir="/tmp"))  # short: Ray's socket paths
    home, bare = root / "home", root / "bare"
    (home / ".ray").mkdir(parents=True)
    bare.mkdir()
    (home / ".ray" / "auth_token").write_text(uuid.uuid4().hex)
    gcs, client, agent_http, agent_grpc, env_agent, metrics = _free_ports(6)
    ray_env = ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")
    env = {k: v for k, v in os.environ.items() if k not in ray_env}
    head = subprocess.Popen(
        [
            "ray",
            "start",
            "--head",
            "--block",
            "--disable-usage-stats",
            "--node-ip-address=127.0.0.1",
            f"--port={gcs}",
            "--include-dashboard=false",
            f"--ray-client-server-port={client}",
            f"--dashboard-agent-listen-port={agent_http}",
            f"--dashboard-agent-grpc-port={agent_grpc}",
            f"--runtime-env-agent-port={env_agent}",
            f"--metrics-export-port={metrics}",
            "--num-cpus=1",
            "--object-store-memory=100000000",
            f"--temp-dir={root / 'r'}",
        ],
        env={**env, "HOME": str(home), "RAY_AUTH_MODE": "token"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 150
        while True:
            try:
                socket.create_connection(("127.0.0.1", gcs), timeout=1).close()
                break
            except OSError:
                assert head.poll() is None and time.monotonic() < deadline, "the Ray head did not start"
                time.sleep(1)
        argv = [sys.executable, "-m", "pasr_cli", "judge", "serve", "--judge-model", "m", "--judge-gpus", "1"]
        argv += ["--address", f"127.0.0.1:{gcs}", "--connect-timeout", "3"]
        t0 = time.monotonic()
        no_token = subprocess.run(argv, env={**env, "HOME": str(bare)}, capture_output=True, text=True, timeout=120)
        assert time.monotonic() - t0 < 60
        last = no_token.stderr.strip().splitlines()[-1]
        assert no_token.returncode == 2 and "Traceback" not in no_token.stderr, no_token.stderr
        assert last.startswith(f"pasr judge: error: cannot join the Ray cluster at 127.0.0.1:{gcs}")
        assert "RAY_AUTH_MODE=token" in last and "RAY_AUTH_TOKEN" in last
        joined = subprocess.run(argv, env={**env, "HOME": str(home)}, capture_output=True, text=True, timeout=120)
        assert joined.returncode == 2 and "the judge needs 1 GPU(s) on one node but" in joined.stderr, joined.stderr
    finally:
        head.terminate()  # `ray start --block` stops the node's processes on SIGTERM
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(head.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        shutil.rmtree(root, ignore_errors=True)
