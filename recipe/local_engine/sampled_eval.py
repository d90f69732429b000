"""The paper's evaluation protocol beside the greedy one: K answers a question sampled at
``trainer.eval_temperature`` (the paper's reference inference samples at 0.5), mean@K, and the
final evaluation's per-question means tested against the warm-up's.

Why: every other held-out figure of the trainer is greedy, and a policy trained on sampled
rollouts can change its sampled answers without moving its argmax ones (docs/results/demo.md).
With ``trainer.eval_sampled_k`` = K > 0 each evaluation of a PASR run (base, warm-up, final)
also samples K refine-prompt answers a question, judged as the greedy ones are; what it writes:

* the evaluation's ``metrics.jsonl`` line gains ``eval/sampled/acc`` (mean@K: each question's
  mean score over its judged samples, averaged over the questions), ``eval/sampled/format_pass_rate``,
  ``eval/sampled/refine_rate``, ``eval/sampled/response_length/mean``, ``eval/sampled/judge_errors``,
  ``eval/sampled/k``, ``eval/sampled/temperature`` and ``timing_s/eval_sampled``;
* ``eval/<tag>.sampled.json``: the settings and every question's K scores (not a ``.jsonl`` dump:
  ``pasr stats`` pairs a run's in-training evaluations, and K sampled ones beside each greedy
  one would change which it pairs);
* the final evaluation's line gains ``eval/sampled/vs_warmup/*`` (:func:`recipe.paired_tests.paired_means_test`
  on the warm-up's file: n, delta, wins, losses, ties, p_wilcoxon, p_sign), and the run's closing
  table a mean@K column with that test under it (:func:`summary_lines`).

Seeded: the draws come from ``trainer.seed`` inside a forked RNG, so the same seed gives the same
samples, every evaluation of a run (warm-up and final alike) draws from the same seed, and the
training steps after an evaluation draw what they would draw without it (the key changes no
training step, so a resume may change it).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from data.atomic_write import replace_text
from data.examples import Example
from data.records import REFINE
from prompts import PromptSet
from recipe.paired_tests import mean_at_k, paired_means_test, question_means
from recipe.pasr_config import PasrConfig

PREFIX = "eval/sampled/"
VS_WARMUP = PREFIX + "vs_warmup/"
TOP_P = 1.0  # the paper's reference inference leaves vLLM's top-p at 1
KEPT = ("format_pass_rate", "refine_rate", "response_length/mean", "judge_errors")


def sampled_file(run_dir: Path, tag: str) -> Path:
    """Where evaluation ``tag``'s per-question sampled scores go (beside its greedy dump)."""
    return Path(run_dir) / "eval" / f"{tag}.sampled.json"


def sample_scores(
    model,
    tokenizer,
    examples: list[Example],
    prompts: PromptSet,
    judge,
    pasr: PasrConfig,
    *,
    k: int,
    temperature: float,
    seed: int,
    max_new_tokens: int,
    batch_size: int,
    prefill_think: bool,
    run_id: str,
    step: int,
    on_finished=None,
) -> tuple[dict[str, float], dict[str, list[float | None]]]:
    """``k`` refine-prompt answers a question sampled at ``temperature`` (top-p 1) from ``seed``,
    judged: the metrics (:data:`PREFIX`) and each question's ``k`` scores (None: a judge error).
    The global RNG is left as it was (a forked one draws the samples)."""
    import torch  # here: the closing table (run_io.summarize) reads this module without a model

    from recipe.local_engine.rollout import generate_step
    from recipe.metrics import step_metrics
    from recipe.scoring import score_rollouts
    from runtime.hf_generate import SamplingParams

    params = SamplingParams(max_new_tokens=max_new_tokens, temperature=temperature, top_p=TOP_P, do_sample=True)
    devices = [model.device] if model.device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        gens = generate_step(
            model,
            tokenizer,
            examples,
            prompts,
            n_refine=k,
            n_plain=0,
            params=params,
            batch_size=batch_size,
            prefill_think=prefill_think,
            on_finished=on_finished,
        )
    records = score_rollouts([g.rollout for g in gens], judge, pasr, run_id=run_id, step=step, engine="local")
    scores: dict[str, list[float | None]] = {ex.id: [None] * k for ex in examples}
    for r in records:
        if r.variant == REFINE:
            scores[r.query_id][r.sample_index] = r.acc
    m = step_metrics(records, prefix="s")
    metrics = {f"{PREFIX}{name}": m[f"s/{name}"] for name in KEPT}
    metrics |= {f"{PREFIX}acc": mean_at_k(question_means(scores)), f"{PREFIX}k": k, f"{PREFIX}temperature": temperature}
    return metrics, scores


