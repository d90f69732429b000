"""``pasr judge serve`` (recipe/judge_server.py) on a real local Ray with three stand-in GPUs
(``num_gpus=3``: Ray places and accounts GPU actors as on a GPU node), the fake OpenAI server of
benchmarks/fake_openai_server.py standing in for ``vllm serve``: the actor holds the judge's GPUs,
the command runs only once the judge answers and gets its address, the training GPUs are the
rest, and the judge is gone when the command ends. Failures are one line, before training."""

from __future__ import annotations

import json
import sys
from urllib.parse import urlsplit

import httpx
import pytest

from pasr_cli import main as pasr_main
from recipe.judge_server import ServedJudge, judge_overrides, training_gpus_problem

FAKE_SERVE = f"{sys.executable} -m benchmarks.fake_openai_server --latency-ms 0 --port {{port}}"
# the training command's stand-in: what it was given, and whether the judge answered it. The URL's
# host is Ray's address of the judge's node (what other nodes reach); the fake server binds
# loopback only, so the stand-in asks the URL's port there
CHILD = [
    sys.executable,
    "-c",
    "import json, os, sys, urllib.parse, urllib.request\n"
    "args = dict(a.split('=', 1) for a in sys.argv[1:])\n"
    "port = urllib.parse.urlsplit(args['pasr.judge.base_url']).port\n"
    "models = json.load(urllib.request.urlopen(f'http://127.0.0.1:{port}/v1/models', timeout=10))\n"
    "print('CHILD ' + json.dumps({'args': args, 'ray': os.environ.get('RAY_ADDRESS'), 'models': models}))\n"
    "sys.exit(int(args.get('exit', 0)))",
]


@pytest.fixture(scope="module")
def ray_node():
    """A local Ray with 3 GPUs declared: Ray places and accounts GPU actors as on a GPU node."""
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        ray.shutdown()
    mp = pytest.MonkeyPatch()
    mp.delenv("RAY_ADDRESS", raising=False)
    ray.init(num_cpus=2, num_gpus=3, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        yield ray
    finally:
        ray.shutdown()
        mp.undo()


def _gpus_free(ray, expected: float, within_s: float = 30.0) -> bool:
    """Whether the cluster's free GPUs reach ``expected`` (an ended actor frees them shortly after)."""
    import time

    deadline = time.monotonic() + within_s
    while ray.available_resources().get("GPU", 0) != expected:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


def _node_address(ray) -> str:
    [node] = [n for n in ray.nodes() if n["Alive"]]
    return node["NodeManagerAddress"]


def _serve(tmp_path, *command, gpus="2", serve=FAKE_SERVE):
    return pasr_main(
        [
            "judge",
            "serve",
            "--judge-model",
            "fake-judge",
            "--judge-gpus",
            gpus,
            "--serve-command",
            serve,
            "--log",
            str(tmp_path / "judge.log"),
            "--ready-timeout",
            "120",
            *(["--", *command] if command else []),
        ]
    )


def test_the_command_runs_with_the_served_judge_on_the_rest_of_the_gpus(ray_node, tmp_path, capfd):
    rc = _serve(tmp_path, *CHILD, "data.train_batch_size=6", "exit=3")
    out, err = capfd.readouterr()
    assert rc == 3, err  # the command's own status
    child = json.loads(next(line for line in out.splitlines() if line.startswith("CHILD "))[6:])
    args = child["args"]
    assert args["pasr.judge.model"] == "fake-judge" and args["pasr.judge.kind"] == "openai"
    url = urlsplit(args["pasr.judge.base_url"])
    assert (url.scheme, url.hostname, url.path) == ("http", _node_address(ray_node), "/v1") and url.port
    assert args["trainer.n_gpus_per_node"] == "1"  # 3 GPUs on the node, 2 held by the judge
    assert args["data.train_batch_size"] == "6"  # the command's own overrides kept, the judge's appended
    assert [m["id"] for m in child["models"]["data"]] == ["fake-judge"]  # it answered the command
    assert child["ray"] == ray_node.get_runtime_context().gcs_address  # the trainer joins the same cluster
    assert "starting fake-judge on GPU(s) " in err and f" of {url.hostname} " in err
    # the judge held two of the node's GPUs while it ran, and is gone now: its GPUs are free again
    assert _gpus_free(ray_node, 3)
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{url.port}/v1/models", timeout=2)


def test_the_actor_holds_the_judges_gpus_while_it_serves(ray_node):
    from recipe.judge_server import serve_judge

    judge = serve_judge("fake-judge", 2, serve_command=FAKE_SERVE, ready_timeout_s=120, say=lambda _m: None)
    try:
        assert len(judge.gpu_ids) == 2 and judge.node_gpus == 3 and judge.node_ip == _node_address(ray_node)
        assert ray_node.available_resources().get("GPU", 0) == 1
        port = urlsplit(judge.base_url).port
        assert httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=5).json()["data"][0]["id"] == "fake-judge"
    finally:
        judge.stop()
    assert _gpus_free(ray_node, 3)


