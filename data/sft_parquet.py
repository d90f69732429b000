"""The local engine's warm-up traces as a verl SFT parquet: the verl engine's cold start.

PASR's format reward is -1 for a response without ``<think>…</think><answer>…</answer>``. A
model that does not write that format from the prompt alone (SmolLM2-135M on the first GPU run:
-1 for every rollout) gives every GRPO group equal rewards, so every advantage is 0 and nothing
is learned. The local engine starts with a supervised warm-up on synthetic traces for this
reason (:mod:`data.warmup_traces`); the verl engine gets the same traces as a parquet for
verl's own SFT trainer, run once before PASR:

    python3 -m data.sft_parquet --out ~/data/pasr/warmup_sft.parquet
    bash recipe/scripts/run_sft_warmup.sh      # torchrun -m verl.trainer.sft_trainer on it

One row per trace, in the layout of verl 0.9.1's ``MultiTurnSFTDataset`` (``data.messages_key:
messages``; the loss covers the assistant turn only):

* ``messages``: system (the refine prompt, or the plain prompt for a plain trace), user (the
  question), assistant (the trace);
* ``data_source``, ``id``, ``variant`` (refine | plain), ``answer``: for inspection.

Plain traces (``--plain-fraction``) are the same format without a refine, shown with the plain
system prompt: PASR's refine reward compares against plain-prompted rollouts of the same model,
and a model that only answers the refine prompt makes that baseline 0.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from data.records import PLAIN, REFINE
from data.synthetic import DIFFICULTIES, generate_problems
from data.verl_parquet import write_table_atomic
from data.warmup_traces import REFINE_STYLES, build_samples
from prompts import DEFAULT_PLAIN, DEFAULT_REFINE, PromptSet, build_chat

COLUMNS = ("messages", "data_source", "id", "variant", "answer")


def _schema():
    import pyarrow as pa

    message = pa.struct([("role", pa.string()), ("content", pa.string())])
    return pa.schema(
        [
            ("messages", pa.list_(message)),
            ("data_source", pa.string()),
            ("id", pa.string()),
            ("variant", pa.string()),
            ("answer", pa.string()),
        ]
    )


def sft_rows(
    n: int,
    *,
    seed: int = 0,
    difficulty: int = 1,
    refine_fraction: float = 0.6,
    refine_style: str = "check",
    plain_fraction: float = 0.3,
    prompts: PromptSet | None = None,
) -> list[dict[str, Any]]:
    """``n`` SFT rows from synthetic training problems (never the held-out split): the local
    engine's warm-up samples (:func:`data.warmup_traces.build_samples`, same defaults) as chats."""
    prompts = prompts or PromptSet.load()
    problems = generate_problems(n, seed=seed, difficulty=difficulty, split="train")
    system = {REFINE: prompts.refine, PLAIN: prompts.plain}
    rows = []
    for s in build_samples(problems, refine_fraction, refine_style, seed, plain_fraction):
        messages = build_chat(system[s.variant], s.problem.question) + [{"role": "assistant", "content": s.trace}]
        rows.append(
            {
                "messages": messages,
                "data_source": "synthetic",
                "id": s.problem.id,
                "variant": s.variant,
                "answer": s.problem.answer,
            }
        )
    return rows


def write_sft_parquet(rows: list[dict[str, Any]], path: str | Path) -> Path:
    """Write beside the target, then rename: a reader never sees half a file."""
    import pyarrow as pa

    return write_table_atomic(pa.Table.from_pylist(rows, schema=_schema()), path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m data.sft_parquet",
        description="Write the warm-up traces as a parquet for verl's SFT trainer (the verl engine's cold start).",
    )
    parser.add_argument("--out", required=True, help="parquet file to write")
    parser.add_argument("--n", type=int, default=2000, help="traces (default 2000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--difficulty", type=int, default=1, choices=DIFFICULTIES, help="arithmetic steps per problem (default 1)"
    )
    parser.add_argument(
        "--refine-fraction", type=float, default=0.6, help="refine-prompt traces that refine (default 0.6)"
    )
    parser.add_argument(
        "--refine-style",
        default="check",
        choices=REFINE_STYLES,
        help="check: the refine redoes the step in smaller pieces; column: digit by digit (see data/warmup_traces.py)",
    )
    parser.add_argument(
        "--plain-fraction", type=float, default=0.3, help="traces shown with the plain prompt (default 0.3)"
    )
    parser.add_argument(
        "--refine-prompt", default=DEFAULT_REFINE, help="template name or file (as pasr.prompts.refine)"
    )
    parser.add_argument("--plain-prompt", default=DEFAULT_PLAIN, help="template name or file (as pasr.prompts.plain)")
    args = parser.parse_args(argv)
    for name in ("refine_fraction", "plain_fraction"):
        if not 0.0 <= getattr(args, name) <= 1.0:
            parser.error(f"--{name.replace('_', '-')} must be in [0, 1]")
    if args.n < 1:
        parser.error("--n must be >= 1")
    prompts = PromptSet.load(refine=args.refine_prompt, plain=args.plain_prompt)
    rows = sft_rows(
        args.n,
        seed=args.seed,
        difficulty=args.difficulty,
        refine_fraction=args.refine_fraction,
        refine_style=args.refine_style,
        plain_fraction=args.plain_fraction,
        prompts=prompts,
    )
    path = write_sft_parquet(rows, args.out)
    n_plain = sum(r["variant"] == PLAIN for r in rows)
    n_refining = sum("<refine>" in r["messages"][-1]["content"] for r in rows)
    print(
        f"wrote {path}: {len(rows)} traces ({len(rows) - n_plain} refine prompt, {n_refining} with a refine; "
        f"{n_plain} plain prompt)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
