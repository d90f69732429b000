"""`pasr stats` pairing (issue 53): which evaluation is BEFORE is what the runs record (a
checkpoint's step in summary.json, an in-training evaluation's step) or `--pair`, never the order
of the arguments; each pair is printed with its reason and labelled by its run directory."""

from __future__ import annotations

import json
from pathlib import Path

from pasr_cli import main
from tests.stats_records import EV_RIGHT, EV_WRONG, rec, write

N = 20  # questions: the warm-up checkpoint answers 10 right, the final one 15 (the same 10 and 5 more)


def _answers(run_id: str, n_right: int, **kw) -> list:
    return [
        rec(run_id, f"q{i}", "refine", EV_RIGHT if i < n_right else EV_WRONG, "5", 1.0 if i < n_right else 0.0, **kw)
        for i in range(N)
    ]


def _eval_run(folder: Path, n_right: int, step: int | None, train_run: Path) -> Path:
    """A `pasr eval --method pasr` output folder (run id `eval-<folder name>`, as pasr eval names it)."""
    write(
        folder / "samples.jsonl",
        _answers(f"eval-{folder.name}", n_right, dataset="synthetic", engine="eval", extra={"method": "pasr"}),
    )
    checkpoint = (
        None
        if step is None
        else {
            "path": str(train_run / "checkpoints" / f"step_{step:06d}"),
            "run": str(train_run),
            "step": step,
            "note": None,
        }
    )
    (folder / "summary.json").write_text(
        json.dumps({"model": str(train_run / "checkpoints" / "latest"), "checkpoint": checkpoint, "method": "pasr"})
    )
    return folder


def _stats(tmp_path: Path, *args: str) -> dict:
    out = tmp_path / "report"
    assert main(["stats", *args, "--out", str(out), "--no-plots"]) == 0
    return json.loads((out / "stats.json").read_text())


def test_final_then_warmup_checkpoint_is_read_as_the_improvement_it_is(tmp_path, capsys):
    """The issue's case: `pasr stats FINAL WARMUP` (neither run plain) printed "accuracy 75.0% -> 50.0%,
    net -5" for an improvement. The checkpoints' steps (summary.json) put the warm-up first."""
    train_run = tmp_path / "runs" / "demo"
    final = _eval_run(tmp_path / "evals" / "final", 15, 6, train_run)
    warmup = _eval_run(tmp_path / "evals" / "warmup", 10, 4, train_run)
    s = _stats(tmp_path, str(final), str(warmup))
    (tr,) = s["transitions"]
    assert (tr["before"], tr["after"]) == ("eval-warmup:pasr", "eval-final:pasr")
    assert (tr["acc_before"], tr["acc_after"], tr["net_gain"]) == (0.5, 0.75, 5)
    assert tr["order"] == f"checkpoint step 4 before step 6 of training run {train_run} (their summary.json)"
    assert tr["before_label"] == f"{warmup} (pasr, checkpoint step 4 of {train_run})"
    out = capsys.readouterr().out
    assert (
        f"pair 1: BEFORE = {warmup} (pasr, checkpoint step 4 of {train_run}); AFTER = {final} (pasr, "
        f"checkpoint step 6 of {train_run}); why this order: checkpoint step 4 before step 6"
    ) in out
    assert "accuracy 50.0% -> 75.0%, net +5 of 20 paired samples" in out
    report = (tmp_path / "report" / "report.md").read_text()
    assert "accuracy 50.0% → 75.0%, net +5" in report and "- **order**: checkpoint step 4 before step 6" in report


