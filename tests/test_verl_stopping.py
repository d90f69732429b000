"""SIGTERM on a verl driver reaches the trainer through Ray (issue 11.9), end to end on CPU.

A driver process (as ``python3 -m recipe.main_pasr`` is under ``ray job stop``) starts a fresh
local Ray, creates its task runner through :class:`recipe.verl_engine.stopping.PasrTaskRunnerLauncher`
(what ``run_ppo`` calls) and waits in ``ray.get`` while the runner "trains" and reads the stop flag
once per step, as ``StopAwareLoader`` does. The test sends the driver SIGTERM: the runner must see
it, finish, and the driver exit 0 with the runner's answer, not die with the signal.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

DRIVER = textwrap.dedent(
    """
    import sys, time
    import ray

    from recipe.verl_engine import stopping

    @ray.remote(num_cpus=1)
    class Runner:
        def set_stop_flag(self, flag):
            stopping.attach(flag)

        def run(self, marker):
            open(marker, "w").write("running")
            for step in range(1, 6000):
                time.sleep(0.05)  # a step
                reason = stopping.poll_stop_flag()
                if reason:
                    return f"stopped after step {step}: {reason}"
            return "never stopped"

    ray.init(address="local", num_cpus=2, include_dashboard=False, object_store_memory=100_000_000,
             _temp_dir=sys.argv[2], log_to_driver=False)
    runner = stopping.PasrTaskRunnerLauncher(Runner).remote()
    print("RESULT", ray.get(runner.run.remote(sys.argv[1])), flush=True)
    ray.shutdown()
    """
)


def test_sigterm_on_the_driver_stops_the_runner_after_its_step(tmp_path):
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    marker = tmp_path / "running"
    ray_tmp = tempfile.mkdtemp(prefix="pasr-stop-", dir="/tmp")  # short: Ray's socket paths
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(marker), ray_tmp],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 240
        while not marker.exists():
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the runner did not start"
            time.sleep(0.2)
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert proc.returncode == 0, err[-3000:]
    assert "RESULT stopped after step" in out and out.strip().endswith(": SIGTERM"), out
    assert "pasr verl: SIGTERM: finishing the current step, saving a checkpoint" in err
