"""benchmarks/demo_seeds: a finished demo run directory becomes a row (warm-up vs final, paired
sign test, refine rates) and the demo's claim is judged per seed."""

from __future__ import annotations

import json

from benchmarks.demo_seeds import WALL_FILE, learned, main, seed_overrides, seed_row
from data.records import RolloutRecord, write_records


def _records(right: list[bool], refine: list[bool]) -> list[RolloutRecord]:
    out = []
    for i, (ok, ref) in enumerate(zip(right, refine)):
        draft = "41" if not ok else "42"
        text = (
            f"<think>6 x 7 = {draft}. <refine>check: 42</refine></think><answer>{42 if ok else 41}</answer>"
            if ref
            else f"<think>6 x 7 = 42</think><answer>{42 if ok else 41}</answer>"
        )
        out.append(
            RolloutRecord(
                run_id="r",
                query_id=f"q{i}",
                data_source="synthetic",
                variant="refine",
                prompt="6 x 7?",
                response=text,
                response_tokens=10,
                format_ok=True,
                format_reason="ok",
                n_refine=int(ref),
                extracted_answer=str(42 if ok else 41),
                gold="42",
                acc=float(ok),
                dataset="t",
            )
        )
    return out


def _run(tmp_path, warm_right, final_right, refine):
    run = tmp_path / "seed_4"
    write_records(run / "eval" / "warmup.jsonl", _records(warm_right, refine), append=False)
    write_records(run / "eval" / "final.jsonl", _records(final_right, refine), append=False)
    return run


def test_a_finished_run_is_a_row_with_its_paired_test(tmp_path):
    # 12 questions the final gets right and the warm-up wrong, none the other way: p = 2 / 2**12
    warm = [False] * 12 + [True] * 8
    final = [True] * 20
    run = _run(tmp_path, warm, final, refine=[True] * 20)
    (run / WALL_FILE).write_text(json.dumps({"wall_s": 90.0}))
    row = seed_row(run, 4)
    assert row["warmup_acc"] == 0.4 and row["final_acc"] == 1.0
    assert (row["wins"], row["losses"]) == (12, 0) and abs(row["p"] - 2 / 2**12) < 1e-12
    assert row["refine_rate"] == 1.0 and row["wall_s"] == 90.0 and row["n"] == 20


def test_learned_needs_the_gain_the_test_and_better_refines():
    row = {"warmup_acc": 0.6, "final_acc": 0.68, "p": 0.01, "refine_fix_rate": 0.2, "warmup_refine_fix_rate": 0.15}
    assert learned(row)
    assert not learned({**row, "p": 0.2})
    assert not learned({**row, "final_acc": 0.55})
    assert not learned({**row, "refine_fix_rate": 0.1})
    assert not learned({**row, "refine_fix_rate": None})


def test_seed_varies_the_whole_run():
    assert seed_overrides(3) == ["warmup.seed=3", "trainer.seed=3"]


def test_finished_runs_are_read_not_rerun(tmp_path, capsys):
    _run(tmp_path, [False] * 5 + [True] * 5, [True] * 10, refine=[True] * 10)
    out = tmp_path / "demo.json"
    assert main(["--seeds", "4", "--runs-dir", str(tmp_path), "--out", str(out), "--dtype", "float32"]) == 0
    result = json.loads(out.read_text())
    assert result["cpu"]["dtype"] == "float32" and {"model", "capability", "cores"} <= set(result["cpu"])
    assert [r["seed"] for r in result["runs"]] == [4] and result["runs"][0]["wall_s"] is None
    assert "| 4 |" in capsys.readouterr().out


def test_warmup_schedule_compares_the_four_evaluations_of_a_seed(tmp_path, capsys):
    """benchmarks/warmup_schedule: per seed, the decayed warm-up against the constant one, against
    the constant one plus PASR, and PASR from the decayed one, each a paired sign test."""
    from benchmarks.warmup_schedule import main as compare

    constant, cosine = tmp_path / "constant", tmp_path / "cosine"
    # constant warm-up right on 0-3, its PASR on 0-5; the decayed warm-up on 0-7, its PASR on 0-6
    for root, warm_n, final_n in ((constant, 4, 6), (cosine, 8, 7)):
        right = [[i < n for i in range(10)] for n in (warm_n, final_n)]
        _run(root, *right, refine=[True] * 10).rename(root / "seed_2")
    out = tmp_path / "cmp.json"
    assert compare(["--constant", str(constant), "--cosine", str(cosine), "--seeds", "2", "--out", str(out)]) == 0
    (row,) = json.loads(out.read_text())["runs"]
    assert [row[f"{k}_acc"] for k in ("constant_warmup", "constant_pasr", "cosine_warmup", "cosine_pasr")] == [
        0.4,
        0.6,
        0.8,
        0.7,
    ]
    assert (row["decay_vs_constant_warmup"]["wins"], row["decay_vs_constant_warmup"]["losses"]) == (4, 0)
    assert (row["decay_vs_constant_warmup_plus_pasr"]["wins"], row["decay_vs_constant_warmup_plus_pasr"]["losses"]) == (
        2,
        0,
    )
    assert (row["pasr_from_decayed_warmup"]["wins"], row["pasr_from_decayed_warmup"]["losses"]) == (0, 1)
    assert row["pasr_from_decayed_warmup"]["p"] == 1.0
    assert "| 2 | 0.400 | 0.600 | 0.800 | 0.700 |" in capsys.readouterr().out


def test_pool_counts_each_setting_and_all_of_them(tmp_path, capsys):
    def result(name, pairs):  # (warm-up acc, final acc, p) per seed
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"runs": [{"warmup_acc": w, "final_acc": f, "p": p} for w, f, p in pairs]}))
        return str(path)

    a = result("a", [(0.5, 0.6, 0.01), (0.5, 0.45, 0.3), (0.5, 0.5, 1.0)])
    b = result("b", [(0.6, 0.5, 0.02), (0.6, 0.55, 0.04)])
    assert main(["--pool", a, b]) == 0
    out = capsys.readouterr().out.splitlines()
    # runs, mean change, up, down, up significantly, down significantly
    assert out[2] == "| a | 3 | +0.017 | 1 | 1 | 1 | 0 |"
    assert out[3] == "| b | 2 | -0.075 | 0 | 2 | 0 | 2 |"
    assert out[4] == "| **all** | **5** | **-0.020** | **1** | **3** | **1** | **2** |"