def test_a_serve_command_that_dies_is_one_line_and_nothing_trains(ray_node, tmp_path, capfd):
    dying = f"{sys.executable} -c \"import sys; print('CUDA out of memory on GPU 0'); sys.exit(4)\""
    rc = _serve(tmp_path, *CHILD, serve=dying)
    out, err = capfd.readouterr()
    assert rc == 2 and "CHILD" not in out
    [line] = [ln for ln in err.splitlines() if "error" in ln]
    assert line.startswith(
        "pasr judge: error: the judge fake-judge did not start: the serve command exited with status 4"
    )
    assert "its last line: CUDA out of memory on GPU 0" in line and str(tmp_path / "judge.log") in line
    assert "Traceback" not in err


def test_a_judge_that_serves_another_model_is_refused(ray_node, tmp_path, capfd):
    rc = pasr_main(
        [
            "judge",
            "serve",
            "--judge-model",
            "Qwen/Qwen2.5-14B-Instruct",
            "--judge-gpus",
            "1",
            "--serve-command",
            FAKE_SERVE,
            "--ready-timeout",
            "120",
            "--",
            *CHILD,
        ]
    )
    out, err = capfd.readouterr()
    assert rc == 2 and "CHILD" not in out
    assert "serves fake-judge, not Qwen/Qwen2.5-14B-Instruct" in err and err.count("error") == 1


def test_a_server_it_did_not_start_is_not_the_judge(ray_node, tmp_path, capfd):
    """Another server on the judge's --port that serves the model's name: before, the judge was
    "ready" at once and the command ran against that server (the serve process, still loading,
    had not bound the port); now the port in use is refused before the serve process starts."""
    from benchmarks.fake_openai_server import FakeOpenAIServer

    sleeper = f'{sys.executable} -c "import time; time.sleep(60)"'
    with FakeOpenAIServer() as other:  # serves "fake-judge"
        rc = pasr_main(
            [
                "judge",
                "serve",
                "--judge-model",
                "fake-judge",
                "--judge-gpus",
                "1",
                "--port",
                str(other.port),
                "--serve-command",
                sleeper,
                "--ready-timeout",
                "60",
                "--",
                *CHILD,
            ]
        )
    out, err = capfd.readouterr()
    assert rc == 2 and "CHILD" not in out and "Traceback" not in err, err
    assert f"port {other.port} on " in err and "is in use already (another judge or server?)" in err
    assert _gpus_free(ray_node, 3)  # the judge's actor is gone


@pytest.mark.parametrize(
    "gpus, extra, message",
    [
        ("4", [], "the judge needs 4 GPU(s) on one node but the Ray cluster's nodes have 3 GPU(s)"),
        (
            "2",
            ["trainer.n_gpus_per_node=2"],
            "trainer.n_gpus_per_node=2 but the judge takes 2 of the node's 3 GPU(s): at most 1",
        ),
        ("3", [], "the judge takes 3 of the node's 3 GPU(s): none is left to train on"),
    ],
)
def test_gpus_that_do_not_fit_are_refused_before_the_judge_loads(ray_node, tmp_path, capfd, gpus, extra, message):
    rc = _serve(tmp_path, *CHILD, *extra, gpus=gpus)
    out, err = capfd.readouterr()
    assert rc == 2 and message in err and err.count("\n") == 1 and "CHILD" not in out
    assert not (tmp_path / "judge.log").exists()  # no serve process was started


