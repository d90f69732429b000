"""The local trainer's held-out evaluations (base, warm-up, final): what one costs, how it is
shown and where it is written, apart from the step loop that calls it.

One evaluation answers every held-out question greedily with the refine prompt (and the plain
one, ``trainer.eval_plain``), or runs RRR's attempt / reflect / retry passes for ``method=rrr``;
with ``trainer.eval_sampled_k`` K > 0 a PASR run also samples K answers a question
(:mod:`recipe.local_engine.sampled_eval`). Its records are dumped to ``eval/<tag>.jsonl``, its
judge errors warned about, and its metrics logged as one ``eval`` line of ``metrics.jsonl``.

Functions of the trainer, not methods of their own class: :class:`~recipe.local_engine.trainer.LocalPasrTrainer`
keeps ``_evaluate`` and ``_evaluate_rrr`` (tests and benchmarks call and wrap them there) and
hands over to these, so a wrapped ``trainer._evaluate_rrr`` is still the one an evaluation calls.
"""

from __future__ import annotations

import sys

from recipe.local_engine import run_io, sampled_eval
from recipe.local_engine.evaluate import evaluate
from recipe.local_engine.timing import timer


def evaluate_heldout(trainer, tag: str) -> dict:
    """Evaluation ``tag`` of ``trainer`` (a :class:`~recipe.local_engine.trainer.LocalPasrTrainer`)
    at its current step: its metrics, also logged and kept in ``trainer.evals[tag]``."""
    from tqdm import tqdm

    cfg = trainer.cfg
    plain = cfg.trainer.eval_plain and tag != "base"
    sampled = cfg.trainer.eval_sampled_k if cfg.method == "pasr" else 0  # mean@K beside greedy
    # an evaluation of a few hundred problems takes minutes on a CPU: a bar of its own,
    # moving as answers finish (RRR's passes are counted by its own module)
    bar = tqdm(
        total=len(trainer.heldout) * (1 + plain + sampled),
        desc=f"eval {tag}",
        unit="answer",
        leave=False,
        dynamic_ncols=True,
        file=sys.stderr,
        disable=cfg.method == "rrr",
    )
    with timer(m := {}, "eval"), bar:
        metrics, records = (
            trainer._evaluate_rrr(tag)
            if cfg.method == "rrr"
            else evaluate(
                trainer._generator(),
                trainer.tokenizer,
                trainer.heldout,
                trainer.prompts,
                trainer.judge,
                cfg.pasr,
                max_new_tokens=cfg.rollout.eval_max_new_tokens,
                batch_size=cfg.rollout.eval_batch_size,
                prefill_think=cfg.pasr.prefill_think,
                run_id=trainer.run_id,
                step=trainer.step,
                tag=tag,
                # the base model follows neither format: its plain answers would cost a full-length
                # generation per question for a known 0
                plain=plain,
                on_finished=bar.update,
            )
        )
        if sampled:  # the paper's protocol: K answers a question at trainer.eval_temperature
            metrics.update(sampled_eval.evaluate_sampled(trainer, tag, on_finished=bar.update))
    run_io.dump_eval(trainer.run_dir, tag, records)
    run_io.warn_judge_errors(records, f"evaluation {tag!r}")
    metrics.update(m)
    trainer._log(trainer.step, "eval", {"tag": tag, **metrics})
    trainer.evals[tag] = metrics
    return metrics


def rrr_heldout(trainer, tag: str):
    """RRR's evaluation ``tag`` of ``trainer``'s policy (:func:`recipe.local_engine.rrr.evaluate_rrr`):
    its metrics and records."""
    from recipe.local_engine.rrr import evaluate_rrr

    cfg = trainer.cfg
    return evaluate_rrr(
        trainer._generator(),
        trainer.tokenizer,
        trainer.heldout,
        trainer.rrr_prompts,
        trainer.judge,
        cfg.rrr,
        max_new_tokens=cfg.rollout.eval_max_new_tokens,
        batch_size=cfg.rollout.eval_batch_size,
        run_id=trainer.run_id,
        step=trainer.step,
        tag=tag,
    )