def test_two_eval_runs_nothing_orders_are_not_paired_by_argument_order(tmp_path, capsys):
    """Without a recorded step (or of two training runs) nothing says which came first: no pair, a
    note; `--pair` (here by the runs' directories) gives the order."""
    a = _eval_run(tmp_path / "a" / "latest", 15, None, tmp_path / "r")
    b = _eval_run(tmp_path / "b" / "other", 10, 4, tmp_path / "r")
    s = _stats(tmp_path, str(a), str(b))
    assert s["transitions"] == [] and len(s["pair_notes"]) == 1
    assert "pass --pair BEFORE AFTER" in s["pair_notes"][0]
    assert "pass --pair BEFORE AFTER" in capsys.readouterr().out
    report = (tmp_path / "report" / "report.md").read_text()
    assert "not compared: nothing they record orders them" in report

    s = _stats(tmp_path, str(a), str(b), "--pair", str(b), str(a))
    (tr,) = s["transitions"]
    assert (tr["acc_before"], tr["acc_after"], tr["order"]) == (0.5, 0.75, "as given by --pair")
    assert tr["after_label"] == f"{a} (pasr)"  # the directory, not the run id "eval-latest"


def test_checkpoints_of_two_training_runs_are_not_ordered(tmp_path):
    a = _eval_run(tmp_path / "a", 15, 6, tmp_path / "run1")
    b = _eval_run(tmp_path / "b", 10, 4, tmp_path / "run2")
    assert _stats(tmp_path, str(a), str(b))["transitions"] == []


def test_two_eval_runs_of_one_name_stay_two_runs(tmp_path):
    """`runs/x/eval/latest` and `runs/y/eval/latest` share the run id `eval-latest`: their answers are
    two systems named by directory, not one table where the later file overwrote the earlier."""
    a = _eval_run(tmp_path / "x" / "latest", 10, 4, tmp_path / "r")
    b = _eval_run(tmp_path / "y" / "latest", 15, 6, tmp_path / "r")
    s = _stats(tmp_path, str(b), str(a))
    assert sorted(s["eval_runs"]) == [f"{a}:pasr", f"{b}:pasr"]
    (tr,) = s["transitions"]
    assert (tr["before"], tr["after"], tr["net_gain"]) == (f"{a}:pasr", f"{b}:pasr", 5)


def _training_run(tmp_path: Path) -> Path:
    """A local training run's in-training evaluations, as `pasr train` writes them: eval/<tag>.jsonl."""
    run = tmp_path / "tinyrun"
    (run / "config.yaml").parent.mkdir(parents=True)
    (run / "config.yaml").write_text("method: pasr\npasr:\n  refine_compare: margin\n  tie_value: 0.0\n")
    write(run / "eval" / "warmup.jsonl", _answers("tinyrun", 10, step=4, dataset="warmup", data_source="synthetic"))
    write(run / "eval" / "final.jsonl", _answers("tinyrun", 15, step=6, dataset="final", data_source="synthetic"))
    return run


def test_in_training_evaluations_warmup_before_final(tmp_path, capsys):
    """A run's eval files given final first: warm-up (step 4) is BEFORE, final (step 6) AFTER,
    matched by question although their tags differ; labelled by the run directory."""
    run = _training_run(tmp_path)
    s = _stats(tmp_path, str(run / "eval" / "final.jsonl"), str(run / "eval" / "warmup.jsonl"))
    (tr,) = s["transitions"]
    assert (tr["before"], tr["after"]) == ("tinyrun/warmup@4:pasr", "tinyrun/final@6:pasr")
    assert (tr["n_pairs"], tr["acc_before"], tr["acc_after"], tr["net_gain"]) == (N, 0.5, 0.75, 5)
    assert tr["before_label"] == f"{run} · warmup evaluation at step 4 (pasr)"
    assert tr["order"] == "in-training evaluations of one run, by step (4 before 6)"
    assert s["in_training_evaluations"] == ["tinyrun/final@6:pasr", "tinyrun/warmup@4:pasr"]
    assert "why this order: in-training evaluations of one run, by step (4 before 6)" in capsys.readouterr().out

    s = _stats(tmp_path, str(run), "--pair", "tinyrun/final@6", "tinyrun/warmup@4:pasr")  # the other way, asked for
    (tr,) = s["transitions"]
    assert (tr["acc_before"], tr["net_gain"], tr["order"]) == (0.75, -5, "as given by --pair")
