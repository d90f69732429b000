"""A stand-in for ``python -m recipe train`` in tests/test_pasr_ab.py's scheduler tests: it starts
in milliseconds, logs ``--steps`` steps of ``--step-s`` each to ``metrics.jsonl`` as the local
trainer does, and stops the way it stops: on SIGINT it finishes the step in flight, checkpoints
it (``checkpoints/step_N``, ``checkpoints/latest``) and exits 130. A warm-up checkpoints its last
step; ``--fail`` exits 1 at once; ``--start-s`` sleeps first (a slow start). Each start and end
is appended to ``<run-dir>/../../order.log``."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--run-dir", required=True)
    p.add_argument("--kind", choices=("warmup", "arm"), required=True)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--step-s", type=float, default=0.2)
    p.add_argument("--fail", action="store_true")
    p.add_argument("--start-s", type=float, default=0.0, help="a slow start (model load, a fresh machine) first")
    args = p.parse_args()
    run = Path(args.run_dir)
    run.mkdir(parents=True, exist_ok=True)
    order = run.parents[1] / "order.log"

    def note(what: str) -> None:
        with open(order, "a") as f:
            f.write(f"{time.monotonic():.3f} {what} {run.parent.name}/{run.name}\n")

    note("start")
    if args.fail:
        note("end")
        return 1
    stop = []
    signal.signal(signal.SIGINT, lambda *_: stop.append(True))

    def checkpoint(step: int) -> None:
        d = run / "checkpoints" / f"step_{step:06d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "trainer_state.json").write_text(json.dumps({"step": step}))
        (run / "checkpoints" / "latest").write_text(d.name)

    time.sleep(args.start_s)
    phase = "warmup" if args.kind == "warmup" else "pasr"
    timing = "timing_s/update" if phase == "warmup" else "timing_s/step"  # as the local trainer logs them
    for step in range(1, args.steps + 1):
        time.sleep(args.step_s)
        with open(run / "metrics.jsonl", "a") as f:
            f.write(json.dumps({"step": step, "phase": phase, timing: args.step_s}) + "\n")
        if stop:
            checkpoint(step)
            note("end")
            return 130
    checkpoint(args.steps)
    note("end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
