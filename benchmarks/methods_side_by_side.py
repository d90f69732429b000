"""Every evaluated method on the embedded model's held-out problems: one table and one plot.

The reading of the PASR paper's Table 1 at small scale: accuracy and output tokens per question of
plain prompting, the PASR prompt without training, the warm-up, PASR-trained, Self-Refine (latest
and best), best-of-N at about PASR's token budget, majority vote and Reflect, Retry, Reward's
reflect-retry, each paired against PASR-trained (two-sided sign test on per-question
correctness, :mod:`eval.significance`).

    python -m benchmarks.methods_side_by_side --warmup RUN/checkpoints/step_000160 \\
        --pasr RUN/checkpoints/latest --threads 2

Rows (``--baseline-model`` moves the last six to another model; default the warm-up):

=============================  ============  =========================================
row                            model         ``pasr eval`` method
=============================  ============  =========================================
plain prompting                base          plain
PASR prompt, untrained         base          pasr
warm-up                        warm-up       pasr
PASR-trained (the reference)   PASR          pasr
<baseline>, plain prompt       baseline      plain (greedy; its tokens set N)
Self-Refine (latest)           baseline      self-refine --select latest
Self-Refine (best)             baseline      self-refine --select best
best-of-N (own scores)         baseline      best-of-n --samples N --select score
majority vote                  baseline      best-of-n --samples N --select majority
RRR (reflect-retry)            baseline      reflect-retry
=============================  ============  =========================================

The baselines run on the warm-up because that is where PASR's RL starts: the paper's Table 1
applies every method to the model PASR is trained from, and here that model is the warm-up, which
writes the ``<think>``/``<answer>`` format (the base SmolLM2 never does, so any baseline on it
scores a known 0). N is the PASR-trained row's mean output tokens per question over the baseline
model's greedy plain-prompt tokens, rounded, at least 2 (one candidate leaves nothing to choose);
``--candidates`` sets it.

Every row is one ``pasr eval`` run (:func:`eval.run.run_eval`, its own ``samples.jsonl`` and
``summary.json`` under ``--out-dir/rows/``), and one ``pasr eval compare`` over all rows writes the
accuracy-vs-tokens PNG. Two things differ from typing ``pasr eval`` by hand, both so that the rows
are evaluated as the local engine evaluates the checkpoints it trains:

* **the problems**: the local engine holds out ``split="test"`` problems of seed ``data.seed + 1``
  (1235 for the default ``data.seed``; ``pasr eval --dataset synthetic`` draws the same ones, but
  only for that seed) at ``data.difficulty`` (1). Those are written to ``--out-dir/data/synthetic-heldout.jsonl`` and
  evaluated as a file (ids ``synthetic-heldout:<index>``; the same questions, in the same order, as
  the local engine's held-out set);
* **the prompts and the ``<think>`` prefill**: the local engine's CPU prompts
  (``refine_system_short``, ``plain_system_short``) and, as its ``pasr.prefill_think``, every
  answer under either prompt starts with ``<think>`` already in the prompt (not counted as an
  output token). Passes under other prompts (Self-Refine's feedback and refine, scoring, RRR's
  attempt, reflection and retry) get no prefill, as the local engine gives RRR none.
  ``--no-prefill`` evaluates as ``pasr eval`` does.

Rerunning the same command resumes: finished rows are read back, an interrupted one continues
(``pasr eval``'s resume). An ``--out-dir`` made with other models, problems or prefill is refused.

Time (estimated from token counts, not measured yet): about 1.5-2.5 hours on a 2-core AVX2 CPU in
fp32 with two threads and the machine to itself, most of it Self-Refine's (nine passes over growing
histories, twice), see docs/results/methods_side_by_side.md.
"""

# This module is the driver (options, the held-out file, one ``pasr eval`` run per row); the rows,
# best-of-N's N, the pairs and the result are in benchmarks/methods_rows.py (re-exported here). Not
# in the docstring above: it is the command's --help.

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path

from benchmarks.methods_rows import (  # noqa: F401  re-exported: the rows and the result, moved there
    BASE,
    BASELINE,
    DATASET,
    MIN_CANDIDATES,
    PASR,
    REFERENCE,
    REPO,
    ROWS,
    WARMUP,
    Row,
    choose_candidates,
    correct_by_question,
    fmt,
    git_commit,
    paired_table,
    print_table,
    report,
)
from data.generated_sets import heldout_seed
from eval.backends import AnswerPrefillBackend
from eval.significance import paired_counts, sign_test  # noqa: F401  re-exported

SETTINGS_FILE = "benchmark.json"  # what decides the rows' samples and pasr eval cannot see
WALLS_FILE = "walls.json"  # seconds each row has spent, summed over invocations (a resumed row keeps its time)


# ----------------------------------------------------------------------------- pure parts