def write_scores(path: Path, scores: dict, **settings) -> None:
    """``eval/<tag>.sampled.json``: ``settings`` (k, temperature, seed, ...) and the scores."""
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_text(path, json.dumps({**settings, "scores": scores}) + "\n")


def read_scores(path: Path) -> dict | None:
    """What :func:`write_scores` wrote (its ``scores`` and settings), or None without a file."""
    return json.loads(path.read_text()) if path.is_file() else None


def keep_earlier_final(path: Path, step: int) -> Path | None:
    """A final evaluation's scores of another step than ``step`` (a finished run extended with
    more ``trainer.steps``) renamed to ``final_step_NNNNNN.sampled.json``, as the run keeps its
    greedy dump (:func:`recipe.local_engine.run_io.keep_earlier_final`); the new name, or None."""
    from recipe.step_files import step_name

    try:
        earlier = (read_scores(path) or {}).get("step", step)
    except (ValueError, OSError):  # unreadable: replaced like any file of the same step
        return None
    if earlier == step:
        return None
    kept = path.with_name(f"final_{step_name(earlier) if isinstance(earlier, int) else 'step_unknown'}.sampled.json")
    os.replace(path, kept)
    return kept


def compare(before: dict, after: dict) -> dict:
    """:func:`recipe.paired_tests.paired_means_test` of two files' (:func:`read_scores`) per-question means."""
    return paired_means_test(question_means(before["scores"]), question_means(after["scores"]))


def evaluate_sampled(trainer, tag: str, on_finished=None) -> dict[str, float]:
    """Evaluation ``tag``'s sampled half for the local trainer (its model, held-out set, judge and
    config): the metrics for its ``metrics.jsonl`` line, ``eval/<tag>.sampled.json`` written, and
    at ``final`` the paired test against the warm-up's file when there is one at the same
    temperature."""
    cfg = trainer.cfg
    k, temperature, seed = cfg.trainer.eval_sampled_k, cfg.trainer.eval_temperature, cfg.trainer.seed
    t = time.perf_counter()
    metrics, scores = sample_scores(
        trainer._generator(),
        trainer.tokenizer,
        trainer.heldout,
        trainer.prompts,
        trainer.judge,
        cfg.pasr,
        k=k,
        temperature=temperature,
        seed=seed,
        max_new_tokens=cfg.rollout.eval_max_new_tokens,
        batch_size=cfg.rollout.eval_batch_size,
        prefill_think=cfg.pasr.prefill_think,
        run_id=trainer.run_id,
        step=trainer.step,
        on_finished=on_finished,
    )
    settings = {"tag": tag, "step": trainer.step, "k": k, "temperature": temperature, "top_p": TOP_P, "seed": seed}
    now = {**settings, "scores": scores}
    if tag == "final":
        keep_earlier_final(sampled_file(trainer.run_dir, tag), trainer.step)
    write_scores(sampled_file(trainer.run_dir, tag), scores, **settings)
    warm = read_scores(sampled_file(trainer.run_dir, "warmup")) if tag == "final" else None
    if warm is not None and warm.get("temperature") == temperature:
        metrics |= {f"{VS_WARMUP}{name}": value for name, value in compare(warm, now).items()}
    metrics["timing_s/eval_sampled"] = time.perf_counter() - t
    return metrics


def column(evals: dict[str, dict]) -> tuple[str, str] | None:
    """The closing table's mean@K column, ``(key, header)``, when an evaluation has one."""
    for m in evals.values():
        if m.get(f"{PREFIX}acc") is not None:
            return f"{PREFIX}acc", f"mean@{m[f'{PREFIX}k']:.0f} T={m[f'{PREFIX}temperature']:g}"
    return None


def summary_lines(evals: dict[str, dict]) -> list[str]:
    """Under the closing table: what the mean@K column is, and the final evaluation's paired
    test against the warm-up on per-question means."""
    col = column(evals)
    if col is None:
        return []
    lines = [
        f"{col[1]}: refine-prompt answers sampled at that temperature (the paper's protocol) from trainer.seed, "
        "each question's mean score averaged; acc is greedy"
    ]
    final = evals.get("final", {})
    if final.get(f"{VS_WARMUP}n"):
        t = {k.removeprefix(VS_WARMUP): v for k, v in final.items() if k.startswith(VS_WARMUP)}
        lines.append(
            f"final vs warmup, {col[1].split()[0]} of the same {t['n']:.0f} questions: {t['before']:.3f} -> "
            f"{t['after']:.3f} ({t['delta']:+.3f}; {t['wins']:.0f} up, {t['losses']:.0f} down, {t['ties']:.0f} same), "
            f"Wilcoxon signed-rank p = {t['p_wilcoxon']:.3g}, sign test p = {t['p_sign']:.3g}"
        )
    return lines
