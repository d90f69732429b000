"""``benchmarks.watched_run``: what a watched subprocess leaves on disk is enough to rebuild it."""

from __future__ import annotations

import signal
import sys
import time

from benchmarks.watched_run import WatchedRun

SCRIPT = """
import signal, sys, time
signal.signal(signal.SIGTERM, lambda *a: (print("got SIGTERM", flush=True), sys.exit(3)))
print("Started a local Ray instance.", flush=True)
for step in (1, 2):
    print(f"(PasrTaskRunner pid=1) step:{step} - timing_s/step:0.1 - pasr/acc_refine:np.float64(0.{step})", flush=True)
time.sleep(30)
"""


def test_load_gives_back_the_lines_steps_signals_and_exit_code(tmp_path):
    log = tmp_path / "run.log"
    run = WatchedRun("x", [sys.executable, "-c", SCRIPT], log).start()
    while len(run.steps) < 2:
        time.sleep(0.05)
    run.signal(signal.SIGTERM)
    assert run.wait(time.monotonic() + 20) == 3

    back = WatchedRun.load(log)
    assert back.lines == run.lines and back.steps == run.steps
    assert back.steps[2][1] == {"timing_s/step": 0.1, "pasr/acc_refine": 0.2}
    assert back.signals == [tuple(s) for s in run.signals] and back.signals[0][1:] == ("SIGTERM", 3)
    assert back.rc == 3 and back.cmd == run.cmd and back.grep("got SIGTERM")


def test_load_of_a_log_without_its_sidecar_knows_no_exit_code(tmp_path):
    log = tmp_path / "cut.log"
    log.write_text(
        "    1.5 Started a local Ray instance.\n   12.0 (P pid=1) step:1 - timing_s/step:2.5\n  13.0 half a li"
    )
    back = WatchedRun.load(log)
    assert back.rc is None and back.signals == []
    assert back.steps == {1: (12.0, {"timing_s/step": 2.5})} and back.lines[-1] == (13.0, "half a li")