def heldout_file(out_dir: Path, limit: int, seed: int, difficulty: int) -> Path:
    """The local engine's held-out problems (``split="test"``, seed ``seed``) as a JSONL file
    ``pasr eval`` reads; the first ``limit`` of them, in the local engine's order."""
    from data.atomic_write import replace_text
    from data.loaders import load_examples

    path = out_dir / "data" / f"{DATASET}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    problems = load_examples("synthetic", split="test", limit=limit, seed=seed, difficulty=difficulty)
    lines = [json.dumps({"question": p.question, "answer": p.answer, "local_id": p.id}) for p in problems]
    replace_text(path, "\n".join(lines) + "\n")
    return path


def resolve(spec: str) -> str:
    from eval.backends import BackendError, resolve_model

    try:
        return str(Path(resolve_model(spec)).resolve())
    except BackendError as exc:
        raise SystemExit(f"methods_side_by_side: {exc}") from None


def check_out_dir(out_dir: Path, fixed: dict) -> None:
    """Refuse an ``--out-dir`` whose rows were made with other models, problems or prefill (the
    rows' own ``pasr eval`` fingerprints see the model links' names, not their targets); record
    ``fixed`` in a new one."""
    path = out_dir / SETTINGS_FILE
    if path.is_file():
        old = json.loads(path.read_text())
        diff = [f"{k}: {old.get(k)!r} there, {v!r} now" for k, v in fixed.items() if old.get(k) != v]
        if diff:
            raise SystemExit(
                f"methods_side_by_side: {out_dir} holds rows made with other settings ({'; '.join(diff)}): "
                "use another --out-dir, or remove it"
            )
    out_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(fixed, indent=2) + "\n")


def link_models(out_dir: Path, models: dict[str, str]) -> dict[str, Path]:
    """``out_dir/models/<role>`` -> each resolved model folder, so that ``pasr eval compare``
    names the points base / warm-up / pasr-trained rather than step_000160."""
    links = {}
    for role, target in models.items():
        link = out_dir / "models" / role
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_symlink() and Path(link.readlink()) != Path(target):
            link.unlink()
        if not link.is_symlink():
            link.symlink_to(target, target_is_directory=True)
        links[role] = link
    return links


# ----------------------------------------------------------------------------- the benchmark


