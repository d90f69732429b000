"""Throughput of ``pasr stats`` on a synthetic training dump.

    python3 -m benchmarks.stats_throughput --n 200000

Writes ``--n`` synthetic rollout records (refine and plain variants, ~40% of refine rollouts
with one to three refine spans, a few broken formats and judge errors) as a training run dump
(``rollouts/step_*.jsonl``), runs ``pasr stats`` on it in this process and prints records/s,
MB/s and the projected time for one million rollouts. ``--keep DIR`` keeps the dump and output.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from data.records import RolloutRecord
from recipe.step_files import rollout_dump

FILLER = (
    "First compute the cost of the apples. Each bag holds {a} apples and there are {b} bags, so "
    "{a} * {b} = {c} apples in total. Then the farmer sells {d} of them at the market, which leaves "
    "{c} - {d} = {e} apples. "
)


def _response(rng: random.Random, variant: str) -> tuple[str, int, bool, str, str]:
    a, b, d = rng.randint(2, 40), rng.randint(2, 30), rng.randint(1, 20)
    c, e = a * b, a * b - d
    body = FILLER.format(a=a, b=b, c=c, d=d, e=e) * rng.randint(2, 5)
    n_ref = 0
    if variant == "refine" and rng.random() < 0.4:
        n_ref = rng.choice((1, 1, 2, 3))
        pieces = [body]
        for _ in range(n_ref):
            pieces.append(
                rng.choice(
                    (
                        f"<refine>Check: {a} * {b} is {c}, not {c}.</refine> ",
                        f"<refine>Wait, {c} - {d} = {e + rng.choice((0, 1))}, so the remaining count is {e}.</refine> ",
                        "<refine>Let me re-read the question.</refine> ",
                    )
                )
            )
            pieces.append(FILLER.format(a=a, b=b, c=c, d=d, e=e))
        body = "".join(pieces)
    if variant == "plain":
        text = body + f"The answer is \\boxed{{{e}}}."
        return text, n_ref, False, "missing_think", str(e)
    if rng.random() < 0.03:
        return "<think>" + body + f"<answer>{e}</answer>", n_ref, False, "unclosed_think", str(e)
    return f"<think>{body}</think>\n<answer>\\boxed{{{e}}}</answer>", n_ref, True, "ok", str(e)


def write_dump(root: Path, n: int, steps: int = 20, seed: int = 0) -> int:
    rng = random.Random(seed)
    per_step = max(1, n // steps)
    written = 0
    (root / "rollouts").mkdir(parents=True, exist_ok=True)
    for step in range(steps):
        count = per_step if step < steps - 1 else n - written
        with rollout_dump(root / "rollouts", step).open("w", encoding="utf-8") as fh:
            for i in range(count):
                variant = "refine" if i % 3 else "plain"
                text, n_ref, ok, reason, gold = _response(rng, variant)
                acc = None if rng.random() < 0.005 else float(rng.random() < 0.6)
                outcome = reward = None
                if variant == "refine":
                    outcome = "none" if not n_ref else rng.choice(("better", "worse", "tie"))
                    reward = {"none": 0.0, "better": 1.0, "worse": -1.0, "tie": -0.5}[outcome]
                rec = RolloutRecord(
                    run_id="bench",
                    query_id=f"q{i // 6}",
                    data_source="synthetic",
                    variant=variant,
                    prompt="How many apples are left?",
                    response=text,
                    response_tokens=len(text) // 4,
                    format_ok=ok,
                    format_reason=reason,
                    n_refine=n_ref,
                    extracted_answer=gold,
                    gold=gold,
                    acc=acc,
                    refine_reward=reward,
                    refine_outcome=outcome,
                    step=step,
                    sample_index=i % 6,
                    engine="local",
                    finish_reason="stop",
                )
                fh.write(rec.to_json() + "\n")
                written += 1
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m benchmarks.stats_throughput", description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=200_000, help="synthetic rollouts (default 200000)")
    ap.add_argument("--keep", metavar="DIR", help="write the dump and the stats output here and keep them")
    ap.add_argument("--no-plots", action="store_true", help="time the reading only (no PNGs)")
    args = ap.parse_args(argv)

    from pasr_cli import main as pasr_main

    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="pasr_stats_bench_"))
    try:
        t0 = time.perf_counter()
        n = write_dump(tmp / "run", args.n)
        size = sum(p.stat().st_size for p in (tmp / "run").rglob("*.jsonl"))
        t_gen = time.perf_counter() - t0
        print(f"generated {n} records ({size / 1e6:.1f} MB) in {t_gen:.1f} s")
        cmd = ["stats", str(tmp / "run"), "--out", str(tmp / "out"), "--progress", "off"]
        if args.no_plots:
            cmd.append("--no-plots")
        t0, c0 = time.perf_counter(), time.process_time()
        rc = pasr_main(cmd)
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        if rc != 0:
            print(f"pasr stats failed with exit code {rc}", file=sys.stderr)
            return rc
        read_s = json.loads((tmp / "out" / "stats.json").read_text())["elapsed_s"]
        rate = n / read_s
        fixed = dt - read_s
        print(
            f"pasr stats: {n} records in {dt:.2f} s wall ({cpu:.2f} s CPU, this process): reading+counting "
            f"{read_s:.2f} s = {rate:,.0f} records/s, {size / 1e6 / read_s:.1f} MB/s; "
            f"report{'' if args.no_plots else ' and plots'} {fixed:.2f} s"
        )
        print(
            f"projected for 1,000,000 rollouts: {1e6 / rate + fixed:.1f} s wall "
            f"(reading scales with the input; the report/plot part does not)"
        )
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
