"""``pasr submit`` and ``pasr jobs`` against a real Ray head started by this module.

The head runs on loopback with one CPU, a small object store, free ports and its own HOME, in
token-authentication mode (as a plain ``ray start`` picks when ``~/.ray/auth_token`` exists),
so the tests also show that the client finds the token without RAY_AUTH_MODE being set. It is
started once (``ray start --block`` in its own session) and stopped in the finalizer.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

REPO = Path(__file__).resolve().parents[1]
RAY_ENV = ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")


# --------------------------------------------------------------------------- pure helpers
def test_address_normalisation(monkeypatch):
    from pasr_cli import CliError
    from recipe.jobs import normalize_address

    for key in RAY_ENV:
        monkeypatch.delenv(key, raising=False)
    assert normalize_address("head") == "http://head:8265"
    assert normalize_address("http://10.0.0.1:8266/") == "http://10.0.0.1:8266"
    assert normalize_address("https://ray.example.com:443") == "https://ray.example.com:443"
    monkeypatch.setenv("RAY_API_SERVER_ADDRESS", "http://h:1")
    assert normalize_address(None) == "http://h:1"
    monkeypatch.delenv("RAY_API_SERVER_ADDRESS")
    with pytest.raises(CliError, match="no Ray address"):
        normalize_address(None)
    with pytest.raises(CliError, match="Ray Client address"):
        normalize_address("ray://head:10001")


def test_auth_token_sources(tmp_path):
    from recipe.jobs import auth_headers, auth_token

    home = tmp_path / "home"
    (home / ".ray").mkdir(parents=True)
    (home / ".ray" / "auth_token").write_text("fromhome\n")
    (tmp_path / "tok").write_text("frompath")
    assert auth_token({"HOME": str(home)}) == "fromhome"
    assert auth_token({"HOME": str(home), "RAY_AUTH_TOKEN_PATH": str(tmp_path / "tok")}) == "frompath"
    assert auth_token({"HOME": str(home), "RAY_AUTH_TOKEN": "fromenv"}) == "fromenv"
    assert auth_token({"HOME": str(home), "RAY_AUTH_MODE": "disabled"}) is None
    assert auth_token({"HOME": str(tmp_path / "nobody")}) is None
    assert auth_headers({"RAY_AUTH_TOKEN": "t"}) == {"Authorization": "Bearer t"}


def test_entrypoint_and_runtime_env(tmp_path, monkeypatch):
    from pasr_cli import CliError
    from recipe.submit import build_entrypoint, build_runtime_env

    assert build_entrypoint("verl", ["data.train_files=/d/a b.parquet", "trainer.nnodes=2"]) == (
        "python3 -m recipe.main_pasr 'data.train_files=/d/a b.parquet' trainer.nnodes=2"
    )
    assert build_entrypoint("local", ["--preset", "demo"]) == "python3 -m recipe train --preset demo"
    assert build_entrypoint("verl", [], entrypoint="python3 -c 'print(1)'") == "python3 -c 'print(1)'"
    env = build_runtime_env(tmp_path, ["WANDB_MODE=offline"])
    # ray job stop leaves the run 900 s to checkpoint after SIGTERM, unless --env says otherwise
    assert env["working_dir"] == str(tmp_path)
    assert env["env_vars"] == {"RAY_JOB_STOP_WAIT_TIME_S": "900", "WANDB_MODE": "offline"}
    assert build_runtime_env(tmp_path, ["RAY_JOB_STOP_WAIT_TIME_S=60"])["env_vars"] == {
        "RAY_JOB_STOP_WAIT_TIME_S": "60"
    }
    for pattern in ("/.git/", "runs/", "outputs/", "checkpoints/", "*.parquet", ".cache/"):
        assert pattern in env["excludes"]
    assert "/.bundle/" not in env["excludes"]
    (tmp_path / ".git" / "info").mkdir(parents=True)
    (tmp_path / ".git" / "info" / "exclude").write_text("# git's comment\n/.bundle/\n\n*.tmp\nruns/\n")
    excludes = build_runtime_env(tmp_path)["excludes"]
    # the clone's own ignore list, which Ray's upload does not read, once each
    assert excludes[-2:] == ["/.bundle/", "*.tmp"] and excludes.count("runs/") == 1
    monkeypatch.setenv("PASR_TEST_SECRET", "s3")
    assert build_runtime_env(tmp_path, ["PASR_TEST_SECRET"])["env_vars"]["PASR_TEST_SECRET"] == "s3"
    monkeypatch.delenv("PASR_TEST_UNSET", raising=False)
    with pytest.raises(CliError, match="not set in this environment"):
        build_runtime_env(tmp_path, ["PASR_TEST_UNSET"])


def test_stop_says_what_it_stopped():
    """``pasr jobs stop`` names the job, its status, its entrypoint without the judge URL's
    credentials, and how long Ray leaves it to checkpoint (the job's own stop wait, else Ray's 3 s)."""
    from recipe.jobs import stop_message

    info = SimpleNamespace(
        status="RUNNING",
        entrypoint="pasr judge serve -- python3 -m recipe.main_pasr pasr.judge.base_url=http://u:secret@j:8000/v1",
        runtime_env={"env_vars": {"RAY_JOB_STOP_WAIT_TIME_S": "900"}},
    )
    text = stop_message("raysubmit_1", info)
    first, second = text.splitlines()
    assert first.startswith("pasr: stopping job raysubmit_1 (RUNNING): pasr judge serve -- python3 -m recipe.main_pasr")
    assert "secret" not in text and "900 s after the signal" in second and "pasr jobs status raysubmit_1" in second
    bare = stop_message("raysubmit_2", SimpleNamespace(status="PENDING", entrypoint="x" * 300, runtime_env=None))
    assert "3 s after the signal" in bare and "x" * 158 not in bare


def test_an_evaluation_job_reserves_its_gpus(monkeypatch, capsys):
    """``--entrypoint-num-gpus N`` is Ray's ``entrypoint_num_gpus``: an evaluation with vLLM run as
    a job is placed on a node with N free GPUs, not run on the head beside the training; without it
    nothing is reserved, as ``ray job submit`` does; a negative or NaN count is refused in one line."""
    from pasr_cli import main
    from recipe import jobs

    asked = []

    class Client:
        def submit_job(self, **kwargs):
            asked.append(kwargs)
            return "raysubmit_eval"

    monkeypatch.setattr(jobs, "connect", lambda *a, **k: Client())
    evaluate = "python3 -m recipe eval --model /shared/ckpts/run --dataset math500 --backend vllm --out /shared/eval/r"
    base = ["submit", "--address", "http://127.0.0.1:1", "--working-dir", str(REPO), "--entrypoint", evaluate]
    assert main([*base, "--entrypoint-num-gpus", "1"]) == 0
    assert asked[-1]["entrypoint_num_gpus"] == 1 and asked[-1]["entrypoint"] == evaluate
    assert main(base) == 0 and "entrypoint_num_gpus" not in asked[-1]
    for bad in ("-1", "nan"):
        assert main([*base, "--entrypoint-num-gpus", bad]) == 2
        assert "--entrypoint-num-gpus" in capsys.readouterr().err
    assert len(asked) == 2


def test_the_verl_run_is_composed_and_checked_before_submitting():
    """The overrides are composed into the config the job will run: relative checkpoint or dump
    dirs (a resubmission would silently start from scratch) and bad keys are refused."""
    from pasr_cli import CliError
    from recipe.submit_checks import check_verl_run
    from recipe.verl_engine.config import required_gpus

    with pytest.raises(CliError, match=r"trainer.default_local_dir=checkpoints/pasr/pasr is relative"):
        check_verl_run([])
    with pytest.raises(CliError, match=r"trainer.default_local_dir=ckpt is relative"):
        check_verl_run(["trainer.default_local_dir=ckpt"])
    with pytest.raises(CliError, match=r"pasr_verl.rollout_dir=dumps is relative"):
        check_verl_run(["trainer.default_local_dir=/shared/ckpt", "pasr_verl.rollout_dir=dumps"])
    with pytest.raises(CliError, match=r"not make a valid config: Could not override 'pasr.tie_valu'"):
        check_verl_run(["trainer.default_local_dir=/shared/ckpt", "pasr.tie_valu=0"])
    config = check_verl_run(
        ["trainer.default_local_dir=/shared/ckpt", "trainer.nnodes=2", "++trainer.n_gpus_per_node=4"]
    )
    assert required_gpus(config) == (2, 4) and config.pasr_verl.rollout_dir == "/shared/ckpt/rollouts"
    assert required_gpus(check_verl_run(["trainer.default_local_dir=s3://b/ckpt", "pasr_verl.rollout_dir=null"])) == (
        1,
        8,
    )


def test_an_rrr_run_is_checked_as_its_preflight_would():
    """With method=rrr the RRR checks of the job's preflight (rrr_config) run before submitting:
    a setting the RRR rollout cannot work with is refused on one line that names it, instead of
    failing in the job once it has started; a valid RRR run passes."""
    from pasr_cli import CliError
    from recipe.submit_checks import check_verl_run

    ok = [
        "trainer.default_local_dir=/shared/ckpt",
        "method=rrr",
        "pasr.judge.kind=countdown",
        "data.max_prompt_length=2048",
    ]
    config = check_verl_run(ok)
    assert config.method == "rrr" and config.actor_rollout_ref.rollout.n == config.rrr.n_reflections == 4
    llm_judge = ["pasr.judge.kind=openai", "pasr.judge.base_url=http://judge:8000/v1", "pasr.judge.model=m"]
    refused = [
        (["actor_rollout_ref.rollout.n=3"], r"rollout.n=3 differs from rrr.n_reflections=4"),
        (["data.max_prompt_length=1024"], r"data.max_prompt_length=1024 cannot hold an RRR retry prompt"),
        (llm_judge, r"binary, exact judge.*pasr.judge.kind=openai"),
        (["rrr.n_reflections=0"], r"rrr.n_reflections must be >= 1, got 0"),
    ]
    for overrides, message in refused:
        with pytest.raises(CliError, match=r"^the overrides do not make a valid config: .*" + message) as err:
            check_verl_run([*ok, *overrides])
        assert "\n" not in str(err.value)
    # method=pasr: rollout.n follows pasr.n_refine and a 1024-token prompt is enough (RRR's rules
    # are not applied), but the rrr.* keys are still checked, as the preflight does
    assert check_verl_run([ok[0], "rrr.n_reflections=2"]).actor_rollout_ref.rollout.n == 8
    with pytest.raises(CliError, match=r"invalid config key rrr\.n_reflexions"):
        check_verl_run([ok[0], "+rrr.n_reflexions=2"])


def test_gpu_shortfall_is_per_node():
    from recipe.verl_engine.config import gpu_shortfall

    assert gpu_shortfall([8, 8], 2, 8) is None
    assert gpu_shortfall([8, 4, 4], 2, 8) is not None  # 16 GPUs in all, but one node of 8
    assert "has 0 GPU(s)" in gpu_shortfall([0], 1, 8)


def test_a_local_run_needs_an_absolute_run_dir(tmp_path):
    """The local engine's run directory is what `pasr train` would use (--resume, else --run-dir,
    else trainer.run_dir from the overrides, the --config file, the preset, the defaults): a
    relative one would be written inside the job's temporary copy of the working dir and lost,
    so it is refused on one line that says what to pass. A relative --config is read from the
    working dir, as the job would."""
    from pasr_cli import CliError
    from recipe.submit_checks import check_local_run

    (tmp_path / "c.yaml").write_text("trainer:\n  run_dir: from-file\n")
    refused = [
        ([], "runs/pasr-local"),
        (["--preset", "demo"], "runs/pasr-demo"),
        (["--preset", "demo", "trainer.steps=3", "trainer.run_dir=mine"], "mine"),
        (["--run-dir", "rel", "trainer.run_dir=/shared/r"], "rel"),
        (["--config", "c.yaml"], "from-file"),
        (["--resume", "runs/pasr-demo"], "runs/pasr-demo"),
        (["--run-dir", "~/runs/x"], "~/runs/x"),  # quoted in the entrypoint: no shell expands it
    ]
    for argv, run_dir in refused:
        with pytest.raises(CliError, match=rf"the run directory {run_dir} .*is relative.*absolute --run-dir") as err:
            check_local_run(argv, tmp_path)
        assert "\n" not in str(err.value)
    assert check_local_run(["--preset", "demo", "--run-dir", "/shared/runs/demo"], tmp_path) == "/shared/runs/demo"
    assert check_local_run(["--preset", "rrr", "trainer.run_dir=/shared/rrr"], tmp_path) == "/shared/rrr"
    assert check_local_run(["--config", "c.yaml", "--resume", "/shared/r"], tmp_path) == "/shared/r"
    (tmp_path / "abs.yaml").write_text("trainer:\n  run_dir: /shared/abs\n")
    assert check_local_run(["--config", str(tmp_path / "abs.yaml")], tmp_path) == "/shared/abs"
    with pytest.raises(CliError, match=r"unknown preset 'nope'"):
        check_local_run(["--preset", "nope"], tmp_path)
    with pytest.raises(CliError, match=r"--config missing.yaml: no such file in the working dir"):
        check_local_run(["--config", "missing.yaml"], tmp_path)
    with pytest.raises(CliError, match=r"unrecognized arguments: --bogus"):
        check_local_run(["--bogus", "trainer.run_dir=/shared/r"], tmp_path)


def test_a_local_submission_with_the_preset_run_dir_is_refused_before_connecting(monkeypatch, capsys):
    """`pasr submit --engine local -- --preset demo` used to go through and train into the job's
    temporary working dir; it stops before any request to the cluster."""
    from pasr_cli import main
    from recipe import jobs

    def no_cluster(*_args, **_kwargs):
        raise AssertionError("contacted the cluster")

    monkeypatch.setattr(jobs, "connect", no_cluster)
    code = main(
        [
            "submit",
            "--engine",
            "local",
            "--address",
            "http://127.0.0.1:1",
            "--working-dir",
            str(REPO),
            "--",
            "--preset",
            "demo",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("pasr submit: error: the run directory runs/pasr-demo ") and "trainer.run_dir=" in err


class FakeJobs:
    """The few JobSubmissionClient calls `pasr jobs status` makes, answering for one job."""

    def __init__(self, status: str, message: str):
        from ray.job_submission import JobStatus

        self.status, self.message = JobStatus(status), message

    def get_job_status(self, job_id):
        return self.status

    def get_job_info(self, job_id):
        return SimpleNamespace(message=self.message)


# Ray's JobInfo.message for a failed entrypoint (job_supervisor.py): a headline, then the log tail
FAILED_WITH_LOGS = "Job entrypoint command failed with exit code 1, last available logs (truncated to 20,000 chars):\n"


@pytest.mark.parametrize(
    "message, shown, absent",
    [
        (
            FAILED_WITH_LOGS + "Traceback (most recent call last):\nValueError: boom\n",
            [
                "Job entrypoint command failed with exit code 1",
                "Traceback (most recent call last):\nValueError: boom\n",
            ],
            ["left no logs"],
        ),
        (
            FAILED_WITH_LOGS + "\n  \n",
            ["Job entrypoint command failed with exit code 1; the job left no logs"],
            ["Traceback"],
        ),
        ("Job entrypoint command failed with exit code 1. No logs available.", ["No logs available."], []),
    ],
)
def test_status_of_a_failed_job_shows_its_logs_or_says_there_are_none(monkeypatch, capsys, message, shown, absent):
    """The status line used to end in Ray's "last available logs (...):" with the logs cut off
    (only the message's first line was printed); the tail follows it now, or the line says plainly
    that there is none. `--follow`'s final line, after the streamed logs, drops the dangling clause."""
    from pasr_cli import main
    from recipe import jobs

    fake = FakeJobs("FAILED", message)
    monkeypatch.setattr(jobs, "connect", lambda *_args, **_kwargs: fake)
    assert main(["jobs", "status", "raysubmit_1", "--address", "http://127.0.0.1:1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("raysubmit_1\tFAILED\tJob entrypoint command failed with exit code 1")
    assert "last available logs" not in out
    for text in shown:
        assert text in out
    for text in absent:
        assert text not in out
    assert not out.rstrip("\n").endswith(":")
    assert jobs.report_status(fake, "raysubmit_1", "FAILED") == 1
    final = capsys.readouterr().err
    assert final.startswith("pasr: job raysubmit_1 FAILED: Job entrypoint command failed with exit code 1")
    assert final.count("\n") == 1 and not final.rstrip().endswith(":")


class HeadGoesAway:
    """A JobSubmissionClient whose head dies while `--follow` streams: the log stream breaks off
    after a line, and every status request after it finds nothing at the address."""

    def __init__(self, stream_error: BaseException):
        self.stream_error, self.status_calls, self.entrypoint = stream_error, 0, None

    def submit_job(self, entrypoint, **_kwargs):
        self.entrypoint = entrypoint
        return "raysubmit_1"

    async def tail_job_logs(self, job_id):
        yield "pasr verl: step 1\n"
        raise self.stream_error

    def get_job_status(self, job_id):
        import requests

        self.status_calls += 1
        raise requests.exceptions.ConnectionError("HTTPConnectionPool(host='127.0.0.1', port=1): Max retries exceeded")


@pytest.mark.parametrize("stream_error", ["websocket", "aiohttp"])
def test_follow_that_loses_the_head_says_so_with_its_own_exit_code(monkeypatch, capsys, stream_error):
    """The head dying under `pasr submit --follow` was a traceback and exit 1, the code of a FAILED
    job, while the job could train on: one line now, exit 4 (in --help), saying how to find and stop it."""
    import aiohttp

    from pasr_cli import main
    from recipe import jobs

    error = (
        RuntimeError("WebSocket connection closed unexpectedly with close code 1006")
        if stream_error == "websocket"
        else aiohttp.ServerDisconnectedError()
    )
    fake = HeadGoesAway(error)
    monkeypatch.setattr(jobs, "connect", lambda *_args, **_kwargs: fake)
    monkeypatch.setattr(jobs, "HEAD_LOST_AFTER_S", 0.3)
    address = "http://127.0.0.1:1"
    argv = [
        "submit",
        "--address",
        address,
        "--working-dir",
        str(REPO),
        "--follow",
        "--entrypoint",
        "python3 train.py",
        "--",
        "pasr.judge.base_url=http://alice:Sw0rdfish99@judge:8000/v1",
    ]
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == jobs.EXIT_HEAD_LOST == 4 and "Traceback" not in err
    assert out == "raysubmit_1\npasr verl: step 1\n" and fake.status_calls >= 2  # asked again before giving up
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"pasr: lost the Ray head at {address} while following job raysubmit_1 (no answer for ")
    assert (
        f"`pasr jobs status raysubmit_1 --address {address}`" in last
        and f"`pasr jobs stop raysubmit_1 --address {address}`" in last
    )
    assert "Sw0rdfish99" in fake.entrypoint and "Sw0rdfish99" not in err  # the job gets the URL; the screen does not


def test_the_follow_exit_codes_are_in_the_help():
    import argparse

    from recipe import jobs, submit

    for build in (submit.build_parser, jobs.build_parser):
        parser = argparse.ArgumentParser()
        build(parser)
        text = (
            parser.format_help()
            if build is submit.build_parser
            else parser._subparsers._group_actions[0].choices["logs"].format_help()
        )
        assert "4 lost the Ray head" in " ".join(text.split()), text


# --------------------------------------------------------------------------- a silent address
@pytest.fixture
def silent_server():
    """127.0.0.1:PORT that accepts connections and never sends a byte."""
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held, stop = [], threading.Event()

    def accept():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join(timeout=5)
    for conn in held:
        conn.close()
    server.close()


@pytest.mark.parametrize(
    "argv", [["submit", "--entrypoint", "true"], ["jobs", "list"], ["jobs", "status", "raysubmit_x"]]
)
def test_an_address_that_never_answers_times_out(silent_server, argv):
    env = {k: v for k, v in os.environ.items() if k not in RAY_ENV}
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "recipe", *argv, "--address", silent_server, "--timeout", "1"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and not proc.stdout, proc.stderr[-2000:]
    assert f"the Ray dashboard at {silent_server} accepted the connection but did not answer within 1 s" in proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert time.monotonic() - start < 30


# --------------------------------------------------------------------------- a real head
def _free_ports(n: int) -> list[int]:
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


@pytest.fixture(scope="module")
def ray_head():
    tmp = Path(tempfile.mkdtemp(prefix="pasr-ray-", dir="/tmp"))  # short: Ray's socket paths
    home = tmp / "home"
    (home / ".ray").mkdir(parents=True)
    (home / ".ray" / "auth_token").write_text(uuid.uuid4().hex)
    gcs, dash, client, agent_http, agent_grpc, env_agent, metrics = _free_ports(7)
    env = {k: v for k, v in os.environ.items() if k not in RAY_ENV}
    env.update(HOME=str(home), RAY_AUTH_MODE="token")
    cmd = [
        "ray",
        "start",
        "--head",
        "--block",
        "--disable-usage-stats",
        "--node-ip-address=127.0.0.1",
        f"--port={gcs}",
        "--include-dashboard=true",
        "--dashboard-host=127.0.0.1",
        f"--dashboard-port={dash}",
        f"--ray-client-server-port={client}",
        f"--dashboard-agent-listen-port={agent_http}",
        f"--dashboard-agent-grpc-port={agent_grpc}",
        f"--runtime-env-agent-port={env_agent}",
        f"--metrics-export-port={metrics}",
        "--num-cpus=1",
        "--object-store-memory=100000000",
        f"--temp-dir={tmp / 'r'}",
    ]
    log_path = tmp / "head.log"
    log = log_path.open("w")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    address = f"http://127.0.0.1:{dash}"
    try:
        deadline = time.monotonic() + 150
        while True:
            if proc.poll() is not None:
                pytest.fail(f"ray start exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
            try:
                urllib.request.urlopen(address + "/api/version", timeout=2)
                break
            except urllib.error.HTTPError:  # 401: up, and asking for the token
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"the Ray dashboard did not come up in 150 s:\n{log_path.read_text()[-3000:]}")
                time.sleep(1)
        yield SimpleNamespace(address=address, home=home, tmp=tmp)
    finally:
        proc.terminate()  # `ray start --block` stops the node's processes on SIGTERM
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # whatever is left of the session we started
        except ProcessLookupError:
            pass
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def pasr(ray_head, monkeypatch, capsys):
    """Run the pasr CLI in-process as a user on the head's machine (HOME has the token, and
    RAY_AUTH_MODE is unset); returns (exit code, stdout, stderr)."""
    from pasr_cli import main

    for key in RAY_ENV:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HOME", str(ray_head.home))

    def _run(*argv):
        capsys.readouterr()
        code = main(list(argv))
        out = capsys.readouterr()
        return code, out.out, out.err

    return _run


def test_wrong_address_fails_early(pasr):
    port = _free_ports(1)[0]
    code, out, err = pasr("submit", "--address", f"http://127.0.0.1:{port}", "--entrypoint", "true")
    assert code == 2 and f"cannot reach the Ray dashboard at http://127.0.0.1:{port}" in err and not out


def test_missing_token_is_named(pasr, ray_head, monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    code, _, err = pasr("jobs", "list", "--address", ray_head.address)
    assert code == 2 and "requires a valid auth token" in err and "RAY_AUTH_TOKEN" in err


def test_gpu_check_for_the_verl_engine(pasr, ray_head):
    code, out, err = pasr(
        "submit",
        "--address",
        ray_head.address,
        "--",
        "trainer.n_gpus_per_node=4",
        "trainer.default_local_dir=/tmp/pasr-ckpt",
    )
    assert code == 2 and not out
    assert "needs 1 node(s) with 4 GPU(s)" in err and "has 0 GPU(s)" in err and "--no-gpu-check" in err


def test_submit_follow_runs_in_the_uploaded_repository(pasr, ray_head):
    probe = (
        'python3 -c "import os, recipe.pasr_config; '
        "print('PASR_OK', os.path.isdir('.git'), os.path.isfile('recipe/main_pasr.py'))\""
    )
    code, out, err = pasr(
        "submit",
        "--address",
        ray_head.address,
        "--working-dir",
        str(REPO),
        "--follow",
        "--no-gpu-check",
        "--submission-id",
        "pasr-probe-1",
        "--metadata-json",
        '{"team": "x"}',
        "--entrypoint",
        probe,
    )
    assert code == 0, err
    job_id = out.splitlines()[0]
    assert job_id == "pasr-probe-1"
    assert "PASR_OK False True" in out  # the code is there, .git is not
    assert f"job {job_id} SUCCEEDED" in err
    code, out, _ = pasr("jobs", "status", job_id, "--address", ray_head.address)
    assert code == 0 and out.startswith(f"{job_id}\tSUCCEEDED")
    code, out, _ = pasr("jobs", "logs", job_id, "--address", ray_head.address)
    assert code == 0 and "PASR_OK" in out


def test_follow_exits_with_the_jobs_failure(pasr, ray_head, tmp_path):
    (tmp_path / "fail.py").write_text("import sys\nprint('about to fail')\nsys.exit(7)\n")
    code, out, err = pasr(
        "submit",
        "--address",
        ray_head.address,
        "--engine",
        "local",
        "--working-dir",
        str(tmp_path),
        "--follow",
        "--entrypoint",
        "python3 fail.py",
    )
    assert code == 1 and "about to fail" in out and "FAILED" in err


def test_stop(pasr, ray_head, tmp_path):
    code, out, _ = pasr(
        "submit",
        "--address",
        ray_head.address,
        "--working-dir",
        str(tmp_path),
        "--no-gpu-check",
        "--entrypoint",
        "python3 -c 'import time; print(\"sleeping\", flush=True); time.sleep(300)'",
    )
    assert code == 0
    job_id = out.strip()
    code, out, err = pasr("jobs", "stop", job_id, "--address", ray_head.address, "--wait")
    assert code == 0 and out.strip() == f"{job_id}\tSTOPPED", err
    # it says what it stopped: the job, its status and entrypoint, and the job's time to checkpoint
    assert f"pasr: stopping job {job_id} (" in err and "python3 -c 'import time;" in err, err
    assert "SIGTERM sent" in err and "900 s after the signal (RAY_JOB_STOP_WAIT_TIME_S)" in err
    code, _, err = pasr("jobs", "logs", job_id, "--address", ray_head.address, "--follow")
    assert code == 3 and "STOPPED" in err
    code, _, err = pasr("jobs", "status", "raysubmit_doesnotexist", "--address", ray_head.address)
    assert code == 2 and "no job raysubmit_doesnotexist" in err


def test_a_relative_checkpoint_dir_is_refused_before_anything_is_submitted(pasr, ray_head):
    code, out, err = pasr("submit", "--address", ray_head.address, "--no-gpu-check", "--", "trainer.n_gpus_per_node=1")
    assert code == 2 and not out and err.count("\n") == 1
    assert "trainer.default_local_dir=checkpoints/pasr/pasr is relative" in err
    code, out, _ = pasr("jobs", "list", "--address", ray_head.address)
    assert "trainer.n_gpus_per_node=1" not in out


def test_the_real_entrypoint_checks_the_clusters_gpus_inside_the_job(pasr, ray_head):
    """`--no-gpu-check` lets the submission through; recipe.main_pasr itself then runs in the job,
    composes the config, joins the cluster through the job's RAY_ADDRESS, finds no GPU and stops
    with its one-line message (the job fails, so --follow exits 1)."""
    code, out, err = pasr(
        "submit",
        "--address",
        ray_head.address,
        "--working-dir",
        str(REPO),
        "--no-gpu-check",
        "--follow",
        "--",
        "trainer.n_gpus_per_node=2",
        "pasr_verl.check_judge=false",
        "trainer.default_local_dir=/tmp/pasr-ckpt",
    )
    assert code == 1, err
    assert "pasr verl: error: the config needs 1 node(s) with 2 GPU(s) each" in out
    assert "the Ray cluster at" in out and "has 0 GPU(s)" in out and "Traceback" not in out
