"""One flag vocabulary across ``pasr`` subcommands (docs/development.md, "CLI flag vocabulary").

On the parsers :func:`pasr_cli.build_parser` builds: every canonical flag parses; every old
spelling kept as a hidden alias parses to the same ``dest`` and value as its canonical flag and
prints a one-line deprecation note; aliases are absent from ``--help``; one concept has one
spelling in every subcommand that has it; ``--out`` is a folder everywhere (the old file form of
``pasr eval compare`` and ``pasr data prepare`` still works, with the note).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest

from data.cli_flags import DeprecatedAlias
from pasr_cli import build_parser, main

PNG = b"\x89PNG\r\n\x1a\n"


def walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(path, parser) of every subcommand, nested ones (``data prepare``, ``eval compare``) too."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*path, name), sub
                yield from walk(sub, (*path, name))


PARSERS: dict[tuple[str, ...], argparse.ArgumentParser] = dict(walk(build_parser()))


def visible(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The optional actions ``--help`` shows (not -h itself)."""
    return [
        a
        for a in parser._actions
        if a.option_strings and a.help is not argparse.SUPPRESS and not isinstance(a, argparse._HelpAction)
    ]


def aliases(parser: argparse.ArgumentParser) -> list[DeprecatedAlias]:
    return [a for a in parser._actions if isinstance(a, DeprecatedAlias)]


def visible_options(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in visible(parser) for s in a.option_strings}


def mentions(text: str, flag: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text) is not None


# What each subcommand needs besides the flag under test (required options, positionals).
REQUIRED = {
    ("data", "preview"): ["--dataset", "gsm8k"],
    ("data", "prepare"): ["--dataset", "gsm8k", "--out", "d"],
    ("judge", "try"): ["--dataset", "gsm8k"],
    ("stats",): ["p", "--out", "d"],
    ("eval", "compare"): ["d1"],
    ("jobs", "status"): ["ID"],
    ("jobs", "logs"): ["ID"],
    ("jobs", "stop"): ["ID"],
}


def sample_args(action: argparse.Action) -> list[str]:
    """Arguments a flag accepts, not its default: a choice, else 2 (if its type takes it), else text."""
    if action.nargs == 0:
        return []
    if action.choices:
        value = str(next(c for c in action.choices if c != action.default))
    else:
        value = "x"
        try:
            (action.type or str)("2")
            value = "2"
        except (ValueError, TypeError, argparse.ArgumentTypeError):
            pass
    return [value] * (action.nargs if isinstance(action.nargs, int) else 1)


CANONICAL_CASES = [
    pytest.param(path, option, id=f"{' '.join(path)} {option}")
    for path, parser in PARSERS.items()
    for action in visible(parser)
    for option in action.option_strings
]


@pytest.mark.parametrize("path,option", CANONICAL_CASES)
def test_every_canonical_flag_parses(path, option, capsys):
    parser = PARSERS[path]
    [action] = [a for a in parser._actions if option in a.option_strings]
    args = build_parser().parse_args([*path, *REQUIRED.get(path, []), option, *sample_args(action)])
    assert getattr(args, action.dest) != action.default, (option, getattr(args, action.dest))
    assert capsys.readouterr().err == ""  # no deprecation note for a canonical spelling


# (subcommand, what else it needs, the old spelling, the canonical one): the same namespace
ALIAS_CASES = [
    (("eval",), ["--model", "m"], ["--datasets", "gsm8k", "math500"], ["--dataset", "gsm8k", "math500"]),
    (("eval",), ["--model", "m"], ["--countdown-difficulty", "2"], ["--difficulty", "2"]),
    (("eval",), ["--model", "m"], ["--judge-url", "http://h:8000/v1"], ["--judge-base-url", "http://h:8000/v1"]),
    (("eval",), ["--model", "m"], ["--no-progress"], ["--progress", "off"]),
    (("submit",), ["--address", "http://h:8265"], ["--job-id", "run-1"], ["--submission-id", "run-1"]),
]


@pytest.mark.parametrize("path,base,old,new", ALIAS_CASES, ids=[c[2][0] for c in ALIAS_CASES])
def test_an_alias_parses_as_its_canonical_flag_with_a_note(path, base, old, new, capsys):
    parser = build_parser()
    canonical = vars(parser.parse_args([*path, *base, *new]))
    assert capsys.readouterr().err == ""
    aliased = vars(parser.parse_args([*path, *base, *old]))
    err = capsys.readouterr().err
    assert aliased == canonical
    [action] = [a for a in aliases(PARSERS[path]) if old[0] in a.option_strings]
    assert canonical[action.dest] != vars(parser.parse_args([*path, *base]))[action.dest]  # the flag set something
    replacement = " ".join(new) if len(old) == 1 else new[0]  # --no-progress: --progress off
    assert err == (
        f"pasr {' '.join(path)}: warning: {old[0]} is deprecated and will be removed in the next release; "
        f"use {replacement}\n"
    )


