"""Stopping a verl run (issue 11.9) on CPU, without Ray: ``fit()`` ends after the step it is in
and checkpoints that step once, the stop-aware loader keeps its inner loader's state, the driver's
signal handler forwards one request and aborts on the second, and the Ray job stop-wait warning.
The same through a real driver on a local Ray: tests/test_verl_stopping.py."""

from __future__ import annotations

import os

import pytest

from tests.verl_compose import _compose
from tests.verl_scripted_rollout import verl_mods  # noqa: F401  (a fixture)


class FakeFit:
    """verl's fit() loop reduced to what stopping relies on (pinned in test_pinned_fit_throughput_and_loop):
    load, then per batch of self.train_dataloader a step that may checkpoint, log, global_steps += 1."""

    def __init__(self, stop_at_step=None, flag=None):
        self.stop_at_step, self.flag, self.steps = stop_at_step, flag, []

    def __call__(self, trainer):
        trainer._load_checkpoint()
        trainer.global_steps += 1
        for _epoch in range(2):
            for _batch in trainer.train_dataloader:
                self.steps.append(trainer.global_steps)
                if trainer.global_steps == self.stop_at_step:
                    self.flag.append("SIGTERM")  # the signal arrives mid-step
                if trainer.global_steps % trainer.config.trainer.save_freq == 0:
                    trainer._save_checkpoint()
                trainer.global_steps += 1


@pytest.mark.parametrize("save_freq,stop_at,saved", [(10, 3, [3]), (3, 3, [3]), (10, None, [10])])
def test_fit_stops_after_the_step_and_checkpoints_once(verl_mods, monkeypatch, save_freq, stop_at, saved):
    from torchdata.stateful_dataloader import StatefulDataLoader

    t_mod = verl_mods.trainer
    flag: list[str] = []
    monkeypatch.setattr(t_mod, "poll_stop_flag", lambda: flag[0] if flag else None)
    fake = FakeFit(stop_at, flag)
    monkeypatch.setattr(t_mod, "verl_fit", lambda: fake)
    monkeypatch.setattr(
        verl_mods.ray_trainer.RayPPOTrainer, "_load_checkpoint", lambda self: setattr(self, "global_steps", 1)
    )
    saves = []

    def save(self):
        saves.append((self.global_steps, self.train_dataloader.state_dict()["_num_yielded"]))

    monkeypatch.setattr(verl_mods.ray_trainer.RayPPOTrainer, "_save_checkpoint", save)
    trainer = object.__new__(t_mod.PasrRayTrainer)
    trainer.config = _compose([f"trainer.save_freq={save_freq}"])
    trainer.global_steps = 0
    trainer.train_dataloader = StatefulDataLoader(list(range(5)), batch_size=1)
    trainer.fit()
    if stop_at is None:
        assert fake.steps == list(range(2, 12)) and saves == [
            (10, 4)
        ]  # resumed at 1: two epochs of 5, verl's saves only
        return
    assert fake.steps == [2, 3]  # step 3 finished, step 4 never started
    # one checkpoint of step 3, whose dataloader state counts the 2 batches trained on
    assert saves == [(3, 2)] and [s for s, _ in saves] == saved
    assert trainer.global_steps == 4


def test_stop_without_a_new_step_saves_nothing(verl_mods, monkeypatch, capsys):
    t = object.__new__(verl_mods.trainer.PasrRayTrainer)
    t.config = _compose()
    t.global_steps, t._last_saved_step = 7, 6  # resumed from 6, stopped before step 7 ran
    monkeypatch.setattr(verl_mods.ray_trainer.RayPPOTrainer, "_save_checkpoint", lambda self: pytest.fail("saved"))
    assert t._checkpoint_on_stop() is None and "already saved" in capsys.readouterr().out
    t.config = _compose(["trainer.save_freq=-1"])
    t._last_saved_step = 2
    assert t._checkpoint_on_stop() is None and "trainer.save_freq <= 0" in capsys.readouterr().out


def test_stop_aware_loader_keeps_the_inner_loader_state():
    from torchdata.stateful_dataloader import StatefulDataLoader

    from recipe.verl_engine.stopping import StopAwareLoader

    stop = []
    inner = StatefulDataLoader(list(range(6)), batch_size=2)
    loader = StopAwareLoader(inner, lambda: bool(stop))
    got = []
    for batch in loader:
        got.append(batch.tolist())
        if len(got) == 2:
            stop.append(1)
    assert got == [[0, 1], [2, 3]] and len(loader) == 3
    assert loader.state_dict()["_num_yielded"] == 2
    assert list(loader) == [] and loader.state_dict()["_num_yielded"] == 2  # not restarted


def test_driver_stop_handler_forwards_one_request_then_aborts():
    import io
    import signal as sig

    from recipe.verl_engine.stopping import DriverStopHandler

    sent = []
    out = io.StringIO()
    before = sig.getsignal(sig.SIGTERM), sig.getsignal(sig.SIGINT)
    handler = DriverStopHandler(sent.append, out=out).install()
    try:
        os.kill(os.getpid(), sig.SIGTERM)
        assert handler.sent.wait(10)
        assert sent == ["SIGTERM"] and "SIGTERM: finishing the current step, saving a checkpoint" in out.getvalue()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), sig.SIGINT)
            import time

            time.sleep(1)  # the handler runs at the next bytecode boundary
        assert sent == ["SIGTERM"] and "SIGINT again: stopping now" in out.getvalue()
        assert (sig.getsignal(sig.SIGTERM), sig.getsignal(sig.SIGINT)) == before  # handlers given back
    finally:
        handler.uninstall()


def test_stop_wait_warning():
    from recipe.verl_engine.stopping import stop_wait_warning

    assert stop_wait_warning({}) is None
    job = {"RAY_JOB_CONFIG_JSON_ENV_VAR": "{}"}
    assert "RAY_JOB_STOP_WAIT_TIME_S" in stop_wait_warning(job)
    assert stop_wait_warning({**job, "RAY_JOB_STOP_WAIT_TIME_S": "900"}) is None
