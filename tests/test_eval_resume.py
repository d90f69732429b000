"""`pasr eval` run again into the same --out: after an interrupt it generates only the missing
samples (a half-written line dropped), other settings are refused, and two runs at once are not
allowed (the directory lock)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from eval.run import EvalError, run_eval
from tests.scripted_eval import Scripted, cfg_for, golds, pasr_text, plain_text, records_of


def test_resume_after_interrupt(data_env, tmp_path):
    gold = golds(data_env, "gsm8k", 5)

    def respond(system, user):
        return plain_text(gold[user])

    cfg = cfg_for(tmp_path, method="plain", limit=5, samples=2, temperature=0.7, chunk_size=4)
    with pytest.raises(KeyboardInterrupt):
        run_eval(cfg, backend=Scripted(respond, interrupt_on_call=2))
    first = records_of(cfg.out)
    assert len(first) == 4  # the first chunk was written before the interrupt
    partial = json.loads((Path(cfg.out) / "summary.json").read_text())
    assert partial["complete"] is False and "Partial" in (Path(cfg.out) / "summary.md").read_text()
    # a half-written line from a kill mid-write is dropped, not glued to the next record
    with (Path(cfg.out) / "samples.jsonl").open("a") as fh:
        fh.write('{"run_id": "eval-run", "query_id": "gs')

    again = Scripted(respond)
    summary = run_eval(cfg, backend=again)
    assert sum(len(c) for c in again.calls) == 10 - 4  # only the missing samples
    recs = records_of(cfg.out)
    keys = [(r.dataset, r.query_id, r.sample_index) for r in recs]
    assert len(keys) == len(set(keys)) == 10
    assert {(q, k) for _, q, k in keys} == {(f"gsm8k:test:{i}", k) for i in range(5) for k in range(2)}
    assert summary["complete"] is True and summary["datasets"]["gsm8k"]["accuracy"] == 1.0

    # done: a third run generates nothing; a larger --limit extends the run
    third = Scripted(respond)
    run_eval(cfg, backend=third)
    assert third.calls == []
    cfg.limit = 6
    gold.update(golds(data_env, "gsm8k", 6))
    fourth = Scripted(respond)
    assert run_eval(cfg, backend=fourth)["datasets"]["gsm8k"]["n_samples"] == 12
    assert sum(len(c) for c in fourth.calls) == 2


def test_resume_refuses_other_settings(data_env, tmp_path):
    gold = golds(data_env, "gsm8k", 2)
    cfg = cfg_for(tmp_path, method="plain", limit=2)
    run_eval(cfg, backend=Scripted(lambda s, u: plain_text(gold[u])))
    cfg.method, cfg.max_new_tokens = "pasr", 64
    with pytest.raises(EvalError) as err:
        run_eval(cfg, backend=Scripted(lambda s, u: pasr_text(gold[u])))
    msg = str(err.value)
    assert "other settings" in msg and "method" in msg and "max_new_tokens" in msg and "\n" not in msg


def test_second_run_into_the_same_out_is_refused(data_env, tmp_path):
    """Two runs appending to one samples.jsonl would each write every sample: the directory is
    locked for the length of a run, and a killed holder leaves no stale lock behind."""
    import subprocess

    gold = golds(data_env, "gsm8k", 2)
    out = tmp_path / "run"
    out.mkdir()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from eval.resume import RunDir; RunDir(sys.argv[1]).lock(); "
            "print('locked', flush=True); time.sleep(120)",
            str(out),
        ],
        cwd=Path(__file__).resolve().parents[1],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(EvalError) as err:
            run_eval(cfg_for(tmp_path, method="plain", limit=2), backend=Scripted(lambda s, u: plain_text(gold[u])))
        assert f"in use by another pasr eval (pid {holder.pid})" in str(err.value) and "\n" not in str(err.value)
        assert not (out / "samples.jsonl").exists()
    finally:
        holder.kill()
        holder.wait()
    run_eval(cfg_for(tmp_path, method="plain", limit=2), backend=Scripted(lambda s, u: plain_text(gold[u])))
    assert len(records_of(out)) == 2