def test_every_alias_is_hidden_and_tested():
    """Each hidden alias: help suppressed, the dest of a visible canonical flag, absent from
    --help and the usage line, and one of ALIAS_CASES (a new alias gets tested)."""
    tested = {(path, old[0]) for path, _, old, _ in ALIAS_CASES}
    found = set()
    for path, parser in PARSERS.items():
        text = parser.format_help()
        canonical = {s: a for a in visible(parser) for s in a.option_strings}
        for alias in aliases(parser):
            [old] = alias.option_strings
            found.add((path, old))
            assert alias.help is argparse.SUPPRESS and alias.default is argparse.SUPPRESS
            assert canonical[alias.canonical].dest == alias.dest, old
            assert not mentions(text, old), f"pasr {' '.join(path)} --help shows {old}"
            assert mentions(text, alias.canonical)
    assert found == tested


def test_help_shows_no_old_spelling_anywhere():
    old = {"--datasets", "--no-progress", "--judge-url", "--countdown-difficulty", "--job-id"}
    for path, parser in PARSERS.items():
        text = parser.format_help()
        assert not [o for o in old if mentions(text, o)], path


# concept -> (canonical spelling, metavar or None, the subcommands that have it, spellings no
# subcommand may show for it)
DATA_SOURCE = {("data", "preview"), ("data", "prepare"), ("judge", "try")}
JOBS = {("jobs", "status"), ("jobs", "logs"), ("jobs", "stop"), ("jobs", "list")}
CONCEPTS = {
    "data set(s)": (
        "--dataset",
        "NAME_OR_FILE",
        DATA_SOURCE | {("eval",)},
        ["--datasets", "--data-set", "--dataset-name"],
    ),
    "output folder": (
        "--out",
        "DIR",
        {("data", "prepare"), ("eval",), ("eval", "compare"), ("stats",)},
        ["--out-dir", "--output", "--output-dir", "--outdir", "-o"],
    ),
    "progress bar": ("--progress", None, {("eval",), ("stats",)}, ["--no-progress", "--progress-bar", "--quiet"]),
    "problem level": ("--difficulty", None, DATA_SOURCE | {("eval",)}, ["--countdown-difficulty", "--level"]),
    "LLM judge endpoint": (
        "--judge-base-url",
        "URL",
        {("eval",), ("judge", "try")},
        ["--judge-url", "--judge-endpoint", "--base-url"],
    ),
    "first N": ("--limit", "N", DATA_SOURCE | {("eval",)}, ["--max-examples", "--num-examples", "--n-examples"]),
    "seed": ("--seed", "N", DATA_SOURCE | {("eval",), ("stats",)}, ["--random-seed"]),
    "CPU threads": ("--threads", "N", {("eval",)}, ["--num-threads", "--n-threads", "--nthreads"]),
    "training run folder": ("--run-dir", None, {("train",)}, ["--rundir"]),
    # the dashboard's URL (submit, jobs) or the cluster's GCS HOST:PORT (judge serve joins it as a driver)
    "Ray address": ("--address", None, JOBS | {("submit",), ("judge", "serve")}, ["--ray-address", "--dashboard"]),
    "dashboard timeout": ("--timeout", "SECONDS", JOBS | {("submit",)}, ["--timeout-s", "--request-timeout"]),
    "follow a job": ("--follow", None, {("jobs", "logs"), ("submit",)}, ["--tail", "--stream"]),
    "submission id": ("--submission-id", "ID", {("submit",)}, ["--job-id"]),
}


@pytest.mark.parametrize("concept", list(CONCEPTS))
def test_one_concept_has_one_spelling_across_subcommands(concept):
    canonical, metavar, where, variants = CONCEPTS[concept]
    having = {path for path, parser in PARSERS.items() if canonical in visible_options(parser)}
    assert having == where, f"{canonical} in {sorted(having)}, expected {sorted(where)}"
    for path, parser in PARSERS.items():
        shown = visible_options(parser) & set(variants)
        assert not shown, f"pasr {' '.join(path)} shows {shown} for {concept} (spelled {canonical})"
        if path in where and metavar is not None:
            [action] = [a for a in visible(parser) if canonical in a.option_strings]
            assert action.metavar == metavar, (path, canonical, action.metavar)


