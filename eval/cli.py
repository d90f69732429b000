"""``pasr eval``: evaluate a model (``pasr eval --model ...``) or compare runs (``pasr eval compare``).

Heavy modules (torch, transformers, vllm, matplotlib) are imported inside :func:`run`, so
``pasr --help`` stays fast.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from data.cli_flags import add_alias, legacy_out_file
from runtime.gqa_attention import ATTENTIONS
from runtime.model_loading import DEVICES

DESCRIPTION = """\
Evaluate a model on GSM8K, MATH-500, AIME24 or Countdown with PASR, Reflect-Retry or a
baseline, or compare runs.

  pasr eval --model PATH_OR_NAME --dataset gsm8k math500 aime24 --method pasr --out DIR
      generate, judge and summarise; writes DIR/samples.jsonl (one rollout record per
      sample), DIR/summary.json and DIR/summary.md. Rerunning the same command resumes an
      interrupted run and re-judges samples whose judge failed (or whose gold answer was
      corrected in the file); other settings in the same DIR are refused, the checkpoint
      compared by content (RUN/checkpoints/latest after more training is another model), and
      so is a second run while one is writing to DIR.

  pasr eval compare DIR [DIR ...] [--out DIR]
      print the runs side by side (a row per run, named by its checkpoint's run and step;
      per dataset: questions, accuracy, mean output tokens; other question sets lettered)
      and plot accuracy against output tokens; writes eval_compare.md (the table) and
      eval_compare.png (the plot) into --out.

Methods: plain (plain system prompt), pasr (refine system prompt: <think> with <refine>,
then <answer>), self-refine (Madaan et al.: plain answer, then up to --max-rounds rounds of
feedback and refinement; every pass's tokens count; the latest answer is scored, or with
--select best the one the model itself scores best), reflect-retry (Reflect, Retry, Reward:
an attempt with the RRR prompt, judged; a failed one gets one reflection and one retry, and
the retry is scored; every pass's tokens count, the summary adds first-attempt accuracy),
best-of-n (--samples N plain answers per question, one chosen by --select majority, a vote
over the answers, or --select score, the model's own scores; one scored sample per question,
the tokens of all N and of any scoring count).
Decoding is greedy by default; with --samples K > 1 accuracy is mean@K (best-of-n: N
candidates) and sampling defaults to temperature 0.6, top-p 0.95; --protocol paper samples as
the paper's reference inference does (temperature 0.5, top-p 1). Countdown (--dataset
countdown, held-out problems) is scored by the countdown judge, which --judge auto picks;
--difficulty sets its level.
"""

EPILOG = """\
examples:
  pasr eval --model smollm2 --dataset gsm8k --method plain --backend hf --limit 20 --out runs/eval/smol
  pasr eval --model /ckpt/qwen3-8b-pasr --dataset gsm8k math500 aime24 --method pasr --backend vllm \\
      --out runs/eval/qwen3-pasr
  pasr eval --model Qwen/Qwen3-8B --dataset aime24 --method pasr --samples 8 --out runs/eval/aime-mean8
  pasr eval --model /ckpt/qwen3-8b-pasr --dataset math500 --method pasr --protocol paper --samples 4 \\
      --out runs/eval/qwen3-pasr-paper
  pasr eval --model runs/rrr/checkpoints/step_000050 --dataset countdown --limit 200 --method reflect-retry \\
      --backend hf --threads 1 --out runs/eval/rrr-50
  pasr eval --model Qwen/Qwen3-8B --dataset math500 --method best-of-n --samples 8 --select majority \\
      --out runs/eval/qwen3-best-of-8
  pasr eval --model Qwen/Qwen3-8B --dataset math500 --method self-refine --select best --out runs/eval/qwen3-sr-best
  pasr eval compare runs/eval/qwen3-* --out runs/eval/compare
"""

COMPARE_STEM = "eval_compare"  # pasr eval compare --out DIR: DIR/eval_compare.md and .png
METHOD_NAMES = (
    "plain",
    "pasr",
    "self-refine",
    "reflect-retry",
    "best-of-n",
)  # eval.methods.METHODS (not imported: --help stays fast)


def finite_float(text: str) -> float:
    """argparse type of every float option: ``float()`` takes ``nan`` and ``inf``, and the range
    checks of :meth:`eval.run.EvalConfig.validate` are comparisons that NaN passes
    (``--temperature nan`` ran to the end and wrote NaN into summary.json)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"not a finite number: {text!r}")
    return value


