"""`pasr eval`'s selection flags (--select, --max-score-tokens, --score-prompt): each misuse as one
line, what reaches the run's config, the help text, and `pasr eval compare` naming the selection."""

from __future__ import annotations

import pytest

from eval.run import EvalError, run_eval
from tests.scripted_eval import cfg_for
from tests.scripted_selection import Scripted, golds, scripted_samples


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--method", "best-of-n", "--samples", "0"], "--samples must be >= 1, got 0"),
        (
            ["--method", "plain", "--select", "best"],
            "--select applies to --method self-refine (latest|best) and best-of-n (majority|score), not to plain",
        ),
        (["--method", "pasr", "--select", "majority"], "not to pasr"),
        (["--method", "reflect-retry", "--select", "score"], "not to reflect-retry"),
        (
            ["--method", "self-refine", "--select", "majority"],
            "--select majority is not a choice of --method self-refine: latest (the default) or best",
        ),
        (
            ["--method", "best-of-n", "--select", "best"],
            "--select best is not a choice of --method best-of-n: majority (the default) or score",
        ),
        (["--method", "best-of-n", "--select", "latest"], "is not a choice of --method best-of-n"),
        (["--method", "best-of-n", "--max-score-tokens", "64"], "--max-score-tokens applies to --select best"),
        (["--method", "self-refine", "--score-prompt", "self_score"], "--score-prompt applies to --select best"),
        (["--method", "self-refine", "--select", "best", "--max-score-tokens", "0"], "--max-score-tokens must be >= 1"),
        (["--method", "self-refine", "--select", "best", "--score-prompt", "nosuch"], "unknown prompt 'nosuch'"),
    ],
)
def test_cli_selection_errors_are_one_line(tmp_path, run_cli, argv, needle):
    base = [
        "eval",
        "--model",
        "m",
        "--dataset",
        "gsm8k",
        "--limit",
        "1",
        "--out",
        str(tmp_path / "o"),
        "--progress",
        "off",
    ]
    rc, _, err = run_cli([*base, *argv])
    assert rc == 2 and needle in err and err.count("\n") == 1 and "Traceback" not in err, err
    assert not (tmp_path / "o" / "run.json").exists()


def test_cli_passes_the_selection_flags(tmp_path, run_cli, monkeypatch):
    import eval.run

    seen = []

    def fake_run_eval(cfg):
        seen.append(cfg)
        raise EvalError("stop here")

    monkeypatch.setattr(eval.run, "run_eval", fake_run_eval)
    base = ["eval", "--model", "m", "--dataset", "gsm8k", "--out", str(tmp_path / "o")]
    run_cli(
        [
            *base,
            "--method",
            "best-of-n",
            "--samples",
            "8",
            "--select",
            "score",
            "--max-score-tokens",
            "64",
            "--score-prompt",
            "self_score",
        ]
    )
    run_cli([*base, "--method", "self-refine"])
    a, b = seen
    assert (a.method, a.samples, a.select, a.max_score_tokens, a.score_prompt) == (
        "best-of-n",
        8,
        "score",
        64,
        "self_score",
    )
    assert a.records_per_question == 1 and a.selection().candidates == 8
    assert (b.select, b.max_score_tokens, b.score_prompt) == (None, None, None)
    assert b.selection().resolved("self-refine") == "latest"


def test_help_explains_every_new_flag():
    from pasr_cli import build_parser

    help_text = build_parser()._subparsers._group_actions[0].choices["eval"].format_help()
    flat = " ".join(help_text.split())
    for needle in (
        "best-of-n",
        "--select {latest,best,majority,score}",
        "--max-score-tokens",
        "--score-prompt",
        "self-refine: latest (default, Madaan et al.) or best",
        "best-of-n: majority (default",
        "the earlier on a tie",
        "the earliest on a tie",
        "prompts/templates/self_score.txt",
        "Tokens of scoring passes count",
        "best-of-n: the N candidates",
        "a failed score",
    ):
        assert needle in flat, needle


def test_compare_names_the_selection(data_env, tmp_path, capsys):
    from eval.compare import comparison_table, load_runs

    gold = golds(1)
    (q,) = gold
    respond = scripted_samples({q: [f"<answer>\\boxed{{{gold[q]}}}</answer>"] * 2})
    run_eval(
        cfg_for(tmp_path, method="best-of-n", samples=2, limit=1, out=str(tmp_path / "bon")), backend=Scripted(respond)
    )
    table = comparison_table(load_runs([str(tmp_path / "bon")]))
    assert "best-of-n (2 candidates, select majority)" in table
