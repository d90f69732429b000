"""``pasr stats``: refine-tag usage statistics, report and plots from rollout dumps.

    pasr stats PATH... --out DIR [--strict] [--top-k N] [--examples N] [--pair BEFORE AFTER]

PATHs are files or directories (searched recursively for ``*.jsonl``). Record files of both
training engines (``rollouts/step_*.jsonl``, ``rollouts.jsonl``) and of ``pasr eval``
(``samples.jsonl``) are told apart by content: records with ``step`` set are training, records
with ``dataset`` set are eval. ``metrics.jsonl`` files are not records; their numeric series are
plotted as extra trend lines. Writes ``DIR/report.md``, ``DIR/stats.json`` (every number) and
PNG plots.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

PROGRESS_AUTO_BYTES = 32 << 20
MAX_CORRUPT_LISTED = 50  # corrupt lines kept (in memory, stats.json, the report); all are counted


def build_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths", nargs="+", metavar="PATH", help="rollout dumps: JSONL files or directories (recursive)"
    )
    parser.add_argument(
        "--out", required=True, metavar="DIR", help="output directory for report.md, stats.json and plots"
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="stop at the first corrupt line or record of an unknown schema version (exit 2) instead of skipping it",
    )
    parser.add_argument(
        "--top-k", type=int, default=20, metavar="N", help="most common refine texts listed per group (default 20)"
    )
    parser.add_argument(
        "--examples",
        type=int,
        default=3,
        metavar="N",
        help="example responses per cell (with/without refine x correct/wrong) per group (default 3)",
    )
    parser.add_argument(
        "--pair",
        nargs=2,
        action="append",
        metavar=("BEFORE", "AFTER"),
        help="compare two evaluations sample by sample, BEFORE first: a pasr eval run (its directory, "
        "RUN_ID or RUN_ID:METHOD, e.g. run1:plain run2:pasr) or a training run's in-training "
        "evaluation (RUN_ID/TAG@STEP, e.g. demo/warmup@60); repeatable. Default: only what the "
        "inputs order, never the order of the arguments: of two eval runs the plain one first, or "
        "two checkpoints of one training run by step (their summary.json); a training run's "
        "in-training evaluations by step (warmup before final). Each pair is printed with why",
    )
    parser.add_argument(
        "--correct-at",
        type=float,
        default=None,
        metavar="SCORE",
        help="judge score at or above which an answer counts as correct (default 1.0, as the training metrics)",
    )
    parser.add_argument("--seed", type=int, default=0, metavar="N", help="seed of the example sampling (default 0)")
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    parser.add_argument(
        "--montage",
        action="store_true",
        help="also tile every plot into one small DIR/montage.png (to glance at, or for docs)",
    )
    parser.add_argument(
        "--progress",
        choices=("auto", "on", "off"),
        default="auto",
        help=f"progress bar by bytes read (auto: inputs over {PROGRESS_AUTO_BYTES >> 20} MiB)",
    )


def _collect(args):
    from data.cli_errors import CliError
    from data.records import ErrorSample, RecordFormatError, iter_record_dicts
    from eval.stats import StatsInputError
    from eval.stats.accumulate import Collector
    from eval.stats.discovery import discover, metrics_labels, run_dir
    from eval.stats.metrics_log import read_metrics
    from rewards.refine_quality import CORRECT_AT

    if args.top_k < 0 or args.examples < 0:
        raise CliError("--top-k and --examples must be >= 0")
    correct_at = CORRECT_AT if args.correct_at is None else args.correct_at
    try:
        inputs = discover(args.paths)
    except StatsInputError as exc:
        raise CliError(str(exc)) from None
    if not inputs.records:
        raise CliError(f"no rollout record files (*.jsonl) found in {' '.join(args.paths)}")

    total = inputs.record_bytes
    show = args.progress == "on" or (args.progress == "auto" and total >= PROGRESS_AUTO_BYTES)
    bar = None
    if show:
        from tqdm import tqdm

        bar = tqdm(total=total, unit="B", unit_scale=True, desc="pasr stats", file=sys.stderr)

    col = Collector(n_examples=args.examples, correct_at=correct_at, seed=args.seed)
    errors = ErrorSample(keep=MAX_CORRUPT_LISTED)  # bounded however much of the input is corrupt
    run_ids_by_dir = inputs.run_ids
    add = col.add
    try:
        for path in inputs.records:
            ids: set[str] = set()
            where = run_dir(path)
            where_s = str(where)
            for rec in iter_record_dicts(path, args.strict, errors, bar.update if bar else None):
                add(rec, where_s)
                ids.add(str(rec["run_id"]))
            run_ids_by_dir.setdefault(where, set()).update(ids)
        metrics = {}
        for label, mpath in zip(metrics_labels(inputs.metrics, run_ids_by_dir), inputs.metrics):
            metrics[label] = read_metrics(mpath, args.strict, errors)
    except RecordFormatError as exc:
        raise CliError(str(exc)) from None
    finally:
        if bar is not None:
            bar.close()
    return inputs, col, errors, metrics, correct_at


def _runs(run_ids_by_dir) -> dict[str, dict]:
    """stats.json ``runs``: per run id, the directories its records came from (labels, see
    :mod:`eval.stats.runs`) and the refine reward its ``config.yaml`` names (None: not recorded)."""
    from eval.stats.runs import read_run

    out: dict[str, dict] = {}
    for where, ids in run_ids_by_dir.items():
        info = read_run(where)
        for run_id in sorted(ids):
            entry = out.setdefault(run_id, {"dirs": [], "reward": None})
            entry["dirs"].append(info.label)
            if entry["reward"] is None and info.reward is not None:
                entry["reward"] = info.reward.to_json()
    for entry in out.values():
        entry["label"] = entry["dirs"][0] if len(entry["dirs"]) == 1 else None
    return out


def run(args) -> int:
    from data.cli_errors import CliError, why_mkdir_failed
    from eval.stats import StatsInputError
    from eval.stats.refine_term import reach as refine_term_reach
    from eval.stats.refine_term import reach_lines
    from eval.stats.report import render, skipped_lines, transition_words

    if args.montage and args.no_plots:
        raise CliError("--montage tiles the plots: drop --no-plots")
    t0 = time.perf_counter()
    inputs, col, errors, metrics, correct_at = _collect(args)
    if col.n_records == 0:
        # A report of zero records looks like a result; an empty, binary or wrong file given
        # by mistake is far likelier than a real run that wrote nothing.
        files = f"{len(inputs.records)} file(s) ({', '.join(str(p) for p in inputs.records[:3])}"
        files += ", ...)" if len(inputs.records) > 3 else ")"
        why = (
            f"{skipped_lines(errors.count, errors.unknown_version)}, first: {errors.first[0]}"
            if errors.count
            else "they are empty"
        )
        raise CliError(f"no rollout records in {files}: {why}")
    kinds = {"train": 0, "val": 0, "eval": 0, "other": 0}
    for (kind, *_), g in col.groups.items():
        kinds[kind] += g.n

    from eval.stats.pairing import Pairing

    try:
        if args.pair:
            pairs = [Pairing(col.pairs.resolve(a), col.pairs.resolve(b), "as given by --pair") for a, b in args.pair]
            pair_notes: list[str] = []
        else:
            pairs, pair_notes = col.pairs.auto_pairs()
    except StatsInputError as exc:
        raise CliError(str(exc)) from None

    elapsed = time.perf_counter() - t0
    stats = {
        "version": 1,
        "settings": {
            "correct_at": correct_at,
            "token_count": "whitespace-separated tokens (str.split) for refine/think/answer lengths",
            "top_k": args.top_k,
            "examples": args.examples,
            "seed": args.seed,
            "strict": args.strict,
        },
        "inputs": {
            "paths": [str(p) for p in args.paths],
            "record_files": [str(p) for p in inputs.records],
            "metrics_files": [str(p) for p in inputs.metrics],
            "summary_files": [str(p) for p in inputs.summaries],
            "skipped_files": [{"file": f, "reason": r} for f, r in inputs.skipped],
            "bytes": inputs.record_bytes,
            "n_records": col.n_records,
            "n_train_records": kinds["train"],
            "n_val_records": kinds["val"],
            "n_eval_records": kinds["eval"],
            "n_other_records": kinds["other"],
            "duplicate_eval_keys": col.pairs.duplicate_keys,
        },
        "corrupt_lines": {  # every skipped line, records of an unknown schema version included
            "count": errors.count,
            "unknown_version": errors.unknown_version,
            "first": [{"file": e.path, "line": e.line_no, "reason": e.reason} for e in errors.first],
        },
        "groups": {g.key: g.to_json(args.top_k) for g in col.ordered_groups()},
        "trends": col.trends.train_json(),
        "val_trends": col.trends.val_json(),
        "metrics_trends": metrics,
        "refine_term": refine_term_reach(metrics),
        "runs": _runs(inputs.run_ids),
        "eval_runs": col.pairs.systems(),
        "in_training_evaluations": col.pairs.evaluations(),
        "transitions": [col.pairs.transition(p) for p in pairs],
        "pair_notes": pair_notes,
        "rrr": col.rrr.to_json(),
        "plots": [],
        "elapsed_s": elapsed,
    }

    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CliError(f"cannot create --out {out}: {why_mkdir_failed(out, exc)}") from None
    written = ""
    if not args.no_plots:
        from eval.stats.plots import make_plots

        stats["plots"] = make_plots(stats, out)
        if args.montage:
            from eval.stats.plots import montage

            written = f", {montage(out, stats['plots'])}"
    (out / "stats.json").write_text(json.dumps(stats, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    (out / "report.md").write_text(render(stats), encoding="utf-8")

    if errors.unknown_version:
        print(
            f"pasr stats: warning: {errors.unknown_version} record(s) of an unknown schema version skipped "
            f"(first: {errors.first_unknown_version}); --strict refuses them",
            file=sys.stderr,
        )
    for i, tr in enumerate(stats["transitions"], 1):
        print(
            f"pasr stats: pair {i}: BEFORE = {tr['before_label']}; AFTER = {tr['after_label']}; "
            f"why this order: {tr['order']}; {transition_words(tr)}"
        )
    for note in pair_notes:
        print(f"pasr stats: {note.replace('`', '')}")
    note = f", {skipped_lines(errors.count, errors.unknown_version)} skipped" if errors.count else ""
    print(
        f"pasr stats: {col.n_records} records from {len(inputs.records)} file(s) in {elapsed:.1f} s{note} -> "
        f"{out / 'report.md'}, {out / 'stats.json'}, {len(stats['plots'])} plot(s){written}"
    )
    # last: what a warm-up -> final gain above is and is not (make demo's closing lines)
    for label, reached in stats["refine_term"].items():
        for line in reach_lines(label, reached):
            print(f"pasr stats: {line}")
    return 0