def parse_args(argv):
    from recipe.local_engine.config import load_config

    local = load_config()  # pasr train's defaults (the default preset): held-out seed, prompts, eval budget, prefill
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base", default=local.model.path, help="the base model (default: the embedded smollm2)")
    p.add_argument(
        "--warmup", required=True, metavar="CKPT", help="the warm-up checkpoint (RUN/checkpoints/step_000160)"
    )
    p.add_argument("--pasr", required=True, metavar="CKPT", help="the PASR-trained checkpoint (RUN/checkpoints/latest)")
    p.add_argument(
        "--baseline-model",
        choices=(WARMUP, PASR, BASE),
        default=WARMUP,
        help="the model Self-Refine, best-of-N, majority vote and RRR run on (default: warm-up, where "
        "PASR's RL starts)",
    )
    p.add_argument(
        "--dataset",
        choices=("synthetic",),
        default="synthetic",
        help="the local engine's held-out synthetic problems (split test, seed --data-seed + 1)",
    )
    p.add_argument(
        "--data-seed",
        type=int,
        default=local.data.seed,
        help=f"the run's data.seed; held-out problems use it + 1 (default {local.data.seed})",
    )
    p.add_argument(
        "--difficulty",
        type=int,
        default=local.data.difficulty,
        choices=(1, 2, 3),
        help=f"data.difficulty (default {local.data.difficulty})",
    )
    p.add_argument("--limit", type=int, default=150, help="held-out problems (default 150, the demo's)")
    p.add_argument(
        "--max-new-tokens",
        type=int,
        default=local.rollout.eval_max_new_tokens,
        help=f"per pass (default {local.rollout.eval_max_new_tokens}, the local engine's evaluation)",
    )
    p.add_argument("--max-rounds", type=int, default=4, help="Self-Refine's feedback/refine rounds at most (default 4)")
    p.add_argument(
        "--max-reflection-tokens",
        type=int,
        help="RRR's reflection pass (default: --max-new-tokens, the budget of every other pass)",
    )
    p.add_argument("--candidates", type=int, metavar="N", help="best-of-N's N (default: from the token counts)")
    p.add_argument(
        "--no-prefill",
        action="store_true",
        help="no <think> prefill: evaluate as `pasr eval` does, not as the local engine",
    )
    p.add_argument("--out-dir", default="runs/bench-methods-side-by-side", help="one pasr eval run per row under rows/")
    p.add_argument("--out", default="benchmarks/results/methods_side_by_side.json", help="the JSON")
    p.add_argument("--png", help="the accuracy-vs-tokens plot (default: --out with .png)")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's choice)")
    p.add_argument(
        "--batch-size",
        type=int,
        default=local.rollout.eval_batch_size,
        help=f"prompts per generate call (default {local.rollout.eval_batch_size}, the local engine's)",
    )
    p.add_argument("--dtype", default="auto", help="auto (measured on CPU) | float32 | bfloat16")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda")
    p.add_argument("--seed", type=int, default=0, help="sampling seed of best-of-N's candidates")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    if args.limit < 1 or args.max_new_tokens < 1 or (args.candidates is not None and args.candidates < 1):
        p.error("--limit, --max-new-tokens and --candidates must be >= 1")
    args.local = local
    return args


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else list(argv))
    from eval.run import EvalConfig, EvalError, run_eval
    from prompts import load_prompt
    from recipe.local_engine.rollout import THINK_PREFILL

    start = time.perf_counter()
    local = args.local
    out_dir = Path(args.out_dir)
    prefill = "" if args.no_prefill else THINK_PREFILL
    prompts = {"refine": local.pasr.prompts.refine, "plain": local.pasr.prompts.plain}
    systems = frozenset(load_prompt(name) for name in prompts.values())
    seed = heldout_seed(args.data_seed)
    resolved = {BASE: resolve(args.base), WARMUP: resolve(args.warmup), PASR: resolve(args.pasr)}
    check_out_dir(
        out_dir,
        {
            "models": resolved,
            "prefill": prefill,
            "prompts": prompts,
            "data": {"seed": seed, "difficulty": args.difficulty, "split": "test"},
        },
    )
    links = link_models(out_dir, resolved)
    links[BASELINE] = links[args.baseline_model]
    data_file = heldout_file(out_dir, args.limit, seed, args.difficulty)
    walls_path = out_dir / WALLS_FILE
    walls = json.loads(walls_path.read_text()) if walls_path.is_file() else {}

    summaries: dict[str, dict] = {}
    candidates: dict | None = None
    for row in ROWS:
        if row.best_of_n and candidates is None:
            measured = choose_candidates(
                summaries[REFERENCE]["datasets"][DATASET]["mean_tokens"],
                summaries["baseline-plain"]["datasets"][DATASET]["mean_tokens"],
            )
            candidates = {**measured, "n": args.candidates or measured["n"], "given": args.candidates is not None}
            print(
                f"best-of-N: N = {candidates['n']} (PASR-trained {fmt(measured['pasr_tokens'], 1)} tokens per question,"
                f" one plain answer {fmt(measured['plain_tokens'], 1)})",
                file=sys.stderr,
            )
        cfg = EvalConfig(
            model=str(links[row.model]),
            datasets=[str(data_file)],
            out=str(out_dir / "rows" / row.key),
            method=row.method,
            backend="hf",
            samples=candidates["n"] if row.best_of_n else 1,
            limit=args.limit,
            max_new_tokens=args.max_new_tokens,
            seed=args.seed,
            batch_size=args.batch_size,
            max_rounds=args.max_rounds,
            select=row.select,
            refine_prompt=prompts["refine"],
            plain_prompt=prompts["plain"],
            max_reflection_tokens=args.max_reflection_tokens or args.max_new_tokens,
            dtype=args.dtype,
            threads=args.threads or None,
            device=args.device,
            progress=not args.no_progress,
        )
        backend = AnswerPrefillBackend(
            cfg.model,
            prefill,
            systems,
            batch_size=cfg.batch_size,
            dtype=cfg.dtype,
            device=cfg.device,
            threads=cfg.threads,
            attention=cfg.attention,
            seed=cfg.seed,
        )
        print(f"== {row.key}: {row.method} on {Path(cfg.model).name}", file=sys.stderr)
        t0 = time.perf_counter()
        try:
            summaries[row.key] = run_eval(cfg, backend=backend)
        except EvalError as exc:
            raise SystemExit(f"methods_side_by_side: row {row.key}: {exc}") from None
        finally:
            walls[row.key] = walls.get(row.key, 0.0) + time.perf_counter() - t0
            walls_path.write_text(json.dumps(walls, indent=2) + "\n")
            del backend
            gc.collect()

    png = Path(args.png) if args.png else Path(args.out).with_suffix(".png")
    compare(out_dir, png)
    result = report(args, out_dir, data_file, summaries, candidates, walls, resolved, prefill, prompts, links, png)
    result["wall_s"] = time.perf_counter() - start
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print_table(result)
    print(f"wrote {out} and {png}")
    return 0


def compare(out_dir: Path, png: Path) -> None:
    """What ``pasr eval compare`` does over every row (its table on stdout), with the PNG at
    ``png`` (the command's ``--out`` is a folder and names its files itself)."""
    from eval.compare import comparison_table, load_runs, scatter

    runs = load_runs([str(out_dir / "rows" / r.key) for r in ROWS])
    print(comparison_table(runs))
    scatter(runs, png)


if __name__ == "__main__":
    sys.exit(main())
