"""A stand-in for ``python3 -m recipe.main_pasr`` on a machine without a GPU, for
``tests/test_gpu_check.py``: it takes the same Hydra overrides, prints what verl's driver prints
where ``benchmarks.gpu_check`` reads it (the start-up marks, ``Resuming from``, verl's console
``step:N - key:value`` lines, with Ray's actor prefix) and keeps the checkpoint layout verl does
(``global_step_N/actor`` with ``fsdp_config.json`` and a ``huggingface/`` folder, here holding the
starting model's weights; ``latest_checkpointed_iteration.txt``).

Stopping goes through the recipe's real pieces: :class:`~recipe.verl_engine.stopping.DriverStopHandler`
on SIGTERM and :class:`~recipe.verl_engine.stopping.StopAwareLoader` around the step loop, with a
thread event where the real driver has its Ray actor; after a stop the last finished step is
checkpointed unless it is on disk, as ``PasrRayTrainer.fit`` does.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path

from recipe.verl_engine.config import wait_for_model
from recipe.verl_engine.stopping import DriverStopHandler, StopAwareLoader

PREFIX = "(PasrTaskRunner pid=4242)"
STEP_S = float(os.environ.get("FAKE_VERL_STEP_S", "0.4"))
START_S = float(os.environ.get("FAKE_VERL_START_S", "0"))  # a slow start-up (workers, vLLM) before the loop
ACC_REFINE = (0.5, 0.25, 0.75, 0.5)  # a sampled accuracy that wanders and does not trend


def main(argv: list[str]) -> int:
    cfg = dict(arg.split("=", 1) for arg in argv)
    ckpt = Path(cfg["trainer.default_local_dir"])
    total = int(cfg["trainer.total_training_steps"])
    save_freq = int(cfg["trainer.save_freq"])
    model = Path(cfg["actor_rollout_ref.model.path"])
    stop = threading.Event()
    if os.environ.get("FAKE_VERL_NO_STOP_HANDLER") != "1":  # 1: SIGTERM kills, as without the recipe's handler
        DriverStopHandler(lambda reason: stop.set()).install()

    print("Started a local Ray instance.", flush=True)
    if "GPU_CHECK_PROBE" in os.environ:  # what the check put in the driver's environment (--verl-env)
        print(f"GPU_CHECK_PROBE={os.environ['GPU_CHECK_PROBE']}", flush=True)
    print(f"{PREFIX} pasr verl: task runner on fakehost (pid 4242)", flush=True)
    wait_for_model(str(model), float(cfg.get("pasr_verl.wait_for_model_s", 0)))  # as the task runner does
    time.sleep(START_S)
    tracker = ckpt / "latest_checkpointed_iteration.txt"
    start = int(tracker.read_text()) if tracker.is_file() else 0
    print(
        f"{PREFIX} " + (f"Resuming from {ckpt}/global_step_{start}" if start else "Training from scratch"), flush=True
    )

    def save(step: int) -> None:
        actor = ckpt / f"global_step_{step}" / "actor"
        shutil.copytree(model, actor / "huggingface", dirs_exist_ok=True)
        (actor / "fsdp_config.json").write_text(json.dumps({"world_size": 1}))
        tracker.write_text(str(step))

    last = start
    for step in StopAwareLoader(range(start + 1, total + 1), stop.is_set):
        time.sleep(STEP_S)
        last = step
        print(
            f"{PREFIX} step:{step} - timing_s/gen:0.1 - timing_s/update_actor:0.2 - timing_s/step:{STEP_S}"
            f" - pasr/acc_refine:{ACC_REFINE[(step - 1) % len(ACC_REFINE)]} - pasr/format_pass_rate:1.0"
            f" - actor/lr:1e-06 - actor/kl_loss:0.001",
            flush=True,
        )
        if step == total or step % save_freq == 0:
            save(step)
    if stop.is_set():
        print(f"{PREFIX} pasr verl: SIGTERM received: stopping after step {last}", flush=True)
    if stop.is_set() and last > start and (not tracker.is_file() or int(tracker.read_text()) < last):
        save(last)
        print(f"{PREFIX} pasr verl: stopped after step {last}; checkpoint {ckpt}/global_step_{last}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
