"""`pasr eval compare`: the table and figure over finished runs, each run labelled by its checkpoint
and with its question count, runs over other questions and repeated runs marked or refused, and a
directory or summary.json that holds no run in one line."""

from __future__ import annotations

import pytest

from eval.run import run_eval
from tests.scripted_eval import Scripted, cfg_for, golds, local_run, pasr_text, plain_text, train_further


def test_compare_table_and_png(data_env, tmp_path, run_cli):
    gold = golds(data_env, "gsm8k", 2)
    gold.update(golds(data_env, "aime24", 2))
    dirs = []
    for method, style in (("plain", plain_text), ("pasr", pasr_text)):
        out = tmp_path / method
        run_eval(
            cfg_for(tmp_path, method=method, datasets=["gsm8k", "aime24"], limit=2, out=str(out)),
            backend=Scripted(lambda s, u, style=style: style(gold[u])),
        )
        dirs.append(str(out))
    png = tmp_path / "cmp" / "eval_compare.png"
    rc, out, err = run_cli(["eval", "compare", *dirs, "--out", str(tmp_path / "cmp")])
    assert rc == 0 and err == "", err
    lines = [ln for ln in out.splitlines() if ln.startswith("|")]
    assert "gsm8k acc %" in lines[0] and "aime24 tokens" in lines[0]
    assert any("| plain " in ln and "100.0" in ln for ln in lines) and any("| pasr " in ln for ln in lines)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000


def test_compare_missing_dir(tmp_path, run_cli):
    rc, _, err = run_cli(["eval", "compare", str(tmp_path / "nope")])
    assert rc == 2 and "no summary.json" in err and err.count("\n") == 1


def _plain_run(data_env, tmp_path, name: str, limit: int, **kw) -> str:
    gold = golds(data_env, "gsm8k", limit)
    out = tmp_path / name
    run_eval(
        cfg_for(tmp_path, method="plain", limit=limit, out=str(out), **kw),
        backend=Scripted(lambda s, u: plain_text(gold[u])),
    )
    return str(out)


def _table_rows(out: str) -> list[list[str]]:
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in out.splitlines() if ln.startswith("|")]


def test_compare_shows_question_counts_and_marks_other_questions(data_env, tmp_path, run_cli):
    """Runs of 2 and 4 questions stood side by side unmarked: each dataset shows its question
    count, lettered per question set when the runs evaluated different questions."""
    small, big, big2 = (_plain_run(data_env, tmp_path, n, lim) for n, lim in (("small", 2), ("big", 4), ("big2", 4)))
    rc, out, err = run_cli(["eval", "compare", small, big, big2, "--out", str(tmp_path / "cmp")])
    assert rc == 0, err
    head, _, *rows = _table_rows(out)
    col = head.index("gsm8k questions")
    assert [r[col] for r in rows] == ["2 [A]", "4 [B]", "4 [B]"]
    assert "different questions on gsm8k" in out
    rc, out, _ = run_cli(["eval", "compare", big, big2, "--out", str(tmp_path / "cmp")])
    head, _, *rows = _table_rows(out)
    assert [r[head.index("gsm8k questions")] for r in rows] == ["4", "4"] and "different questions" not in out


def test_compare_refuses_a_run_twice_and_marks_a_copy(data_env, tmp_path, run_cli):
    import shutil

    run = _plain_run(data_env, tmp_path, "once", 2)
    rc, _, err = run_cli(["eval", "compare", run, str(tmp_path / "." / "once"), "--out", str(tmp_path / "cmp")])
    assert rc == 2 and "are the same run" in err and err.count("\n") == 1, err
    shutil.copytree(run, tmp_path / "copy")
    rc, out, err = run_cli(["eval", "compare", run, str(tmp_path / "copy"), "--out", str(tmp_path / "cmp")])
    assert rc == 0, err
    _, _, first, second = _table_rows(out)
    assert "(= row" not in first[0] and second[0].endswith("(= row 1)") and "the same evaluation as row N" in out


def test_compare_labels_runs_by_training_run_and_step_one_legend_entry_each(
    data_env, tiny_model_dir, tmp_path, run_cli
):
    """Two evaluations of ``RUN/checkpoints/latest`` (step 2, then step 4) were both labelled
    ``latest``, with one legend entry for two points: now each row names the run and step, and
    rows that would still read alike add their eval folder."""
    from eval.compare import load_runs, scatter_figure

    run = local_run(tmp_path, tiny_model_dir)
    latest = str(run / "checkpoints" / "latest")
    at2 = _plain_run(data_env, tmp_path, "at2", 2, model=latest)
    train_further(run, 4)
    at4 = _plain_run(data_env, tmp_path, "at4", 2, model=latest)
    rc, out, err = run_cli(["eval", "compare", at2, at4, "--out", str(tmp_path / "cmp")])
    assert rc == 0, err
    assert [r[0] for r in _table_rows(out)[2:]] == ["train_run step 2", "train_run step 4"]
    twice = [_plain_run(data_env, tmp_path, name, 2) for name in ("x", "y")]  # one model and method, two folders
    for dirs, labels in (
        ([at2, at4], ["train_run step 2 / plain", "train_run step 4 / plain"]),
        (twice, ["scripted-model (x) / plain", "scripted-model (y) / plain"]),
    ):
        fig = scatter_figure(load_runs(dirs))
        assert [t.get_text() for t in fig.legends[0].get_texts()] == labels


@pytest.mark.parametrize(
    "edit, needle",
    [
        (lambda s: s["datasets"]["gsm8k"].update(accuracy="high"), "gsm8k.accuracy is not a rate in [0, 1]: 'high'"),
        (lambda s: s["datasets"]["gsm8k"].update(accuracy=1.5), "gsm8k.accuracy is not a rate in [0, 1]: 1.5"),
        (
            lambda s: s["datasets"]["gsm8k"].update(mean_tokens=float("nan")),
            "gsm8k.mean_tokens is not a number >= 0: nan",
        ),
        (lambda s: s["datasets"]["gsm8k"].update(n_samples="2"), "gsm8k.n_samples is not a count: '2'"),
        (lambda s: s.update(datasets=["gsm8k"]), "no 'datasets' object"),
        (lambda s: s["datasets"].update(gsm8k=3), "dataset 'gsm8k' is not an object"),
        (lambda s: s.update(method=["plain"]), "'method' is not text"),
        (lambda s: s.update(checkpoint={"step": "two"}), "'checkpoint' is not a step with its path"),
    ],
)
def test_compare_hand_edited_summary_is_one_line(data_env, tmp_path, run_cli, edit, needle):
    import json
    from pathlib import Path

    run = _plain_run(data_env, tmp_path, "edited", 2)
    path = Path(run) / "summary.json"
    summary = json.loads(path.read_text())
    edit(summary)
    path.write_text(json.dumps(summary))
    rc, _, err = run_cli(["eval", "compare", run, "--out", str(tmp_path / "cmp")])
    assert rc == 2 and f"{path}: not a pasr eval summary ({needle})" in err, err
    assert err.count("\n") == 1 and "Traceback" not in err
