"""dtype and thread choice by measurement (timings mocked: tests play any CPU or GPU), one rule
for training and pasr eval, the device choice (model.device), and the trainer honouring an
explicit override."""

from __future__ import annotations

import math

import pytest
import torch

from runtime import cpu_dtype
from runtime.cpu_dtype import DtypeChoice, choose_cpu_dtype, choose_threads, resolve_dtype


def _timer(fp32_s: float, bf16_s: float):
    return lambda dtype: {torch.float32: fp32_s, torch.bfloat16: bf16_s}[dtype]


def test_avx2_only_cpu_gets_float32():
    # the AVX2-only x86: 512x576 @ 576x1536 took 11 ms in fp32 and 729 ms in bf16
    choice = choose_cpu_dtype(_timer(0.011, 0.729))
    assert choice.dtype == "float32" and not choice.use_bf16
    assert choice.bf16_speedup == pytest.approx(0.011 / 0.729)
    assert "float32" in choice.describe() and "0.02x" in choice.describe()


def test_bf16_capable_cpu_gets_bfloat16():
    choice = choose_cpu_dtype(_timer(0.030, 0.012))  # AVX512-BF16 / AMX: 2.5x
    assert choice.dtype == "bfloat16" and choice.use_bf16 and choice.bf16_speedup == pytest.approx(2.5)


def test_marginal_bf16_gain_is_not_worth_the_precision():
    assert choose_cpu_dtype(_timer(0.012, 0.010)).dtype == "float32"  # 1.2x < MIN_SPEEDUP


def test_explicit_dtype_is_not_measured():
    def boom():
        raise AssertionError("an explicit dtype must not be measured")

    kept = resolve_dtype("float32", measure=boom)
    assert kept.dtype == "float32" and not kept.measured and math.isnan(kept.bf16_speedup)
    assert "forced" in kept.describe() and "nan" not in kept.describe()  # no "nanx the speed of fp32"
    fake = DtypeChoice("bfloat16", 2.0, "AVX512")
    assert resolve_dtype("auto", measure=lambda: fake) is fake
    assert resolve_dtype(None, measure=lambda: fake) is fake


def test_thread_choice():
    assert choose_threads(2, timer=lambda n: {1: 0.20, 2: 0.11}[n]) == 2  # idle cores: use them
    assert choose_threads(2, timer=lambda n: {1: 0.20, 2: 0.19}[n]) == 1  # a busy core: spin-waits
    assert choose_threads(1, timer=lambda n: 1 / 0) == 1  # nothing to measure


def test_thread_choice_sees_past_a_moment_of_contention():
    """Interleaved rounds, best of each: two contended many-thread probes do not decide the run,
    a core that stays busy still does."""

    def burst():  # one thread 0.20 s; all threads contended twice, then one clean reading
        many = iter([0.20, 0.19, 0.11, 0.19, 0.18])
        return lambda n: 0.20 if n == 1 else next(many)

    assert choose_threads(2, timer=burst()) == 2
    assert choose_threads(2, timer=burst(), rounds=1) == 1  # what a single probe would have chosen
    calls = []
    assert choose_threads(2, timer=lambda n: calls.append(n) or {1: 0.20, 2: 0.19}[n], rounds=3) == 1
    assert calls == [1, 2, 1, 2, 1, 2]  # in turn, so a burst hits both sides alike


def test_real_probe_runs_and_restores_threads():
    before = torch.get_num_threads()
    assert cpu_dtype.time_threads(1, shape=(8, 8, 8), reps=1) >= 0
    assert torch.get_num_threads() == before
    assert cpu_dtype.time_matmul(torch.bfloat16, shape=(8, 8, 8), reps=1) >= 0


