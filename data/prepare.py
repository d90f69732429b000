"""``pasr data``: list the known data sets, preview rows, and write verl RL parquet files.

    pasr data list
    pasr data preview --dataset gsm8k --limit 3
    pasr data prepare --dataset gsm8k --split train --out ~/data/pasr        # ~/data/pasr/gsm8k_train.parquet
    pasr data prepare --dataset synthetic --n 2000 --seed 0 --difficulty 2 --out data   # data/synthetic_train.parquet
    pasr data prepare --dataset countdown --n 500 --seed 0 --difficulty 2 --out data    # data/countdown_train.parquet
    pasr data prepare --dataset evol.jsonl --question-field instruction --answer-field output \\
        --out data  # data/evol.parquet
    pasr data prepare --dataset math_train.jsonl --split train \\
        --out data  # MATH problem/solution: gold = last \\boxed{}

``--out`` is a folder, as in every subcommand (data.cli_flags); the old ``--out FILE.parquet``
still writes that file, with a deprecation note.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from data.cli_errors import CliError, why_mkdir_failed
from data.cli_flags import legacy_out_file
from prompts import DEFAULT_REFINE

_DATASET_HELP = (
    "a known set ({names}; {generated} are generated, the others read from a local copy in "
    "$PASR_DATA_DIR or ../shared/data beside the repository, else the Hugging Face hub) or a path "
    "to a .jsonl/.json/.parquet file (GSM8K, MATH-500, AIME, MATH problem/solution, problem/answer, "
    "prompt/answer and verl RL layouts are detected, `pasr data list` names them; map other fields "
    "with --question-field/--answer-field)"
)


def _add_source_args(p: argparse.ArgumentParser, limit_default: int | None) -> None:
    # The generated sets' names, splits and difficulty levels come from data.loaders and the
    # generators themselves, so the help cannot drift from what the loaders accept.
    from data import countdown, synthetic
    from data.loaders import DATASETS, GENERATED

    generated = " or ".join(GENERATED)
    by_default_split: dict[str, list[str]] = {}
    for name, spec in DATASETS.items():
        by_default_split.setdefault(spec.default_split, []).append(name)
    split_defaults = ", ".join(f"{split} for {'/'.join(names)}" for split, names in by_default_split.items())
    p.add_argument(
        "--dataset",
        required=True,
        metavar="NAME_OR_FILE",
        help=_DATASET_HELP.format(names=", ".join(DATASETS), generated=" and ".join(GENERATED)),
    )
    p.add_argument(
        "--split",
        default=None,
        metavar="SPLIT",
        help=f"train or test (default: {split_defaults}; the test split of {generated} is held out: "
        "it shares no problem with train, whatever --n/--seed drew either)",
    )
    p.add_argument(
        "--limit",
        type=int,
        default=limit_default,
        metavar="N",
        help="read only the first N rows" + (f" (default {limit_default})" if limit_default else " (default: all)"),
    )
    generator = p.add_argument_group(f"generated data (--dataset {generated})")
    generator.add_argument(
        "--n", type=int, default=None, metavar="N", help="number of problems (default: --limit, else 1000)"
    )
    generator.add_argument("--seed", type=int, default=None, metavar="N", help="generator seed (default 0)")
    levels = "; ".join(
        f"{d} = {level.count} numbers up to {level.high}, target up to {level.max_target}"
        for d, level in countdown.LEVELS.items()
    )
    generator.add_argument(
        "--difficulty",
        type=int,
        choices=sorted(set(synthetic.DIFFICULTIES) | set(countdown.DIFFICULTIES)),
        default=None,
        help="synthetic: 1 = one +/- step, 2 = two steps, 3 = three steps (+, -, sometimes x2/x3); "
        f"countdown (how many numbers a problem gives): {levels}. Default 1",
    )
    gen = p.add_argument_group("generic data files (--dataset FILE)")
    gen.add_argument("--question-field", metavar="FIELD", help="field holding the question (e.g. instruction)")
    gen.add_argument("--answer-field", metavar="FIELD", help="field holding the reference answer (e.g. output)")
    gen.add_argument("--id-field", metavar="FIELD", help="field holding a row id (default: the row index)")
    gen.add_argument("--input-field", metavar="FIELD", help="optional field appended to the question (alpaca 'input')")
    gen.add_argument(
        "--data-source", metavar="NAME", help="data_source written for a file's rows (default: the file stem)"
    )


def build_parser(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="data_command", metavar="ACTION")
    sub.required = True

    sub.add_parser(
        "list",
        help="list the known data sets and where each split would be read from",
        description="List the known data sets, their splits, and whether a local copy or the hub is used.",
    )

    prev = sub.add_parser(
        "preview",
        help="print the first rows of a data set as the loaders see them",
        description="Print the first rows (id, data source, question, gold answer) of a data set.",
    )
    _add_source_args(prev, limit_default=3)
    prev.add_argument("--jsonl", action="store_true", help="print one JSON object a row instead of text")

    prep = sub.add_parser(
        "prepare",
        help="write a verl RL parquet file (prompt with the refine system prompt, rule ground truth)",
        description=(
            "Write a verl RL parquet file: data_source, prompt (system = the refine system prompt, "
            "user = the question), ability, reward_model {style: rule, ground_truth}, "
            "extra_info {index, id, question, split}. Use it as data.train_files / data.val_files."
        ),
    )
    _add_source_args(prep, limit_default=None)
    prep.add_argument(
        "--system-prompt",
        default=DEFAULT_REFINE,
        metavar="NAME_OR_FILE",
        help="system prompt: a template name from prompts/templates or a text file (default refine_system); "
        "'none' writes no system message",
    )
    prep.add_argument("--ability", default="math", help="the ability column (default math)")
    prep.add_argument(
        "--allow-eval-as-train",
        action="store_true",
        help="with --split train: write a data file that looks like an evaluation set (its name, its rows' "
        "split, or questions of a known test set) as training data anyway; refused without it",
    )
    prep.add_argument(
        "--keep-existing",
        action="store_true",
        help="keep an output file already prepared from the same --dataset instead of preparing it again "
        "(nothing is read: a resubmitted job needs neither the hub nor the source file); delete it to redo it",
    )
    prep.add_argument(
        "--out",
        required=True,
        metavar="DIR",
        help="folder for the parquet file, named <dataset>_<split>.parquet (e.g. gsm8k_train.parquet; "
        "a data file's stem, with _<split> only when --split is given)",
    )


def _options(args) -> dict:
    """The loader options the flags give. Flags that do not apply to ``--dataset`` are refused
    here, before anything is read, with the flags' names (the loaders would name options): the
    generator flags (--n/--seed/--difficulty) for anything but a seeded generator of
    :data:`data.loaders.GENERATED`, whose list decides (not a name written here, so a new
    generator gets its flags), the field mappings for anything but a file."""
    from data.loaders import GENERATED, get_dataset, looks_like_path

    generated = {"n": args.n, "seed": args.seed, "difficulty": args.difficulty}
    generic = {
        "question_field": args.question_field,
        "answer_field": args.answer_field,
        "id_field": args.id_field,
        "input_field": args.input_field,
        "data_source": args.data_source,
    }
    generated = {k: v for k, v in generated.items() if v is not None}
    generic = {k: v for k, v in generic.items() if v is not None}
    is_file = looks_like_path(args.dataset)
    is_generated = not is_file and get_dataset(args.dataset).name in GENERATED
    if generated and not is_generated:
        raise CliError(f"--{'/--'.join(generated)}: only for --dataset {' or '.join(GENERATED)}")
    if generic and not is_file:
        flags = "/".join("--" + k.replace("_", "-") for k in generic)
        raise CliError(f"{flags}: only for a data file given as --dataset FILE")
    return {**generated, **generic}


def _load(args):
    from data.examples import DatasetError
    from data.loaders import UnknownShapeError, load_examples

    try:
        options = _options(args)
        return load_examples(args.dataset, split=args.split, limit=args.limit, **options)
    except UnknownShapeError as exc:
        raise CliError(f"{exc}; map the fields with --question-field/--answer-field") from None
    except DatasetError as exc:  # DataFormatError included: "file:line: problem"
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"cannot read {args.dataset}: {exc.strerror or exc}") from None


_LIST_SECTIONS = {
    "train": "Training sets (pasr data prepare --dataset NAME --split train --out DIR -> data.train_files):",
    "eval": "Evaluation sets (pasr eval --dataset NAME; pasr data prepare --dataset NAME --out DIR -> data.val_files):",
}


def _run_list() -> int:
    """The known sets, training splits apart from held-out ones, then the file layouts that
    ``--dataset FILE`` recognises without a field mapping."""
    from data.loaders import describe_sources
    from data.row_shapes import LAYOUTS

    rows = describe_sources()
    for use, title in _LIST_SECTIONS.items():
        print(title)
        for row in rows:
            if row["use"] == use:
                print(f"  {row['name']:<10} {row['split']:<6} {row['source']}")
    print("Data files (--dataset FILE.jsonl/.json/.parquet), the layout read from the first row's fields:")
    for shape, what in LAYOUTS.items():
        print(f"  {shape:<15} {what}")
    return 0


def file_layout(args) -> str | None:
    """The layout (a key of :data:`data.row_shapes.LAYOUTS`) ``--dataset FILE`` was read with:
    ``generic`` under a field mapping, else the one its first row's fields give; None for a
    known set or a file with no rows."""
    from data.file_rows import _iter_file
    from data.loaders import looks_like_path
    from data.row_shapes import detect_shape

    if not looks_like_path(args.dataset):
        return None
    if args.question_field or args.answer_field or args.id_field or args.input_field:
        return "generic"
    first = next(iter(_iter_file(Path(args.dataset).expanduser())), None)
    return None if first is None else detect_shape(first[1])


def _run_preview(args) -> int:
    examples = _load(args)
    if not examples:
        print("(no rows)")
    for ex in examples:
        if args.jsonl:
            print(json.dumps(ex.to_dict(), ensure_ascii=False, default=str))
            continue
        print(f"--- {ex.id}  [{ex.data_source}]")
        print(ex.question)
        print(f"gold: {ex.answer}")
    return 0


def output_file(args) -> Path:
    """Where ``pasr data prepare`` writes: ``OUT/<dataset>_<split>.parquet`` (the names
    recipe/scripts/run_pasr_node.sh looks for), or the old ``--out FILE.parquet`` itself."""
    from data.examples import DatasetError
    from data.loaders import get_dataset

    if legacy_out_file("pasr data prepare", args.out, (".parquet",), "<dataset>_<split>.parquet"):
        return Path(args.out).expanduser()
    split = args.split
    if split is None:
        try:
            split = get_dataset(args.dataset).default_split  # a known set (or an alias of one)
        except DatasetError:
            pass  # a data file: no split in the name unless --split gives one
    stem = Path(args.dataset).stem
    return Path(args.out).expanduser() / (f"{stem}_{split}.parquet" if split else f"{stem}.parquet")


def row_location(args, index: int) -> tuple[str, int, str]:
    """Where the ``index``-th row ``_load(args)`` read is: ``(file, line, "line")``, or the hub
    set's ``(name, row, "row")``; a generated set's rows have no place (``(--dataset, row, "row")``).
    Every row read gives one example, in order, so the index finds the line again."""
    from data.dataset_specs import GENERATED, get_dataset, local_file
    from data.examples import DatasetError
    from data.file_rows import _iter_file

    try:
        spec = get_dataset(args.dataset)  # a known name wins over a file of that name, as in the loaders
    except DatasetError:
        path: Path | None = Path(args.dataset).expanduser()
    else:
        split = args.split or spec.default_split
        path = None if spec.name in GENERATED else local_file(spec.name, split)
        if path is None:
            where = f"hub:{spec.hub_path}[{spec.hub_splits.get(split, split)}]" if spec.hub_path else spec.name
            return where, index + 1, "row"
    for i, (line, _) in enumerate(_iter_file(path)):
        if i == index:
            return str(path), line, "line"
    return str(path), index + 1, "row"


def _checked(args, examples: list) -> list:
    """``examples`` fit to write as ``--split``: an evaluation set refused as training data
    (:mod:`data.eval_as_train`) unless --allow-eval-as-train, and the golds checked and
    normalised (:mod:`data.gold_check`; a generated set's are made right)."""
    from data.dataset_specs import GENERATED, DatasetSpec
    from data.eval_as_train import eval_set_reason
    from data.examples import DatasetError
    from data.gold_check import checked_golds

    if args.split and DatasetSpec.use_of(args.split) == "train" and (why := eval_set_reason(args.dataset, examples)):
        if not args.allow_eval_as_train:
            raise CliError(
                f"{args.dataset} looks like an evaluation set ({why}): trained on, every score on it is a training "
                "score; prepare it with --split test for data.val_files, or add --allow-eval-as-train if it is "
                "training data"
            )
        print(
            f"pasr data prepare: warning: {args.dataset} looks like an evaluation set ({why}); written as "
            "training data (--allow-eval-as-train)",
            file=sys.stderr,
        )
    if args.dataset.lower() in GENERATED:
        return examples
    try:
        examples, rewritten = checked_golds(examples, lambda i: row_location(args, i))
    except DatasetError as exc:
        raise CliError(str(exc)) from None
    for before, after in rewritten[:3]:
        print(f"gold {before} written as {after} (Math-Verify reads e-notation as Euler's e times a number)")
    if len(rewritten) > 3:
        print(f"... and {len(rewritten) - 3} more e-notation golds written out")
    return examples


def _kept(out: Path, dataset: str) -> str | None:
    """What ``--keep-existing`` says when ``out`` is kept: a file there prepared from ``dataset``
    (or recording no source: written before sources were recorded); None when there is none to
    keep or it holds another source (refused as without the flag)."""
    from data.prepared_from import recorded_source, source_identity

    if not out.is_file():
        return None
    before = recorded_source(out)
    if before is not None and before != source_identity(dataset):
        return None
    return f"kept {out}: prepared from {before or dataset} before (--keep-existing; delete it to prepare it again)"


def _run_prepare(args) -> int:
    from data.prepared_from import KEY, replace_problem, source_identity
    from data.verl_parquet import write_rl_parquet
    from prompts import load_prompt

    if args.system_prompt.lower() == "none":
        system = None
    else:
        try:
            system = load_prompt(args.system_prompt)
        except (KeyError, FileNotFoundError) as exc:
            raise CliError(str(exc.args[0] if exc.args else exc)) from None
    out = output_file(args)
    if args.keep_existing and (kept := _kept(out, args.dataset)):
        print(kept)
        return 0
    # --out DIR names the file by the source's stem: another source of that stem is not replaced
    # (an explicit --out FILE.parquet names its file itself)
    if out.parent == Path(args.out).expanduser() and (why := replace_problem(out, args.dataset)):
        raise CliError(why)
    examples = _load(args)
    if not examples:
        raise CliError(f"{args.dataset}: no rows to write")
    examples = _checked(args, examples)
    metadata = {KEY: source_identity(args.dataset).encode("utf-8")}
    try:
        path = write_rl_parquet(examples, out, system, ability=args.ability, metadata=metadata)
    except OSError as exc:
        raise CliError(f"cannot write {out}: {why_mkdir_failed(out.parent, exc)}") from None
    sources = sorted({ex.data_source for ex in examples})
    print(f"wrote {len(examples)} rows ({', '.join(sources)}) to {path}")
    layout = file_layout(args)
    if layout is not None:
        from data.row_shapes import LAYOUTS

        print(f"layout: {LAYOUTS[layout]}")
    return 0


def run(args) -> int:
    if args.data_command == "list":
        return _run_list()
    if args.data_command == "preview":
        return _run_preview(args)
    return _run_prepare(args)
