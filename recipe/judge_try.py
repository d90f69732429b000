"""``pasr judge try``: a judge prompt tried on a few rows of a data set before a run uses it.

    pasr judge try --dataset math500 --limit 3 --dry-run                          # the prompts, nothing sent
    pasr judge try --dataset math500 --judge-base-url http://judge:8000/v1 --judge-model Qwen/Qwen2.5-14B-Instruct
    pasr judge try --dataset my.jsonl --question-field q --answer-field a --judge-prompt my_judge.txt --answer 42 ...

Each row's question and gold are read by the loaders ``pasr data prepare`` uses, the prompt is
rendered from the template (``--judge-prompt``: a built-in name or a ``.txt`` file, as
``pasr.prompts.judge`` takes) and sent by the judge client training uses
(:func:`rewards.judges.build_judge` with ``kind=openai``: the same request body, endpoint and
score parser), one request a row with no retry and no cache
(:meth:`rewards.judges.OpenAIJudge.trial`). Printed per row: the prompt, the reply and the score
read from it, or why there is none. The answer judged is the row's gold (a judge should give it
full marks) unless ``--answer`` gives one; an empty answer is never sent (a run scores it 0.0
without asking the judge): an empty ``--answer`` is refused, a row with an empty gold says so.
``--dry-run`` prints the prompts without a judge.
Exit 0 when every row got a score, 1 when one did not, 2 for a bad flag, template or data set.
"""

from __future__ import annotations

import argparse
import asyncio

from data.cli_errors import CliError
from data.prepare import _add_source_args, _load
from prompts.loader import DEFAULT_JUDGE as DEFAULT_JUDGE_PROMPT  # pasr.prompts.judge's default


def build_parser(parser: argparse.ArgumentParser) -> None:
    parser.usage = (
        "pasr judge try --dataset NAME_OR_FILE [--limit N] [--judge-prompt NAME_OR_FILE] "
        "(--dry-run | --judge-base-url URL --judge-model NAME)"
    )
    _add_source_args(parser, limit_default=3)
    parser.add_argument(
        "--judge-prompt",
        default=DEFAULT_JUDGE_PROMPT,
        metavar="NAME_OR_FILE",
        help=f"the judge template, as pasr.prompts.judge takes it: a built-in name or a .txt file "
        f"(default {DEFAULT_JUDGE_PROMPT}, training's default)",
    )
    parser.add_argument(
        "--judge-base-url", metavar="URL", help="the judge's endpoint (pasr.judge.base_url), e.g. http://host:8000/v1"
    )
    parser.add_argument("--judge-model", metavar="NAME", help="the judge's served model name (pasr.judge.model)")
    parser.add_argument(
        "--judge-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="time limit of one request (pasr.judge.timeout_s; default 30)",
    )
    parser.add_argument("--answer", metavar="TEXT", help="the answer judged for every row (default: each row's gold)")
    parser.add_argument("--dry-run", action="store_true", help="print the rendered prompts; send nothing")


def _template(name: str) -> str:
    """The judge template ``name`` names, checked as a run checks it; one line when it cannot be."""
    from prompts import load_prompt
    from rewards.judges.openai_judge import check_template

    try:
        return check_template(load_prompt(name))
    except (KeyError, FileNotFoundError) as exc:  # an unknown name; a file missing, unreadable, not UTF-8
        raise CliError(f"--judge-prompt {name}: {exc.args[0] if exc.args else exc}") from None
    except ValueError as exc:  # a placeholder missing
        raise CliError(f"--judge-prompt {name}: {exc}") from None


def _judge(args):
    """The judge client training builds for ``pasr.judge.kind=openai`` with these flags."""
    from recipe.pasr_config import JudgeConfig
    from rewards.judges import build_judge

    missing = [
        flag
        for flag, value in (("--judge-base-url", args.judge_base_url), ("--judge-model", args.judge_model))
        if not value
    ]
    if missing:
        raise CliError(f"{' and '.join(missing)} required to send the prompts (or --dry-run to print them)")
    if not 0 < args.judge_timeout < float("inf"):
        raise CliError(f"--judge-timeout must be a number of seconds > 0, got {args.judge_timeout}")
    cfg = JudgeConfig(
        kind="openai", base_url=args.judge_base_url, model=args.judge_model, timeout_s=args.judge_timeout, retries=0
    )
    try:
        return build_judge(cfg, args.judge_prompt)
    except ValueError as exc:  # a URL that is not one
        raise CliError(str(exc)) from None


async def _trials(judge, items):
    """One trial a row; None for a row whose answer is empty: a run never asks the judge about
    one (it scores it 0.0), so neither does this."""

    async def one(question, gold, answer):
        return await judge.trial(question, gold, answer) if answer.strip() else None

    return await asyncio.gather(*(one(q, g, a) for q, g, a in items))


def _section(title: str, text: str | None = None) -> None:
    print(f"--- {title} ---")
    if text is not None:
        print(text)


def run(args) -> int:
    from prompts import prompt_version
    from rewards.judges import gold_is_math
    from rewards.judges.openai_judge import fill_template

    template = _template(args.judge_prompt)
    if args.answer is not None and not args.answer.strip():
        raise CliError(
            f"--answer {args.answer!r}: a run scores an empty answer 0.0 without asking the judge, so there is "
            "nothing to try; give the answer text to judge (or drop --answer to judge each row's gold)"
        )
    judge = None if args.dry_run else _judge(args)
    examples = _load(args)
    if not examples:
        raise CliError(f"--dataset {args.dataset}: no rows to try")
    items = [(ex.question, ex.answer, ex.answer if args.answer is None else args.answer) for ex in examples]
    trials = asyncio.run(_trials(judge, items)) if judge is not None else [None] * len(items)
    where = "dry run, nothing sent" if judge is None else f"{judge.model} at {judge.base_url}"
    print(f"judge prompt {args.judge_prompt} (version {prompt_version(template)}), {len(items)} row(s), {where}")
    for n, (ex, (question, gold, answer), trial) in enumerate(zip(examples, items, trials), start=1):
        print(f"\n=== row {n}/{len(items)}: {ex.id} ===")
        print(f"gold: {gold}" + ("" if args.answer is None else f"  answer judged: {answer}"))
        if gold_is_math(gold):
            print("(a math gold: with pasr.judge.kind=hybrid this row goes to Math-Verify, not to this prompt)")
        if trial is None:
            _section("prompt", fill_template(template, question, gold, answer))
            if judge is not None:  # an empty answer: not sent
                print("--- score: 0.0 (not sent: a run scores an empty answer 0.0 without asking the judge) ---")
            continue
        _section("prompt", trial.prompt)
        _section("reply", trial.reply if trial.reply is not None else "(none)")
        print(f"--- score: {trial.score} ---" if trial.error is None else f"--- no score: {trial.error} ---")
    if judge is None:
        return 0
    scored = [0.0 if t is None else t.score for t in trials if t is None or t.error is None]
    mean = f" (mean {sum(scored) / len(scored):.3f})" if scored else ""
    print(f"\n{len(scored)} of {len(trials)} row(s) scored{mean}")
    return 0 if len(scored) == len(trials) else 1