@pytest.mark.parametrize(
    ("rollout_dtype", "autocast", "measured", "want_dtype", "want_autocast"),
    [
        ("auto", None, "float32", "float32", False),  # AVX2-only: fp32 everywhere
        ("auto", None, "bfloat16", "bfloat16", True),  # bf16-capable: both bf16
        ("float32", None, "bfloat16", "float32", True),  # explicit rollout dtype wins, update measured
        ("auto", False, "bfloat16", "bfloat16", False),  # explicit autocast wins
        ("bfloat16", True, "float32", "bfloat16", True),  # both explicit: the measurement is ignored
    ],
)
def test_trainer_resolves_dtypes(monkeypatch, tmp_path, rollout_dtype, autocast, measured, want_dtype, want_autocast):
    from recipe.local_engine.config import load_config
    from recipe.local_engine.trainer import LocalPasrTrainer

    monkeypatch.setattr(cpu_dtype, "measured_cpu_dtype", lambda: DtypeChoice(measured, 1.0, "TEST"))
    overrides = [f"model.rollout_dtype={rollout_dtype}"] + (
        [] if autocast is None else [f"algo.bf16_autocast={autocast}"]
    )
    cfg = load_config(overrides=overrides)
    trainer = LocalPasrTrainer(cfg, run_dir=tmp_path)
    trainer._choose_dtypes()
    assert trainer.rollout_dtype == want_dtype and trainer.algo.bf16_autocast is want_autocast
    assert cfg.algo.bf16_autocast is autocast  # the config (and config.yaml) keeps what was asked


def test_rollout_dtype_is_validated():
    from recipe.local_engine.config import load_config
    from recipe.pasr_config import ConfigError

    with pytest.raises(ConfigError, match="model.rollout_dtype"):
        load_config(overrides=["model.rollout_dtype=float16"])


# ---------------------------------------------------------------- device (model.device)


def test_resolve_device(monkeypatch):
    from runtime.model_loading import resolve_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == "cpu"
    with pytest.raises(ValueError, match="sees no GPU"):  # a clear error, not a traceback at the first tensor
        resolve_device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == "cuda"
    assert resolve_device("cpu") == "cpu"  # a named device is taken as is, GPU or not
    with pytest.raises(ValueError, match="device must be"):
        resolve_device("tpu")


def test_device_is_validated(monkeypatch):
    from recipe.local_engine.config import load_config
    from recipe.pasr_config import ConfigError

    with pytest.raises(ConfigError, match="model.device"):
        load_config(overrides=["model.device=tpu"])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError, match="model.device: device cuda asked for, but torch .* sees no GPU"):
        load_config(overrides=["model.device=cuda"])