def thread_count(text: str) -> int:
    """argparse type of ``--threads``: a count, 0 (or leaving it out) for the measured choice. A
    negative count reached ``torch.set_num_threads`` and died there with a RuntimeError traceback."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0 (0: torch's choice), got {value}")
    return value


def build_parser(parser: argparse.ArgumentParser) -> None:
    parser.description = DESCRIPTION
    parser.epilog = EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter

    g = parser.add_argument_group("what to evaluate")
    g.add_argument(
        "--model", help="model: a local HF folder, a hub name, or smollm2 (the embedded SmolLM2-135M-Instruct)"
    )
    datasets = g.add_argument(
        "--dataset",
        dest="datasets",
        nargs="+",
        default=["gsm8k", "math500", "aime24"],
        metavar="NAME_OR_FILE",
        help="gsm8k, math500, aime24 (local copies in ../shared/data or $PASR_DATA_DIR, else the hub), "
        "countdown (seeded held-out Countdown problems, scored by the countdown judge) "
        "or .jsonl/.json/.parquet files; one or more (default: gsm8k math500 aime24)",
    )
    add_alias(g, "--datasets", datasets)
    difficulty = g.add_argument(
        "--difficulty",
        dest="countdown_difficulty",
        type=int,
        default=1,
        metavar="{1,2,3}",
        help="--dataset countdown: problems with 3, 4 or 5 numbers (data.countdown.LEVELS; "
        "default 1, as `pasr train --preset rrr`); how many problems: --limit (default 1000)",
    )
    add_alias(g, "--countdown-difficulty", difficulty)
    g.add_argument(
        "--method",
        default="pasr",
        metavar="{" + ",".join(METHOD_NAMES) + "}",
        help="default: pasr; reflect-retry: attempt, and for a failure one reflection and one retry "
        "(for Reflect, Retry, Reward checkpoints); best-of-n: --samples N answers, one chosen by "
        "--select",
    )
    g.add_argument("--limit", type=int, metavar="N", help="first N questions of each dataset (AIME24 has 30)")
    g.add_argument(
        "--samples",
        type=int,
        default=1,
        metavar="K",
        help="samples per question; accuracy is then mean@K (default 1). best-of-n: the N candidates "
        "one answer is chosen from (one scored sample per question; changing N needs another --out)",
    )
    g.add_argument("--out", metavar="DIR", help="run directory (default: runs/eval/<model>-<method>)")

    g = parser.add_argument_group("generation")
    g.add_argument(
        "--backend",
        default="auto",
        metavar="{auto,vllm,hf}",
        help="vllm (GPU) or hf (transformers, CPU or one GPU); auto: vllm when it is "
        "installed and a GPU is visible, else hf",
    )
    g.add_argument("--max-new-tokens", type=int, default=1500, help="per pass (default 1500, the paper's)")
    g.add_argument(
        "--temperature", type=finite_float, help="0 = greedy (default for one sample; 0.6 with --samples K > 1)"
    )
    g.add_argument("--top-p", type=finite_float, help="nucleus sampling when temperature > 0 (default 0.95)")
    g.add_argument(
        "--protocol",
        choices=("paper",),
        help="paper: the paper's reference inference, temperature 0.5 and top-p 1 (its infer_pasr.py samples one "
        "answer); with --samples K accuracy is mean@K over K such answers (default: the settings above)",
    )
    g.add_argument("--seed", type=int, default=0, metavar="N", help="sampling seed (default 0)")
    g.add_argument("--batch-size", type=int, default=32, help="hf backend: prompts per generate call (default 32)")
    g.add_argument(
        "--chunk-size",
        type=int,
        help="samples generated and written per step (default: the batch size for hf, "
        "4x for self-refine, 2x for reflect-retry; 512 for vllm)",
    )
    g.add_argument("--max-rounds", type=int, default=4, help="self-refine: feedback/refine rounds at most (default 4)")
    g.add_argument(
        "--refine-prompt",
        help="template name or file (method pasr; default: refine_system, or for a "
        "local run's checkpoint the run's pasr.prompts.refine)",
    )
    g.add_argument(
        "--plain-prompt",
        help="template name or file (plain, self-refine; default: plain_system, or "
        "for a local run's checkpoint the run's pasr.prompts.plain)",
    )
    g.add_argument(
        "--prefill-think",
        default="auto",
        choices=("auto", "on", "off"),
        help="start every answer under the refine and plain prompts with <think> already in the "
        "prompt, as training's pasr.prefill_think does (hf and vllm); auto (default): on for a checkpoint of a "
        "local run that trained so (its config.yaml says), off otherwise: for a verl checkpoint trained with the "
        "prefill (the verl engine's default too), say on",
    )
    g.add_argument(
        "--dtype",
        help="hf: auto (default: bfloat16 where a timed probe shows the CPU or GPU that computes runs it faster, "
        "else float32; training's rule too) | float32 | bfloat16 | float16; vllm: auto (default) | ...",
    )
    g.add_argument(
        "--threads",
        type=thread_count,
        metavar="N",
        help="hf on CPU: torch threads (default or 0: all cores where a probe matmul shows they help, "
        "else 1, as pasr train's model.threads=0; on a busy shared CPU, 1 can be several times faster)",
    )
    g.add_argument(
        "--attention",
        default="grouped",
        metavar="{" + ",".join(ATTENTIONS) + "}",
        help="hf: grouped (default) computes grouped-query attention without copying the KV cache "
        "in padded batches, same results, faster; sdpa: transformers' own",
    )
    g.add_argument(
        "--device", default="auto", choices=DEVICES, help="hf: auto (default) takes the GPU torch sees, else the CPU"
    )
    g.add_argument("--tensor-parallel-size", type=int, default=1, help="vllm")
    g.add_argument("--gpu-memory-utilization", type=finite_float, default=0.9, help="vllm")
    g.add_argument("--max-model-len", type=int, help="vllm: context length (self-refine histories grow)")
    g.add_argument(
        "--enforce-eager",
        default="auto",
        choices=("auto", "on", "off"),
        help="vllm: on skips CUDA-graph capture and torch.compile (a faster start, slower decoding); "
        "auto (default): on for models whose weights are under 2 GiB",
    )

    g = parser.add_argument_group(
        "choosing among candidates (self-refine, best-of-n)",
        "--select best|score asks the same model to rate each candidate 0-1 ('Score: x') with a scoring\n"
        "prompt (prompts/templates/self_score.txt), never the judge (that would be an oracle). A reply with\n"
        "no score is a failed score that cannot win; with no score at all the fallback (self-refine: the\n"
        "latest answer, best-of-n: the first) is returned and counted. Tokens of scoring passes count.",
    )
    g.add_argument(
        "--select",
        metavar="{latest,best,majority,score}",
        help="which candidate is the answer. self-refine: latest (default, Madaan et al.) or best "
        "(every answer of the loop scored by the model, the best-scored one, the earlier on a tie; "
        "the scoring passes' tokens count). best-of-n: majority (default: the answer most candidates "
        "give, compared as the judge compares answers, the earliest on a tie) or score (the "
        "best-scored candidate, the earlier on a tie; the scoring passes' tokens count)",
    )
    g.add_argument(
        "--max-score-tokens",
        type=int,
        metavar="N",
        help="--select best/score: new tokens of a scoring pass (default: --max-new-tokens); a "
        "reply cut off before its 'Score:' line is a failed score",
    )
    g.add_argument(
        "--score-prompt",
        metavar="NAME_OR_FILE",
        help="--select best/score: the scoring template, with {question} and {answer} (default: self_score)",
    )

    # defaults are training's (rrr.* in recipe/rrr_config.py), filled in by run(): not imported here
    g = parser.add_argument_group("reflect-retry (defaults: training's rrr.* settings, recipe/rrr_config.py)")
    g.add_argument(
        "--max-reflection-tokens",
        type=int,
        help="new tokens of the reflection pass (default: rrr.max_reflection_tokens); the attempt "
        "and the retry get --max-new-tokens",
    )
    for part, what in (
        ("attempt", "system prompt of the attempt and the retry"),
        ("reflect", "reflection template"),
        ("retry", "retry template"),
        ("feedback", "the binary feedback a reflection is given"),
    ):
        g.add_argument(
            f"--rrr-{part}-prompt", metavar="NAME_OR_FILE", help=f"{what} (default: training's rrr.prompts.{part})"
        )

    g = parser.add_argument_group("scoring")
    g.add_argument(
        "--judge",
        default="auto",
        metavar="{auto,rule,openai,hybrid,countdown}",
        help="auto (default): countdown for Countdown datasets, rule otherwise; rule: Math-Verify; "
        "openai: an OpenAI-compatible LLM judge; hybrid: rule for math golds, LLM otherwise; "
        "countdown: the exact Countdown equation verifier",
    )
    base_url = g.add_argument(
        "--judge-base-url", metavar="URL", help="LLM judge endpoint (pasr.judge.base_url), e.g. http://host:8000/v1"
    )
    add_alias(g, "--judge-url", base_url)
    g.add_argument("--judge-model", metavar="NAME", help="LLM judge model name (pasr.judge.model)")
    g.add_argument("--judge-prompt", default="judge_binary", help="LLM judge template (default judge_binary)")
    g.add_argument(
        "--judge-timeout",
        type=finite_float,
        default=30.0,
        metavar="SECONDS",
        help="LLM judge: time limit of one request attempt (default 30); a sample whose judge "
        "fails is recorded as a judge error and re-judged by the next run in the same --out",
    )
    g.add_argument(
        "--fallback-last-number",
        action="store_true",
        help="a response with neither <answer> nor \\boxed{} is judged on its last number (off by "
        "default: it credits answers the model never marked; useful for tiny models)",
    )

    g = parser.add_argument_group("run control")
    g.add_argument(
        "--retry-errors",
        action="store_true",
        help="on resume, also regenerate samples whose generation failed (judge errors are re-judged on every resume)",
    )
    progress = g.add_argument(
        "--progress",
        choices=("auto", "on", "off"),
        default="auto",
        help="progress bar on stderr while samples are generated (auto, the default, and on: shown; off: none)",
    )
    add_alias(g, "--no-progress", progress, value="off")

    sub = parser.add_subparsers(dest="eval_command", title="other commands", metavar="compare")
    cp = sub.add_parser(
        "compare",
        help="compare eval runs: side-by-side table and accuracy-vs-tokens plot",
        description="Print eval runs side by side (a row per run, named by the checkpoint it evaluated; per "
        "dataset: questions, accuracy, mean output tokens; runs over other questions lettered, a repeated "
        f"evaluation marked) and write that table ({COMPARE_STEM}.md) and an accuracy-vs-output-tokens "
        f"scatter plot ({COMPARE_STEM}.png) into the --out folder.",
    )
    cp.add_argument("dirs", nargs="+", metavar="DIR", help="run directories of `pasr eval` (with summary.json)")
    cp.add_argument(
        "--out",
        dest="compare_out",
        default=".",
        metavar="DIR",
        help=f"folder for {COMPARE_STEM}.md (the table) and {COMPARE_STEM}.png (the accuracy-vs-tokens "
        "plot); default: the current folder",
    )


def compare_outputs(out: str) -> tuple[Path, Path]:
    """The table (.md) and plot (.png) ``pasr eval compare --out`` writes: ``OUT/eval_compare.*``;
    the old ``--out FILE.png`` (or ``FILE.md``) writes ``FILE.md`` and ``FILE.png``, with a
    deprecation note."""
    if legacy_out_file("pasr eval compare", out, (".png", ".md"), f"{COMPARE_STEM}.md and {COMPARE_STEM}.png"):
        base = Path(out).expanduser()
    else:
        base = Path(out).expanduser() / COMPARE_STEM
    return base.with_suffix(".md"), base.with_suffix(".png")


def _cli_error(msg: str):
    from data.cli_errors import CliError

    return CliError(msg)


def answer_settings(args) -> tuple[str, str, str]:
    """``(refine prompt, plain prompt, prefill)`` for the run: what was asked, and where it was
    not, what the local run that wrote ``--model`` trained with (:func:`eval.backends.local_run_answers`),
    else the paper's prompts without a prefill. Says so on stderr when the run's settings are taken."""
    from eval.backends import local_run_answers
    from prompts import THINK_PREFILL
    from recipe.pasr_config import PromptsConfig

    model = Path(args.model).expanduser()
    run = local_run_answers(model) if model.exists() else None  # a missing path: the backend says so
    refine = args.refine_prompt or (run.refine_prompt if run else PromptsConfig.refine)
    plain = args.plain_prompt or (run.plain_prompt if run else PromptsConfig.plain)
    think = {"on": True, "off": False}.get(args.prefill_think, bool(run and run.prefill_think))
    if run is not None:
        taken = [
            f"{name} {value}"
            for name, value, given in (
                ("--refine-prompt", refine, args.refine_prompt),
                ("--plain-prompt", plain, args.plain_prompt),
                ("--prefill-think", "on" if think else "off", args.prefill_think != "auto"),
            )
            if not given
        ]
        if taken:
            print(f"pasr eval: as the local run that wrote {args.model} trained: {', '.join(taken)}", file=sys.stderr)
    return refine, plain, THINK_PREFILL if think else ""


def _resolve_backend(name: str) -> str:
    if name != "auto":
        return name
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        return "hf"
    import torch

    return "vllm" if torch.cuda.is_available() else "hf"


def default_out(model: str, method: str) -> str:
    name = Path(model.rstrip("/")).name or "model"
    return str(Path("runs") / "eval" / f"{name}-{method}")


def run_compare(args) -> int:
    from data.atomic_write import replace_text
    from data.cli_errors import why_mkdir_failed
    from eval.compare import CompareError, comparison_table, load_runs, scatter

    try:
        runs = load_runs(args.dirs)
    except CompareError as exc:
        raise _cli_error(str(exc)) from None
    md, png = compare_outputs(args.compare_out)
    table = comparison_table(runs)
    print(table)
    try:
        replace_text(md, table + "\n")
    except OSError as exc:  # a full disk is a DiskFullError (a CliError) already
        raise _cli_error(f"cannot write {md}: {why_mkdir_failed(md.parent, exc)}") from None
    png = scatter(runs, png)
    print(f"\nwrote {md} and {png}")
    return 0


def run(args) -> int:
    if getattr(args, "eval_command", None) == "compare":
        return run_compare(args)
    if not args.model:
        raise _cli_error("--model is required (or use `pasr eval compare DIR...`); see pasr eval --help")
    if args.method not in METHOD_NAMES:
        raise _cli_error(f"unknown method {args.method!r}: choose one of {', '.join(METHOD_NAMES)}")
    if args.backend not in ("auto", "vllm", "hf"):
        raise _cli_error(f"unknown backend {args.backend!r}: choose one of auto, vllm, hf")

    from eval.run import EvalConfig, EvalError, run_eval
    from eval.summary import render_markdown
    from recipe.pasr_config import JudgeConfig
    from recipe.rrr_config import RrrConfig, RrrPromptsConfig

    backend = _resolve_backend(args.backend)
    refine_prompt, plain_prompt, prefill = answer_settings(args)
    cfg = EvalConfig(
        model=args.model,
        datasets=list(args.datasets),
        out=args.out or default_out(args.model, args.method),
        method=args.method,
        backend=backend,
        samples=args.samples,
        limit=args.limit,
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        top_p=args.top_p,
        protocol=args.protocol,
        seed=args.seed,
        batch_size=args.batch_size,
        chunk_size=args.chunk_size,
        max_rounds=args.max_rounds,
        select=args.select,
        max_score_tokens=args.max_score_tokens,
        score_prompt=args.score_prompt,
        judge=JudgeConfig(
            kind=args.judge, base_url=args.judge_base_url, model=args.judge_model, timeout_s=args.judge_timeout
        ),
        judge_prompt=args.judge_prompt,
        refine_prompt=refine_prompt,
        plain_prompt=plain_prompt,
        prefill=prefill,
        rrr_prompts=RrrPromptsConfig(
            **{
                part: name
                for part in ("attempt", "reflect", "retry", "feedback")
                if (name := getattr(args, f"rrr_{part}_prompt")) is not None
            }
        ),
        max_reflection_tokens=(
            args.max_reflection_tokens if args.max_reflection_tokens is not None else RrrConfig.max_reflection_tokens
        ),
        fallback_last_number=args.fallback_last_number,
        retry_errors=args.retry_errors,
        progress=args.progress != "off",
        tensor_parallel_size=args.tensor_parallel_size,
        gpu_memory_utilization=args.gpu_memory_utilization,
        max_model_len=args.max_model_len,
        enforce_eager={"auto": None, "on": True, "off": False}[args.enforce_eager],
        dtype=args.dtype,
        threads=args.threads,
        attention=args.attention,
        device=args.device,
        countdown_difficulty=args.countdown_difficulty,
    )
    try:
        summary = run_eval(cfg)
    except EvalError as exc:
        raise _cli_error(str(exc)) from None
    print(render_markdown(summary), end="")
    print(f"\nwrote {cfg.out}/samples.jsonl, summary.json, summary.md")
    return 0
