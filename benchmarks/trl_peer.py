"""The peer for :mod:`benchmarks.step_floors`: one step of TRL's ``GRPOTrainer`` (the optional
``bench`` extra: ``pip install -e .[bench]``) on the same model, batch, budget, sampling,
optimiser, micro-batch, dtype and threads as the PASR step it is set beside.
"""

from __future__ import annotations

import tempfile
import time


def trl_step(cfg, subject: dict, steps: int) -> dict:
    """TRL ``GRPOTrainer`` on the same model (the policy our parts left), 8 queries x 4 completions
    (``queries_per_step`` x ``pasr.n_refine``: the rows PASR trains), completion budget, sampling, optimiser, KL weight,
    micro-batch, dtype and threads; the same refine prompts, ``<think>`` prefill included, as
    text (TRL then applies no template). ``steps`` training steps; the last is the figure."""
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from transformers.trainer_callback import PrinterCallback
    from trl import GRPOConfig, GRPOTrainer

    from prompts import THINK_PREFILL
    from runtime.hf_generate import render_prompts

    tok, prompts = subject["tokenizer"], subject["prompts"]
    prefill = THINK_PREFILL if cfg.pasr.prefill_think else ""
    queries = subject["train"][: cfg.rollout.queries_per_step * steps]
    rendered = render_prompts(tok, [prompts.refine_chat(q.question) for q in queries], prefill)
    texts = [tok.decode(ids) for ids in rendered]
    same_tokens = sum(tok(t, add_special_tokens=False)["input_ids"] == ids for t, ids in zip(texts, rendered))
    data = Dataset.from_dict({"prompt": texts, "answer": [str(q.answer) for q in queries]})

    def reward(completions, answer, **_):
        """Whether the gold answer appears: what is judged does not change what is computed."""
        return [float(a in c) for c, a in zip(completions, answer)]

    class Clock(TrainerCallback):
        def __init__(self):
            self.marks, self.logs = [], []

        def on_train_begin(self, args, state, control, **kw):
            self.marks.append(time.perf_counter())

        def on_step_end(self, args, state, control, **kw):
            self.marks.append(time.perf_counter())

        def on_log(self, args, state, control, logs=None, **kw):
            self.logs.append(dict(logs or {}))

    n = cfg.pasr.n_refine
    rows = cfg.rollout.queries_per_step * n
    micro = min(cfg.algo.micro_batch_size, rows)
    bf16 = subject["update_dtype"] == "bfloat16"
    with tempfile.TemporaryDirectory() as tmp:
        args = GRPOConfig(
            output_dir=tmp,
            use_cpu=True,
            bf16=bf16,
            seed=0,
            max_steps=steps,
            report_to="none",
            save_strategy="no",
            logging_steps=1,
            disable_tqdm=True,
            dataloader_num_workers=0,
            shuffle_dataset=False,
            per_device_train_batch_size=micro,
            gradient_accumulation_steps=rows // micro,
            num_generations=n,
            max_completion_length=cfg.rollout.max_new_tokens,
            temperature=cfg.rollout.temperature,
            top_p=cfg.rollout.top_p,
            learning_rate=cfg.algo.lr,
            beta=cfg.algo.kl_coef,
            epsilon=cfg.algo.clip_ratio,
            max_grad_norm=cfg.algo.max_grad_norm,
            lr_scheduler_type="constant",
            warmup_steps=0,
            model_init_kwargs={"dtype": "float32", "attn_implementation": "sdpa"},  # transformers' own
        )
        clock = Clock()
        trainer = GRPOTrainer(
            model=subject["policy_dir"],
            reward_funcs=reward,
            args=args,
            train_dataset=data,
            processing_class=tok,
            callbacks=[clock],
        )
        trainer.remove_callback(PrinterCallback)  # its log dicts would bury the table
        torch.set_num_threads(subject["threads"])  # what our parts ran on, whatever TRL set up
        trainer.train()
    seconds = [b - a for a, b in zip(clock.marks, clock.marks[1:])]
    lengths = [x["completions/mean_length"] for x in clock.logs if "completions/mean_length" in x]
    import trl

    return {
        "version": trl.__version__,
        "step_s": seconds[-1],
        "steps_s": seconds,
        "rows": rows,
        "completion_mean_length": lengths[-1] if lengths else None,
        "bf16": bf16,
        "prompts_same_tokens": f"{same_tokens}/{len(texts)}",
    }


def trl_available() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("trl") is not None
    except (ImportError, ValueError):  # a broken or blocked install counts as none
        return False