@pytest.mark.parametrize(
    ("rollout_dtype", "autocast", "measured", "want_dtype", "want_autocast"),
    [
        ("auto", None, "bfloat16", "bfloat16", True),  # bf16 tensor cores: bf16 rollouts and update autocast
        ("auto", None, "float32", "float32", False),  # a GPU without them: fp32
        ("float32", False, "bfloat16", "float32", False),  # explicit settings still win
    ],
)
def test_auto_on_a_gpu_is_one_rule_for_training_and_eval(
    monkeypatch, tmp_path, rollout_dtype, autocast, measured, want_dtype, want_autocast
):
    """``auto`` on a GPU is measured there, by the same function for the trainer's rollouts and
    update and for pasr eval's hf backend (it was fp32 for training and bf16 for eval, unmeasured);
    threads left to auto keep torch's default there, in both. The CPU probe does not run."""
    from eval.backends import build_backend
    from recipe.local_engine.config import load_config
    from recipe.local_engine.trainer import LocalPasrTrainer

    def cpu_probe():
        raise AssertionError("the CPU matmul probe ran for a GPU run")

    monkeypatch.setattr(cpu_dtype, "measured_cpu_dtype", cpu_probe)
    monkeypatch.setattr(cpu_dtype, "measured_gpu_dtype", lambda: DtypeChoice(measured, 5.0, "TEST GPU", device="cuda"))
    monkeypatch.setattr(cpu_dtype, "set_threads", lambda n, *a: pytest.fail("threads set on a GPU left to auto"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # a GPU machine, played on the CPU
    overrides = ["model.device=cuda", f"model.rollout_dtype={rollout_dtype}"]
    overrides += [] if autocast is None else [f"algo.bf16_autocast={autocast}"]
    trainer = LocalPasrTrainer(load_config(overrides=overrides), run_dir=tmp_path)
    trainer._choose_dtypes()
    assert trainer.device == "cuda"
    assert trainer.rollout_dtype == want_dtype and trainer.algo.bf16_autocast is want_autocast
    if rollout_dtype == "auto":
        decided = build_backend("hf", "smollm2", device="auto").decide()
        assert decided == {"device": "cuda", "dtype": measured, "threads": None}  # training's choice


def test_the_gpu_probe_measures_the_gpu():
    """bf16 where a large bf16 matmul beats fp32 by MIN_SPEEDUP, fp32 where it does not or cannot run."""
    from runtime.cpu_dtype import GPU_MATMUL_SHAPE, choose_gpu_dtype

    assert choose_gpu_dtype(_timer(0.0027, 0.00025)).dtype == "bfloat16"  # tensor cores: ~10x
    assert choose_gpu_dtype(_timer(0.010, 0.012)).dtype == "float32"  # emulated bf16

    def no_bf16(dtype):
        if dtype == torch.bfloat16:
            raise RuntimeError("no bf16 kernel")
        return 0.01

    choice = choose_gpu_dtype(no_bf16)
    assert choice.dtype == "float32" and choice.device == "cuda" and "cuda dtype: float32" in choice.describe()
    assert min(GPU_MATMUL_SHAPE) >= 4096  # bound by arithmetic, not by the kernel launch


class _OnDevice:
    """A stand-in model that lives on ``device`` (only ``.device`` is read)."""

    def __init__(self, device: str):
        self.device = torch.device(device)


def test_update_batch_moves_to_the_model_and_leaves_the_callers():
    from recipe.local_engine.config import AlgoConfig
    from recipe.local_engine.policy_update import TrainRollout, build_batch, on_model_device

    rollouts = [TrainRollout("q", [1, 2], [3, 4, 5], 1.0), TrainRollout("q", [1, 2], [6], 0.0)]
    data = build_batch(rollouts, pad_id=0, algo=AlgoConfig())
    assert on_model_device(_OnDevice("cpu"), data) is data  # already there: no copy
    moved = on_model_device(_OnDevice("meta"), data)
    assert {t.device.type for t in moved.batch.values()} == {"meta"}
    assert {t.device.type for t in data.batch.values()} == {"cpu"}  # the caller's batch is untouched
    assert list(moved.non_tensor_batch["uid"]) == ["q", "q"]


def test_packed_batch_moves_whole():
    from recipe.local_engine.logprobs import pack

    pb = pack([[1, 2], [3]], [[4], [5, 6]], pad_id=0)
    assert pb.to("cpu") is pb
    moved = pb.to("meta")
    assert {
        t.device.type
        for t in (moved.input_ids, moved.attention_mask, moved.position_ids, moved.responses, moved.response_mask)
    } == {"meta"}
    assert moved.prompt_width == pb.prompt_width


def test_eval_hf_backend_resolves_its_device(monkeypatch):
    from eval.backends import BackendError, build_backend

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert build_backend("hf", "smollm2").device == "cpu"  # pasr eval's default: auto
    with pytest.raises(BackendError, match="sees no GPU"):
        build_backend("hf", "smollm2", device="cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert build_backend("hf", "smollm2").device == "cuda"
    assert build_backend("hf", "smollm2", device="cpu").device == "cpu"


def test_set_threads_is_the_one_thread_decision(monkeypatch):
    """A count is obeyed; none (or 0) asks the probe, here scripted: all cores only where they are
    measurably faster than one."""
    import torch

    from runtime.cpu_dtype import set_threads

    before = torch.get_num_threads()
    try:
        assert set_threads(1) == 1 and torch.get_num_threads() == 1
        monkeypatch.setattr(torch, "get_num_threads", lambda: 4)
        set_by = []
        monkeypatch.setattr(torch, "set_num_threads", set_by.append)
        assert set_threads(None, timer=lambda n: 1.0 / n) == 4  # 4 threads 4x faster: all of them
        assert set_threads(0, timer=lambda n: 1.0) == 1  # no gain: one
        assert set_by == [4, 1]
    finally:
        monkeypatch.undo()
        torch.set_num_threads(before)