def test_address_names_what_it_takes():
    """``--address URL`` where it is the dashboard (submit, jobs), ``--address HOST:PORT`` where
    it is the cluster's GCS address (judge serve)."""
    for path in CONCEPTS["Ray address"][2]:
        [action] = [a for a in visible(PARSERS[path]) if "--address" in a.option_strings]
        assert action.metavar == ("HOST:PORT" if path == ("judge", "serve") else "URL"), path


def test_progress_takes_the_same_three_values_wherever_it_is():
    for path in CONCEPTS["progress bar"][2]:
        [action] = [a for a in visible(PARSERS[path]) if "--progress" in a.option_strings]
        assert tuple(action.choices) == ("auto", "on", "off") and action.default == "auto", path
    args = build_parser().parse_args(["eval", "--model", "m", "--progress", "off"])
    assert args.progress == "off"


# ----------------------------------------------------------------------------- --out is a folder
def write_summary(run_dir: Path, method: str, accuracy: float) -> str:
    run_dir.mkdir(parents=True)
    summary = {
        "model": "org/m",
        "method": method,
        "datasets": {"gsm8k": {"accuracy": accuracy, "mean_tokens": 100.0, "n_samples": 4}},
    }
    (run_dir / "summary.json").write_text(json.dumps(summary))
    return str(run_dir)


def test_eval_compare_out_is_a_folder(tmp_path, capsys):
    dirs = [write_summary(tmp_path / "plain", "plain", 0.25), write_summary(tmp_path / "pasr", "pasr", 0.5)]
    out = tmp_path / "cmp"
    assert main(["eval", "compare", *dirs, "--out", str(out)]) == 0
    std = capsys.readouterr()
    assert std.err == ""
    assert sorted(p.name for p in out.iterdir()) == ["eval_compare.md", "eval_compare.png"]
    assert (out / "eval_compare.png").read_bytes()[:8] == PNG
    table = (out / "eval_compare.md").read_text()
    assert table.startswith("| model") and "| pasr " in table and "50.0" in table
    assert table.strip() in std.out


@pytest.mark.parametrize("suffix", [".png", ".md"])
def test_eval_compare_out_file_is_a_legacy_form(tmp_path, capsys, suffix):
    dirs = [write_summary(tmp_path / "plain", "plain", 0.25)]
    legacy = tmp_path / "sub" / f"compare{suffix}"
    assert main(["eval", "compare", *dirs, "--out", str(legacy)]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pasr eval compare: warning: --out with a file" in err and "--out DIR" in err
    assert (tmp_path / "sub" / "compare.png").read_bytes()[:8] == PNG
    assert (tmp_path / "sub" / "compare.md").read_text().startswith("| model")


def test_eval_compare_out_an_existing_folder_named_like_a_file(tmp_path, capsys):
    from eval.cli import compare_outputs

    odd = tmp_path / "plots.png"
    odd.mkdir()
    assert compare_outputs(str(odd)) == (odd / "eval_compare.md", odd / "eval_compare.png")
    assert capsys.readouterr().err == ""


def test_data_prepare_out_is_a_folder(tmp_path, capsys):
    pytest.importorskip("pyarrow")
    out = tmp_path / "data"
    assert main(["data", "prepare", "--dataset", "synthetic", "--n", "3", "--out", str(out)]) == 0
    assert main(["data", "prepare", "--dataset", "countdown", "--split", "test", "--n", "3", "--out", str(out)]) == 0
    rows = tmp_path / "my_rows.jsonl"
    rows.write_text('{"question": "1+1?", "answer": "2"}\n')
    assert main(["data", "prepare", "--dataset", str(rows), "--out", str(out)]) == 0
    assert main(["data", "prepare", "--dataset", str(rows), "--split", "train", "--out", str(out)]) == 0
    std = capsys.readouterr()
    assert std.err == ""
    names = ["countdown_test.parquet", "my_rows.parquet", "my_rows_train.parquet", "synthetic_train.parquet"]
    assert sorted(p.name for p in out.iterdir()) == names
    assert f"to {out / 'synthetic_train.parquet'}" in std.out


def test_data_prepare_out_file_is_a_legacy_form(tmp_path, capsys):
    pytest.importorskip("pyarrow")
    legacy = tmp_path / "t.parquet"
    assert main(["data", "prepare", "--dataset", "synthetic", "--n", "3", "--out", str(legacy)]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pasr data prepare: warning: --out with a file" in err
    assert legacy.is_file()
