"""Judge throughput: our async LLM judge vs a one-request-at-a-time client, and the rule judge.

Against the local fake OpenAI server (``benchmarks/fake_openai_server.py``, a fixed latency per
request standing in for a ``vllm serve`` judge):

* ``async judge``: ``OpenAIJudge.score_many`` with ``--concurrency`` requests in flight;
* ``sequential``: a synchronous ``openai.OpenAI`` client sending one request, waiting for the
  reply, then the next, which is how a reward function that calls its judge per sample works.

Every request carries a distinct answer, so neither side gets a cache hit. Then Math-Verify
rule-judge answers per second on GSM8K golds (inline, on this main thread), for equivalent
(``18`` vs ``18.0``) and wrong answers alike.

    python3 -m benchmarks.judge_throughput
    python3 -m benchmarks.judge_throughput --requests 256 --baseline-requests 64
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from benchmarks.fake_openai_server import FakeOpenAIServer
from prompts import load_prompt
from rewards.extract import gsm8k_gold
from rewards.judges import JudgeItem, OpenAIJudge, RuleJudge, parse_score, score_sync
from rewards.judges.openai_judge import fill_template

DEFAULT_GSM8K = Path(__file__).resolve().parents[2] / "shared" / "data" / "gsm8k_test.jsonl"


def _items(n: int, tag: str) -> list[JudgeItem]:
    # Half correct (answer == gold), half wrong; all distinct, so nothing is cached or coalesced.
    return [JudgeItem(f"question {tag}-{i}", str(i), str(i) if i % 2 == 0 else f"{i}+1") for i in range(n)]


def bench_async(base_url: str, model: str, template: str, n: int, concurrency: int) -> tuple[float, dict]:
    judge = OpenAIJudge(base_url, model, template=template, concurrency=concurrency, timeout_s=30, retries=3)
    items = _items(n, "async")
    start = time.perf_counter()
    results = score_sync(judge, items)
    elapsed = time.perf_counter() - start
    correct = sum(r.ok and r.score == (1.0 if it.answer == it.gold else 0.0) for r, it in zip(results, items))
    return n / elapsed, {"elapsed_s": elapsed, "correct": correct, **judge.stats.snapshot()}


def bench_sequential(base_url: str, model: str, template: str, n: int) -> tuple[float, dict]:
    import openai

    client = openai.OpenAI(base_url=base_url, api_key="EMPTY", max_retries=0, timeout=30)
    items = _items(n, "seq")
    correct = 0
    start = time.perf_counter()
    for it in items:
        reply = client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": fill_template(template, it.question, it.gold, it.answer or "")}],
            temperature=0,
        )
        correct += parse_score(reply.choices[0].message.content) == (1.0 if it.answer == it.gold else 0.0)
    elapsed = time.perf_counter() - start
    client.close()
    return n / elapsed, {"elapsed_s": elapsed, "correct": correct}


def bench_rule(gsm8k_path: Path, limit: int | None) -> tuple[float, dict]:
    golds = []
    with gsm8k_path.open(encoding="utf-8") as fh:
        for line in fh:
            golds.append(gsm8k_gold(json.loads(line)["answer"]))
            if limit and len(golds) >= limit:
                break
    pairs: list[tuple[str, str | None]] = []
    for i, gold in enumerate(golds):
        if i % 3 == 0:
            pairs.append((gold, gold))
        elif i % 3 == 1:
            pairs.append((gold, f"{gold}.0"))  # equivalent, different form
        else:
            pairs.append((gold, f"{gold}1"))  # wrong
    expected = [1.0 if i % 3 != 2 else 0.0 for i in range(len(pairs))]
    judge = RuleJudge(mode="inline")
    warm = time.perf_counter()
    judge.score_pairs([("1", "1")])  # imports math_verify / sympy, not part of the steady rate
    warm_s = time.perf_counter() - warm
    start = time.perf_counter()
    results = judge.score_pairs(pairs)
    elapsed = time.perf_counter() - start
    correct = sum(r.ok and r.score == e for r, e in zip(results, expected))
    errors = sum(not r.ok for r in results)
    info = {"answers": len(pairs), "elapsed_s": elapsed, "warmup_s": warm_s, "correct": correct, "errors": errors}
    return len(pairs) / elapsed, info


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python3 -m benchmarks.judge_throughput",
        description="Async LLM judge vs one-request-at-a-time client against a fake OpenAI server; "
        "Math-Verify rule-judge answers per second on GSM8K golds.",
    )
    parser.add_argument("--requests", type=int, default=512, help="requests for the async judge (default 512)")
    parser.add_argument(
        "--baseline-requests", type=int, default=512, help="requests for the sequential client (default 512)"
    )
    parser.add_argument("--latency-ms", type=float, default=50.0, help="fake server latency per request (default 50)")
    parser.add_argument("--concurrency", type=int, default=64, help="async judge concurrency (default 64)")
    parser.add_argument("--gsm8k", type=Path, default=DEFAULT_GSM8K, help=f"GSM8K jsonl (default {DEFAULT_GSM8K})")
    parser.add_argument("--rule-limit", type=int, default=0, help="GSM8K rows for the rule judge (0: all)")
    parser.add_argument("--skip-rule", action="store_true", help="skip the rule-judge measurement")
    args = parser.parse_args(argv)

    template = load_prompt("judge_continuous")
    with FakeOpenAIServer(args.latency_ms / 1000.0, template=template) as srv:
        async_rps, async_info = bench_async(srv.base_url, srv.model, template, args.requests, args.concurrency)
        max_inflight = srv.max_inflight
        seq_rps, seq_info = bench_sequential(srv.base_url, srv.model, template, args.baseline_requests)

    print(f"LLM judge vs fake OpenAI server ({args.latency_ms:g} ms per request, loopback)")
    print(f"  {'client':<34} {'requests':>8} {'seconds':>8} {'req/s':>9} {'correct':>8}")
    print(
        f"  {'async judge (concurrency ' + str(args.concurrency) + ')':<34} {args.requests:>8} "
        f"{async_info['elapsed_s']:>8.2f} {async_rps:>9.1f} {async_info['correct']:>8}"
    )
    print(
        f"  {'sequential (one at a time)':<34} {args.baseline_requests:>8} "
        f"{seq_info['elapsed_s']:>8.2f} {seq_rps:>9.1f} {seq_info['correct']:>8}"
    )
    ratio = async_rps / seq_rps
    print(f"  speed-up: {ratio:.1f}x (target >= 20x)  {'OK' if ratio >= 20 else 'BELOW TARGET'}")
    print(
        f"  async judge: requests={async_info['requests']} retries={async_info['retries']} "
        f"errors={async_info['errors']} server max in flight={max_inflight}"
    )

    if not args.skip_rule:
        if not args.gsm8k.is_file():
            print(f"rule judge: skipped, {args.gsm8k} not found (pass --gsm8k)")
            return
        rule_rps, rule_info = bench_rule(args.gsm8k, args.rule_limit or None)
        print("Math-Verify rule judge on GSM8K golds (inline, main thread)")
        print(
            f"  answers={rule_info['answers']} seconds={rule_info['elapsed_s']:.2f} answers/s={rule_rps:.1f} "
            f"correct={rule_info['correct']}/{rule_info['answers']} errors={rule_info['errors']} "
            f"(first call, imports: {rule_info['warmup_s']:.2f} s, not counted)"
        )


if __name__ == "__main__":
    main()
