"""`pasr eval compare`: the table and figure over finished runs, and a directory that holds no run."""

from __future__ import annotations

from eval.run import run_eval
from tests.scripted_eval import Scripted, cfg_for, golds, pasr_text, plain_text


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
