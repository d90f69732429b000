"""The rows of ``benchmarks.methods_side_by_side`` and the result built from their runs: which
model and ``pasr eval`` method each row is, best-of-N's N at about PASR's token budget, each
question's correctness per row, every row paired against PASR-trained (two-sided sign test), the
JSON the benchmark writes and the table it prints.

Why a module of its own: the driver (:mod:`benchmarks.methods_side_by_side`: options, the held-out
file, one ``pasr eval`` run per row) and what is concluded from the rows are read apart; the
driver re-exports these names.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from data.generated_sets import heldout_seed
from eval.significance import paired_counts, sign_test

REPO = Path(__file__).resolve().parents[1]
BASE, WARMUP, PASR = "base", "warm-up", "pasr-trained"  # model roles, also the names pasr eval compare shows
BASELINE = "baseline"  # the model the inference-time baselines run on (--baseline-model)
REFERENCE = "pasr-trained"  # the row every other row is paired against
DATASET = "synthetic-heldout"  # the file stem: the dataset's label in every summary and in the plot
MIN_CANDIDATES = 2  # best-of-N with one candidate has nothing to choose


@dataclass(frozen=True)
class Row:
    key: str  # its directory under rows/, and its id in the JSON
    name: str
    model: str  # BASE | WARMUP | PASR | BASELINE
    method: str
    select: str | None = None
    best_of_n: bool = False  # --samples N candidates


ROWS = (
    Row("plain", "plain prompting", BASE, "plain"),
    Row("pasr-prompt-untrained", "PASR prompt, untrained", BASE, "pasr"),
    Row("warm-up", "warm-up", WARMUP, "pasr"),
    Row(REFERENCE, "PASR-trained", PASR, "pasr"),
    Row("baseline-plain", "plain prompt", BASELINE, "plain"),  # its tokens set N
    Row("self-refine-latest", "Self-Refine (latest)", BASELINE, "self-refine", "latest"),
    Row("self-refine-best", "Self-Refine (best)", BASELINE, "self-refine", "best"),
    Row("best-of-n", "best-of-N (own scores)", BASELINE, "best-of-n", "score", best_of_n=True),
    Row("majority", "majority vote", BASELINE, "best-of-n", "majority", best_of_n=True),
    Row("rrr", "RRR (reflect-retry)", BASELINE, "reflect-retry"),
)


def choose_candidates(pasr_tokens: float | None, plain_tokens: float | None, floor: int = MIN_CANDIDATES) -> dict:
    """Best-of-N's N at about PASR's token budget: PASR-trained's mean output tokens per question
    over one plain answer's (the baseline model's greedy plain row), rounded half up, at least
    ``floor``. Returns N with the numbers it came from."""
    ratio = None
    if pasr_tokens is not None and plain_tokens:
        ratio = pasr_tokens / plain_tokens
    n = max(floor, int(ratio + 0.5)) if ratio is not None else floor
    return {"n": n, "pasr_tokens": pasr_tokens, "plain_tokens": plain_tokens, "ratio": ratio, "floor": floor}


def paired_table(correct: dict[str, dict[str, bool]], reference: str = REFERENCE) -> dict[str, dict | None]:
    """Each row against ``reference`` on the questions both answered: ``wins`` (the row right,
    the reference wrong), ``losses`` (the reverse), the two-sided sign test's ``p`` and
    ``n_paired``; None for the reference itself."""
    ref = correct[reference]
    out: dict[str, dict | None] = {}
    for key, row in correct.items():
        if key == reference:
            out[key] = None
            continue
        wins, losses = paired_counts(ref, row)  # (row right & ref wrong, ref right & row wrong)
        out[key] = {
            "wins": wins,
            "losses": losses,
            "p": sign_test(wins, losses),
            "n_paired": len(ref.keys() & row.keys()),
        }
    return out


def git_commit() -> dict:
    def git(*args: str) -> str | None:
        try:
            return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return None

    status = git("status", "--porcelain", "--untracked-files=no")
    return {"sha": git("rev-parse", "HEAD"), "dirty": None if status is None else bool(status)}


def correct_by_question(run_dir: Path, ids: list[str]) -> dict[str, bool]:
    """Per held-out question, whether the row's answer is right (a judge or generation error is
    wrong); the last record of a question wins (``pasr eval`` appends re-judged ones)."""
    from data.records import iter_records
    from rewards.refine_quality import is_correct

    by_id = {r.query_id: bool(is_correct(r.acc)) for r in iter_records(run_dir / "samples.jsonl")}
    return {q: by_id[q] for q in ids if q in by_id}


def report(args, out_dir, data_file, summaries, candidates, walls, resolved, prefill, prompts, links, png) -> dict:
    from data.loaders import load_examples
    from eval.summary import method_label

    ids = [ex.id for ex in load_examples(str(data_file), limit=args.limit)]
    correct = {row.key: correct_by_question(out_dir / "rows" / row.key, ids) for row in ROWS}
    pairs = paired_table(correct)
    baseline_label = {WARMUP: "warm-up", PASR: "PASR-trained", BASE: "base"}[args.baseline_model]
    rows = []
    for row in ROWS:
        s = summaries[row.key]
        ds = s["datasets"][DATASET]
        role = args.baseline_model if row.model == BASELINE else row.model
        entry: dict[str, Any] = {
            "key": row.key,
            "name": f"{baseline_label}, {row.name}" if row.key == "baseline-plain" else row.name,
            "model": role,
            "model_path": resolved[role],
            "method": row.method,
            "method_label": method_label(s),
            "acc": ds["accuracy"],
            "tokens_per_question": ds["mean_tokens"],
            "n": ds["n_questions"],
            "format_rate": ds["format_rate"],
            "refine_rate": ds["refine_rate"],
            "truncated_rate": ds["truncated_rate"],
            "errors": ds["errors"],
            "vs_pasr_trained": pairs[row.key],
            "wall_s": walls.get(row.key),
            "run_dir": str(out_dir / "rows" / row.key),
        }
        for k in ("first_attempt_accuracy", "retry_rate", "selection_fallbacks", "score_failures"):
            if k in ds:
                entry[k] = ds[k]
        if row.select is not None:
            entry["select"] = row.select
        if row.best_of_n:
            entry["candidates"] = s.get("candidates")
        rows.append(entry)
    from benchmarks.training_stages import cpu_info

    gpu = None
    if args.device != "cpu":
        import torch

        gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else None
    return {
        "benchmark": "methods_side_by_side",
        "reference": REFERENCE,
        "rows": rows,
        "candidates": candidates,
        "settings": {
            "dataset": {
                "name": args.dataset,
                "label": DATASET,
                "split": "test",
                "seed": heldout_seed(args.data_seed),
                "difficulty": args.difficulty,
                "limit": args.limit,
                "file": str(data_file),
            },
            "models": {BASE: args.base, WARMUP: args.warmup, PASR: args.pasr},
            "baseline_model": args.baseline_model,
            "prompts": prompts,
            "prefill": prefill,
            "max_new_tokens": args.max_new_tokens,
            "max_rounds": args.max_rounds,
            "max_reflection_tokens": args.max_reflection_tokens or args.max_new_tokens,
            "decoding": "greedy; best-of-N candidates sampled at temperature 0.6, top-p 0.95 (pasr eval's defaults)",
            "seed": args.seed,
            "batch_size": args.batch_size,
            "threads": args.threads,
            "dtype": args.dtype,
            "device": args.device,
            "out_dir": str(out_dir),
        },
        "machine": {"cpu": cpu_info(), "gpu": gpu},
        "commit": git_commit(),
        "png": str(png),
    }


def fmt(v, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def print_table(result: dict) -> None:
    print(
        f"\n{'row':<34} {'model':<13} {'acc':>6} {'tokens':>7} {'n':>4} {'won/lost vs PASR':>17} {'p':>7} {'wall s':>7}"
    )
    for r in result["rows"]:
        v = r["vs_pasr_trained"]
        pair = "reference" if v is None else f"{v['wins']} / {v['losses']}"
        p = "" if v is None else f"{v['p']:.3g}"
        wall = "-" if r["wall_s"] is None else f"{r['wall_s']:.0f}"
        print(
            f"{r['name']:<34} {r['model']:<13} {fmt(r['acc']):>6} {fmt(r['tokens_per_question'], 1):>7} {r['n']:>4} "
            f"{pair:>17} {p:>7} {wall:>7}"
        )
    c = result["candidates"]
    print(
        f"\nbest-of-N and majority vote: N = {c['n']}"
        + (
            " (given)"
            if c.get("given")
            else f" (PASR-trained {fmt(c['pasr_tokens'], 1)} / plain {fmt(c['plain_tokens'], 1)} tokens per question)"
        )
    )
