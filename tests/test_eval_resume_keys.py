"""`pasr eval` resumes only answers made by what decides them now: the checkpoint (its step and
content, not the ``--model`` text), the rows (by content, not file stem and index, gold answers
included) and the runtime the backend decided (dtype, threads). Each case of issue 51 item 2:
``RUN/checkpoints/latest`` after more training, two files of one stem into one ``--out``, a
corrected gold answer, another ``--dtype`` (and ``auto`` deciding otherwise on a resume), and a
verl run folder whose tracked step was deleted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.run import EvalError, run_eval
from tests.scripted_eval import Scripted, cfg_for, golds, local_run, plain_text, records_of, train_further


def test_latest_after_more_training_is_another_model(data_env, tiny_model_dir, tmp_path):
    """The same command after the run trained further reported the old checkpoint's answers
    ("4 of 4 samples already done"): the fingerprint held the text ``.../latest``."""
    gold = golds(data_env, "gsm8k", 2)
    run = local_run(tmp_path, tiny_model_dir)
    latest = str(run / "checkpoints" / "latest")
    cfg = cfg_for(tmp_path, method="plain", limit=2, model=latest)
    summary = run_eval(cfg, backend=Scripted(lambda s, u: plain_text(gold[u])))
    assert summary["checkpoint"]["step"] == 2 and summary["checkpoint"]["path"] == str(
        run / "checkpoints" / "step_000002"
    )
    assert "checkpoint step 2 (" in (Path(cfg.out) / "summary.md").read_text().splitlines()[0]

    # the same checkpoint named by its folder is the same model: resumed, nothing made again
    again = Scripted(lambda s, u: plain_text(gold[u]))
    run_eval(cfg_for(tmp_path, method="plain", limit=2, model=str(run / "checkpoints" / "step_000002")), backend=again)
    assert again.calls == []

    train_further(run, 4)
    with pytest.raises(EvalError) as err:
        run_eval(cfg, backend=Scripted(lambda s, u: plain_text(gold[u])))
    msg = str(err.value)
    assert (
        "other settings" in msg and "model.step: 2 there, 4 now" in msg and "model.weights:" in msg and "\n" not in msg
    )
    fresh = run_eval(
        cfg_for(tmp_path, method="plain", limit=2, model=latest, out=str(tmp_path / "after")),
        backend=Scripted(lambda s, u: plain_text(gold[u])),
    )
    assert fresh["checkpoint"]["step"] == 4


def _qa_file(path: Path, rows: list[tuple[str, str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"question": q, "answer": a}) + "\n" for q, a in rows))
    return path


def test_two_files_of_one_stem_into_one_out_are_refused(tmp_path):
    """``--dataset a/test.jsonl`` then ``b/test.jsonl`` into one --out gave b's summary with a's
    questions (both are dataset ``test``, rows keyed by index)."""
    a = _qa_file(tmp_path / "a" / "test.jsonl", [("1 + 1?", "2"), ("2 + 2?", "4")])
    b = _qa_file(tmp_path / "b" / "test.jsonl", [("3 + 3?", "6"), ("4 + 4?", "8")])
    answers = {"1 + 1?": "2", "2 + 2?": "4", "3 + 3?": "6", "4 + 4?": "8"}
    respond = lambda s, u: plain_text(answers[u])  # noqa: E731
    run_eval(cfg_for(tmp_path, method="plain", datasets=[str(a)]), backend=Scripted(respond))
    later = Scripted(respond)
    with pytest.raises(EvalError) as err:
        run_eval(cfg_for(tmp_path, method="plain", datasets=[str(b)]), backend=later)
    msg = str(err.value)
    assert f"dataset 'test' read from {a}, not {b}" in msg and "another --out" in msg and "\n" not in msg
    assert later.calls == [] and {r.prompt for r in records_of(tmp_path / "run")} == {"1 + 1?", "2 + 2?"}


def test_changed_rows_are_judged_or_answered_again(tmp_path, capsys):
    """A corrected gold answer in the file was ignored on a rerun (the samples were keyed by file
    stem and row index): now the sample is judged again against it (its generation kept), and a
    changed question is answered again."""
    path = _qa_file(tmp_path / "qa.jsonl", [("1 + 1?", "2"), ("2 + 2?", "5"), ("3 + 3?", "6")])  # 2 + 2: a wrong gold
    right = {"1 + 1?": "2", "2 + 2?": "4", "3 + 3?": "6", "5 + 5?": "10"}
    cfg = cfg_for(tmp_path, method="plain", datasets=[str(path)])
    first = run_eval(cfg, backend=Scripted(lambda s, u: plain_text(right[u])))
    assert first["datasets"]["qa"]["accuracy"] == pytest.approx(2 / 3)

    _qa_file(path, [("1 + 1?", "2"), ("2 + 2?", "4"), ("3 + 3?", "6")])  # the gold corrected
    rerun = Scripted(lambda s, u: plain_text(right[u]))
    logs: list[str] = []
    fixed = run_eval(cfg, backend=rerun, log=logs.append)
    assert rerun.calls == []  # judged again, not generated again
    assert (
        fixed["datasets"]["qa"]["accuracy"] == 1.0
        and fixed["datasets"]["qa"]["question_set"] != first["datasets"]["qa"]["question_set"]
    )
    assert any("1 judged again (gold answer changed)" in line for line in logs), logs
    assert sorted(r.gold for r in records_of(cfg.out)) == ["2", "4", "6"]

    _qa_file(path, [("1 + 1?", "2"), ("5 + 5?", "10"), ("3 + 3?", "6")])  # row 2 is another question now
    rerun = Scripted(lambda s, u: plain_text(right[u]))
    logs.clear()
    changed = run_eval(cfg, backend=rerun, log=logs.append)
    assert [c[-1]["content"] for call in rerun.calls for c in call] == ["5 + 5?"]
    assert any("1 answered again (question changed)" in line for line in logs), logs
    recs = records_of(cfg.out)
    assert (
        sorted(r.prompt for r in recs) == ["1 + 1?", "3 + 3?", "5 + 5?"]
        and changed["datasets"]["qa"]["accuracy"] == 1.0
    )


def test_another_dtype_is_refused(data_env, tmp_path):
    gold = golds(data_env, "gsm8k", 2)
    respond = lambda s, u: plain_text(gold[u])  # noqa: E731
    run_eval(cfg_for(tmp_path, method="plain", limit=2, dtype="float32"), backend=Scripted(respond))
    with pytest.raises(EvalError) as err:
        run_eval(cfg_for(tmp_path, method="plain", limit=2, dtype="bfloat16"), backend=Scripted(respond))
    assert 'runtime.dtype: "float32" there, "bfloat16" now' in str(err.value) and "\n" not in str(err.value)


def test_auto_dtype_and_threads_are_recorded_as_decided_and_kept_on_resume(
    data_env, tiny_model_dir, tmp_path, monkeypatch
):
    """``auto`` was recorded as ``auto`` (or not at all), so a run whose probe chose bf16 resumed
    in fp32 where the probe chose otherwise. The hf backend's decision is in run.json; a resume
    left to ``auto`` takes it, an explicit other one is refused."""
    import runtime.cpu_dtype as cpu_dtype
    from runtime.cpu_dtype import DtypeChoice

    monkeypatch.setattr(cpu_dtype, "measured_cpu_dtype", lambda: DtypeChoice("bfloat16", 2.0, "AVX512_BF16"))
    monkeypatch.setattr(cpu_dtype, "choose_threads", lambda n, *a, **k: 1)
    cfg = cfg_for(tmp_path, method="plain", limit=2, model=str(tiny_model_dir), max_new_tokens=3, batch_size=2)
    run_eval(cfg)  # the real hf backend on the tiny model
    saved = json.loads((Path(cfg.out) / "run.json").read_text())["settings"]["runtime"]
    assert saved == {"device": "cpu", "dtype": "bfloat16", "threads": 1}
    assert "dtype bfloat16, threads 1" in (Path(cfg.out) / "summary.md").read_text()

    # the probe decides fp32 today: the resume still answers (and is fingerprinted) as the run began
    monkeypatch.setattr(cpu_dtype, "measured_cpu_dtype", lambda: DtypeChoice("float32", 1.0, "AVX2"))
    logs: list[str] = []
    cfg.limit = 3
    summary = run_eval(cfg, log=logs.append)
    assert summary["complete"] and summary["settings"]["runtime"]["dtype"] == "bfloat16"
    assert any("resuming with the run's own device cpu, dtype bfloat16, threads 1" in line for line in logs), logs
    with pytest.raises(EvalError, match=r'runtime\.dtype: "bfloat16" there, "float32" now'):
        run_eval(cfg_for(tmp_path, method="plain", limit=2, model=str(tiny_model_dir), dtype="float32"))


def _verl_step(run: Path, step: int, payload: bytes) -> None:
    actor = run / f"global_step_{step}" / "actor"
    (actor / "huggingface").mkdir(parents=True)
    (actor / "fsdp_config.json").write_text('{"world_size": 1}')
    (actor / "huggingface" / "config.json").write_text('{"model_type": "llama"}')
    (actor / "model_world_size_1_rank_0.pt").write_bytes(payload)


def test_a_verl_run_whose_tracked_step_is_gone_names_the_step_evaluated(data_env, tmp_path):
    """A verl run folder whose tracked step was deleted evaluated an older step without naming
    it: now stderr and the summary say which step answered."""
    from eval.identity import model_identity

    gold = golds(data_env, "gsm8k", 1)
    run = tmp_path / "verl_run"
    _verl_step(run, 10, b"ten")
    _verl_step(run, 20, b"twenty")
    (run / "latest_checkpointed_iteration.txt").write_text("20")
    ident = model_identity(str(run))
    assert (ident.step, ident.note, ident.path) == (20, None, str(run / "global_step_20"))
    assert model_identity(str(run / "global_step_10")).fingerprint() != ident.fingerprint()

    (run / "latest_checkpointed_iteration.txt").write_text("30")  # step 30 was tracked, then deleted
    logs: list[str] = []
    cfg = cfg_for(tmp_path, method="plain", limit=1, model=str(run))
    summary = run_eval(cfg, backend=Scripted(lambda s, u: plain_text(gold[u])), log=logs.append)
    assert summary["checkpoint"]["step"] == 20
    assert any("names step 30, which is not there: evaluating global_step_20" in line for line in logs), logs
    md = (Path(cfg.out) / "summary.md").read_text()
    assert "checkpoint step 20 (" in md.splitlines()[0] and "evaluating global_step_20" in md


def test_a_broken_latest_pointer_is_one_line(data_env, tmp_path, run_cli):
    """The checkpoint is named before anything runs: a ``latest`` naming no complete checkpoint, or
    one that is not text (a traceback before), is one line."""
    run = tmp_path / "train_run"
    (run / "checkpoints").mkdir(parents=True)
    latest = run / "checkpoints" / "latest"
    for content, needle in (
        (b"step_000009", "names no complete checkpoint"),
        (b"\xff\xfe", "cannot read the checkpoint"),
    ):
        latest.write_bytes(content)
        rc, _, err = run_cli(
            [
                "eval",
                "--model",
                str(latest),
                "--dataset",
                "gsm8k",
                "--limit",
                "1",
                "--out",
                str(tmp_path / "o"),
                "--backend",
                "hf",
            ]
        )
        assert rc == 2 and needle in err and err.count("\n") == 1 and "Traceback" not in err, err


def test_a_run_directory_of_an_older_pasr_eval_is_refused_plainly(data_env, tmp_path):
    """Its run.json holds the --model text and no runtime: whether its answers came from this
    checkpoint cannot be told, so it is refused, saying why, not resumed."""
    gold = golds(data_env, "gsm8k", 2)
    cfg = cfg_for(tmp_path, method="plain", limit=2)
    run_eval(cfg, backend=Scripted(lambda s, u: plain_text(gold[u])))
    run_json = Path(cfg.out) / "run.json"
    old = json.loads(run_json.read_text())
    old["settings"]["model"] = cfg.model
    del old["settings"]["runtime"], old["datasets"]
    run_json.write_text(json.dumps(old))
    with pytest.raises(EvalError, match="written by an older pasr eval, which did not record what decided its answers"):
        run_eval(cfg, backend=Scripted(lambda s, u: plain_text(gold[u])))


def test_the_backend_loads_the_checkpoint_that_was_fingerprinted(data_env, tiny_model_dir, tmp_path, monkeypatch):
    """``latest`` is resolved once: the backend gets the step folder the fingerprint names, so a
    save between the check and the load cannot answer with other weights than those recorded."""
    import eval.run

    gold = golds(data_env, "gsm8k", 1)
    run = local_run(tmp_path, tiny_model_dir)
    built = []

    def fake_build(name, model, **kw):
        built.append(model)
        return Scripted(lambda s, u: plain_text(gold[u]))

    monkeypatch.setattr(eval.run, "build_backend", fake_build)
    run_eval(cfg_for(tmp_path, method="plain", limit=1, model=str(run / "checkpoints" / "latest")))
    assert built == [str(run / "checkpoints" / "step_000002")]
