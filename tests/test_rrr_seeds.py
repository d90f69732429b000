"""benchmarks/rrr_seeds: a finished RRR run directory becomes a row (warm-up vs RRR at the first
attempt and at the final answer, paired sign tests) and RRR's claim is judged per seed."""

from __future__ import annotations

import json

import pytest

from benchmarks.rrr_seeds import TREND_KEYS, main, seed_row
from data.records import ATTEMPT, REFLECTION, RETRY, RolloutRecord, write_records


def _record(q: int, variant: str, ok: bool | None) -> RolloutRecord:
    answer = "42" if ok else "41"
    text = "I slipped." if variant == REFLECTION else f"<think>6 * 7 = {answer}.</think><answer>{answer}</answer>"
    return RolloutRecord(
        run_id="r",
        query_id=f"q{q}",
        data_source="synthetic",
        variant=variant,
        prompt="6 * 7?",
        response=text,
        response_tokens=10,
        format_ok=True,
        format_reason="ok",
        n_refine=0,
        extracted_answer=None if ok is None else answer,
        gold="42",
        acc=None if ok is None else float(ok),
        dataset="t",
    )


def _eval(first: list[bool], retry: list[bool]) -> list[RolloutRecord]:
    """One attempt per question; a failed one gets a reflection and a retry (``retry[i]``)."""
    out = []
    for q, (ok, again) in enumerate(zip(first, retry)):
        out.append(_record(q, ATTEMPT, ok))
        if not ok:
            out += [_record(q, REFLECTION, None), _record(q, RETRY, again)]
    return out


def _run(tmp_path, warm: tuple[list, list], rrr: tuple[list, list], seed: int = 3):
    run = tmp_path / f"seed_{seed}"
    write_records(run / "eval" / "warmup.jsonl", _eval(*warm), append=False)
    write_records(run / "eval" / "final.jsonl", _eval(*rrr), append=False)
    steps = [{"phase": "rrr", "step": s, **{k: 0.1 * s for k in TREND_KEYS}} for s in range(1, 7)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in steps))
    return run


def test_a_final_answer_gain_with_first_attempts_kept_is_learned(tmp_path):
    # the same first attempts (10 of 20 right); RRR's retries recover all 10 failures, the warm-up's none
    first = [True] * 10 + [False] * 10
    row = seed_row(_run(tmp_path, (first, [False] * 20), (first, [True] * 20)), 3)
    assert row["rows"]["warm-up"]["acc"] == 0.5 and row["rows"]["RRR"]["acc"] == 1.0
    assert row["pairs"]["first"] == {"wins": 0, "losses": 0, "p": 1.0}
    assert (row["pairs"]["final"]["wins"], row["pairs"]["final"]["losses"]) == (10, 0)
    assert row["p_rrr_vs_warmup_final"] == 2 / 2**10 and row["learned"] and row["rrr_phase"]["steps"] == 6
    assert row["rrr_phase"]["trends"]["rrr/retry_acc"] == pytest.approx({"first_third": 0.15, "last_third": 0.55})


def test_a_gain_bought_with_worse_first_attempts_is_not_learned(tmp_path):
    # RRR: 12 first attempts worse but every failure recovered (final 20 / 20 against 14 / 20)
    warm = ([True] * 14 + [False] * 6, [False] * 20)
    rrr = ([True] * 2 + [False] * 18, [True] * 20)
    row = seed_row(_run(tmp_path, warm, rrr), 3)
    assert row["rows"]["RRR"]["acc"] > row["rows"]["warm-up"]["acc"] and row["p_rrr_vs_warmup_final"] < 0.05
    assert row["p_rrr_vs_warmup_first_attempt"] < 0.05 and not row["learned"]


def test_finished_runs_are_read_not_rerun(tmp_path, capsys):
    first = [True] * 5 + [False] * 5
    _run(tmp_path, (first, [False] * 10), (first, [False] * 10), seed=7)
    out = tmp_path / "rrr.json"
    assert main(["--seeds", "7", "--runs-dir", str(tmp_path), "--out", str(out), "model.rollout_dtype=float32"]) == 0
    result = json.loads(out.read_text())
    assert result["cpu"]["dtype"] == "float32" and [r["seed"] for r in result["runs"]] == [7]
    assert not result["runs"][0]["learned"] and "| 7 |" in capsys.readouterr().out