def test_the_judges_overrides_leave_the_commands_own_settings():
    judge = ServedJudge("m", 2, "http://10.0.0.1:8000/v1", "10.0.0.1", 8, ["6", "7"], "/tmp/log")
    assert judge_overrides(["a=1"], judge) == [
        "pasr.judge.base_url=http://10.0.0.1:8000/v1",
        "pasr.judge.model=m",
        "pasr.judge.kind=openai",
        "trainer.n_gpus_per_node=6",
    ]
    assert judge_overrides(["pasr.judge.kind=hybrid", "trainer.n_gpus_per_node=4"], judge) == [
        "pasr.judge.base_url=http://10.0.0.1:8000/v1",
        "pasr.judge.model=m",
    ]
    from data.cli_errors import CliError

    with pytest.raises(CliError, match="the command sets pasr.judge.base_url"):
        judge_overrides(["+pasr.judge.base_url=http://x/v1"], judge)
    assert training_gpus_problem(["trainer.n_gpus_per_node=6"], 2, 8) is None
    assert "at most 6" in training_gpus_problem(["trainer.n_gpus_per_node=7"], 2, 8)


def test_missing_flags_are_one_line(capsys):
    assert pasr_main(["judge", "serve", "--judge-gpus", "2"]) == 2
    assert "--judge-model NAME is required" in capsys.readouterr().err
    assert pasr_main(["judge", "serve", "--judge-model", "m"]) == 2
    assert "--judge-gpus N is required" in capsys.readouterr().err
    assert (
        pasr_main(["judge", "serve", "--judge-model", "m", "--judge-gpus", "1", "--serve-command", "vllm {nope}"]) == 2
    )
    assert "--serve-command: only {model}, {port} and {gpus}" in capsys.readouterr().err


def test_pasr_submit_runs_the_training_under_pasr_judge_serve():
    """``pasr submit --judge-model M --judge-gpus N``: the job's entrypoint is pasr judge serve
    around the trainer, and the config checked before submitting is the one the job runs (the
    judge's URL, model and kind appended as the job appends them)."""
    import argparse
    import shlex

    from pasr_cli import build_parser
    from recipe.submit import build_parser as build_submit_parser
    from recipe.submit import job_additions, recipe_entrypoint

    parser = argparse.ArgumentParser()
    build_submit_parser(parser)
    args = parser.parse_args(
        [
            "--address",
            "http://h:8265",
            "--judge-model",
            "Qwen/Qwen2.5-14B-Instruct",
            "--judge-gpus",
            "2",
            "--",
            "trainer.default_local_dir=/ck/x",
            "data.train_batch_size=96",
        ]
    )
    overrides, prepare, checked = job_additions(args, args.overrides[1:])
    assert overrides == ["trainer.default_local_dir=/ck/x", "data.train_batch_size=96"] and prepare == []
    assert checked[2:] == [
        "pasr.judge.base_url=http://judge-node:8000/v1",
        "pasr.judge.model=Qwen/Qwen2.5-14B-Instruct",
        "pasr.judge.kind=openai",
    ]
    judge = ["--judge-model", "Qwen/Qwen2.5-14B-Instruct", "--judge-gpus", "2", "--log", "/ck/x/judge_vllm.log"]
    entry = recipe_entrypoint(overrides, prepare, judge)
    assert entry == (
        "python3 -m recipe judge serve --judge-model Qwen/Qwen2.5-14B-Instruct --judge-gpus 2 "
        "--log /ck/x/judge_vllm.log "
        "-- python3 -m recipe.main_pasr trainer.default_local_dir=/ck/x data.train_batch_size=96"
    )
    parsed = build_parser().parse_args(shlex.split(entry)[3:])  # what the job's pasr judge serve reads
    assert (parsed.judge_model, parsed.judge_gpus) == ("Qwen/Qwen2.5-14B-Instruct", 2)
    assert parsed.train_command[1:4] == ["python3", "-m", "recipe.main_pasr"]
