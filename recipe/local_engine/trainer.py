"""The local trainer: supervised warm-up, then PASR (or RRR) steps, on one process.

Global steps ``1..warmup.steps`` are warm-up steps and the next ``trainer.steps`` are RL
steps of ``method`` (``pasr``, or ``rrr``: Reflect, Retry, Reward, :mod:`recipe.local_engine.rrr`),
so one step counter drives checkpoints, metrics and resume.

This module is the orchestration: set-up, the step loop, checkpoints and stops.
The rest is in modules of its own:

* :mod:`recipe.local_engine.run_io` — the run directory (``config.yaml``, ``metrics.jsonl``,
  rollout and evaluation dumps; its layout is described there), truncation on resume, tracking,
  the summary table;
* :mod:`recipe.local_engine.device_setup` — threads, attention, rollout dtype and autocast, the
  model that generates;
* :mod:`recipe.local_engine.evaluations` — the held-out evaluations (base, warm-up, final):
  greedy, RRR's, and mean@K beside them;
* :mod:`recipe.local_engine.step_data` — which rows a step takes, and data a run cannot use;
* :mod:`recipe.local_engine.kl_reference` — the KL reference, read checked against the phase's start;
* :mod:`recipe.local_engine.pasr_step` — one PASR step (:mod:`recipe.local_engine.rrr`: one RRR step);
* :mod:`recipe.local_engine.checkpoint` — ``checkpoints/step_NNNNNN`` (HF model + RNG + step, and
  the optimizer state in the newest only; ``latest`` points to the newest; the end of the
  warm-up is pinned).
"""

from __future__ import annotations

import copy
import signal
import sys
from pathlib import Path

import numpy as np
import torch

from data.examples import Example
from data.heldout_split import describe as describe_split
from data.heldout_split import split_train_heldout
from prompts import PromptSet, prompt_version
from recipe.judge_errors import check_judge_errors
from recipe.local_engine import checkpoint as ckpt
from recipe.local_engine import device_setup, evaluations, run_io
from recipe.local_engine.config import LocalTrainConfig
from recipe.local_engine.kl_reference import DIGEST_KEY, KLReference, PhaseStart
from recipe.local_engine.policy_update import (
    NonFiniteLoss,
    require_finite,
    rl_learning_rate,
    sft_backward,
    warmup_learning_rate,
)
from recipe.local_engine.run_io import prepare_run_dir, summarize  # noqa: F401  re-exported: the old import path (tests, benchmarks)
from recipe.local_engine.step_data import check_data, step_indices
from recipe.local_engine.timing import timer
from recipe.local_engine.warmup_data import uses_attempt_prompt, warmup_examples
from recipe.refine_term import RefineTermWatch
from runtime.hf_generate import SamplingParams
from runtime.model_loading import resolve_device


class StopRequested(Exception):
    pass


class LocalPasrTrainer:
    def __init__(self, cfg: LocalTrainConfig, run_dir: Path, resume: bool = False):
        self.cfg = cfg
        self.run_dir = run_dir
        self.ckpt_root = run_dir / "checkpoints"
        self.resume = resume
        self._stop = False
        self.run_id = run_dir.name
        self.device = resolve_device(cfg.model.device)  # cpu | cuda
        # warns when PASR's refine term stops reaching the advantages (recipe.refine_term)
        self.refine_watch = RefineTermWatch(refine_weight=cfg.pasr.weights.refine)

    # ---------------------------------------------------------------- set-up
    @property
    def rl_phase(self) -> str:
        """The phase name of the steps after the warm-up: the method (``pasr`` | ``rrr``)."""
        return self.cfg.method

    def _load_data(self) -> None:
        """The training pool and a held-out set that shares no question with it, split by
        content (:mod:`data.heldout_split`; how: ``self.data_split``, written to the run
        directory). A data file used to give both from its first rows: every held-out row was
        in the pool, and the held-out table was a training score."""
        c = self.cfg.data
        eval_size = c.eval_size if self.cfg.trainer.evaluates else 0  # no evaluation: nothing held out
        # data.seed and data.difficulty apply to the seeded generators only
        split = split_train_heldout(
            c.source, train_size=c.train_size, eval_size=eval_size, split=c.split, seed=c.seed, difficulty=c.difficulty
        )
        self.train, self.heldout, self.data_split = split.train, split.heldout, split.record
        check_data(self.cfg, self.train, self.heldout)

    def setup(self) -> None:
        from rewards.judges import build_judge
        from runtime.model_loading import ModelLoadError, load_model_and_tokenizer, resolve_model_path

        cfg = self.cfg
        self._load_data()  # first: data the run cannot use fails before the model loads
        device_setup.choose_threads(cfg.model.threads, self.device)
        # torch's RNG: only the RL rollouts draw from it (rollout.seed: them alone, the query order kept)
        torch.manual_seed(cfg.trainer.seed if cfg.rollout.seed is None else cfg.rollout.seed)
        np.random.seed(cfg.trainer.seed)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        # On resume the weights come straight from the last checkpoint (no base-model load first).
        latest = ckpt.resume_point(self.ckpt_root) if self.resume else None
        self.model_path = resolve_model_path(
            cfg.model.path
        )  # the base model (the KL reference when there is no warm-up)
        try:
            self.model, self.tokenizer, _ = load_model_and_tokenizer(
                str(latest or self.model_path), dtype=cfg.model.dtype, device=self.device
            )
        except ModelLoadError as exc:  # a resume's checkpoint gone or cut: how to go on
            raise ModelLoadError(f"{exc}{ckpt.unloadable_hint(self.ckpt_root, latest) if latest else ''}") from None
        self.phase_start = PhaseStart.of(cfg, self.ckpt_root, self.model_path, self.run_dir)  # the KL reference
        self.attention = device_setup.choose_attention(self.model, cfg.model.attention)
        self._choose_dtypes()
        self.reference = None  # the KL reference, made at the first RL step (see _ensure_reference)
        self.rollout_model = None  # the model that generates (a bf16 copy on the bf16 path)
        p = cfg.pasr.prompts
        self.prompts = PromptSet.load(refine=p.refine, plain=p.plain, judge=p.judge)
        self.prompt_versions = {
            "refine": prompt_version(self.prompts.refine),
            "plain": prompt_version(self.prompts.plain),
        }
        self.rrr_prompts = cfg.rrr.load_prompts() if uses_attempt_prompt(cfg) else None
        self.judge = build_judge(cfg.pasr.judge, p.judge)
        self.warmup_samples = warmup_examples(cfg, self.prompts, self.rrr_prompts)
        self.params = SamplingParams(cfg.rollout.max_new_tokens, cfg.rollout.temperature, cfg.rollout.top_p, True)
        self.optimizer = None
        self.optimizer_phase = None
        self.step = 0
        if self.resume:
            self._restore(latest)
        if self.step == cfg.warmup.steps == 0 and cfg.trainer.steps > 0:  # the RL phase starts from model.path
            self.phase_start.record(self.model, cfg.model.dtype)
        self._tracking = run_io.make_tracking(self.run_dir, cfg.trainer)
        # Last: a start that fails above (model, data, judge) leaves no config.yaml behind, so
        # the fixed command is not refused as "not empty; use --resume".
        run_io.write_config(self.run_dir, cfg)
        run_io.write_data_split(self.run_dir, self.data_split)
        if (
            self.data_split["method"] == "hash" or self.data_split["dropped_from_train"]
        ):  # news to whoever gave the data
            print(f"pasr train: data: {describe_split(self.data_split)}", file=sys.stderr)

    def _choose_dtypes(self) -> None:
        """``self.rollout_dtype`` and ``self.algo`` (:func:`device_setup.choose_dtypes`)."""
        self.rollout_dtype, self.algo = device_setup.choose_dtypes(self.cfg.model, self.cfg.algo, self.device)

    def _generator(self):
        """The policy for generation, synced with the trained weights."""
        model, self.rollout_model = device_setup.generator(self.model, self.rollout_dtype, self.rollout_model)
        return model

    def _make_optimizer(self, phase: str):
        self.optimizer_phase = phase
        lr = self.cfg.warmup.lr if phase == "warmup" else self.cfg.algo.lr
        return torch.optim.AdamW(self.model.parameters(), lr=lr, weight_decay=0.0)

    def _rl_step(self, step: int) -> int:
        """Global step ``step`` counted within the RL phase (1 = its first step)."""
        return step - self.cfg.warmup.steps

    def _step_queries(self, step: int) -> list[Example]:
        """The training queries of RL step ``step`` (PASR and RRR take the same ones)."""
        cfg = self.cfg
        idx = step_indices(len(self.train), cfg.rollout.queries_per_step, self._rl_step(step) - 1, cfg.trainer.seed)
        return [self.train[i] for i in idx]

    def _set_rl_lr(self, step: int) -> float:
        """``algo.lr`` ramped linearly over the first ``algo.lr_warmup_steps`` RL steps. Set from
        the step number before every update, so a resumed run needs no scheduler state."""
        lr = rl_learning_rate(self.cfg.algo.lr, self._rl_step(step), self.cfg.algo.lr_warmup_steps)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        return lr

    def _restore(self, latest: Path | None) -> None:
        """Optimizer, RNG and step of checkpoint ``latest`` (its weights are already loaded);
        checkpoints over ``keep_last`` that a kill left are pruned (:func:`ckpt.prune`).
        A run killed before its first checkpoint has none: everything it wrote is dropped and
        it starts over in the same directory."""
        if latest is None:
            run_io.truncate_after(self.run_dir, 0)
            print(f"no checkpoint in {self.run_dir}: starting the run over", file=sys.stderr)
            return
        self.optimizer = self._make_optimizer(ckpt.trainer_state(latest)["phase"])
        state = ckpt.load_trainer_state(latest, self.optimizer)
        self.step = int(state["step"])
        self.phase_start.restore(state.get(DIGEST_KEY))  # what the RL phase started from, when it has
        steps_left = self.step < self._total_steps()
        if not state["optimizer_restored"] and steps_left and self._phase(self.step + 1) == self.optimizer_phase:
            # only the newest checkpoint of an unfinished run keeps it; the warm-up's end none (a fresh
            # AdamW follows it), a finished run's last none unless trainer.keep_final_optimizer
            print(
                f"pasr train: warning: {latest} keeps no optimizer state: the steps after it start a fresh "
                f"{self.optimizer_phase} optimizer, which an uninterrupted run would not (a finished run keeps "
                f"it with trainer.keep_final_optimizer=true)",
                file=sys.stderr,
            )
        run_io.truncate_after(self.run_dir, self.step)
        ckpt.prune(self.ckpt_root, self.cfg.trainer.keep_last)
        print(f"resumed from {latest} at step {self.step}", file=sys.stderr)

    # ---------------------------------------------------------------- logging
    def _log(self, step: int, phase: str, metrics: dict) -> None:
        run_io.log_metrics(self.run_dir, self._tracking, step, phase, metrics)

    def _evaluate(self, tag: str) -> dict:
        """Held-out evaluation ``tag`` at the current step (:func:`evaluations.evaluate_heldout`)."""
        return evaluations.evaluate_heldout(self, tag)

    def _evaluate_rrr(self, tag: str):
        """RRR's metrics and records of evaluation ``tag`` (:func:`evaluations.rrr_heldout`)."""
        return evaluations.rrr_heldout(self, tag)

    # ---------------------------------------------------------------- steps
    def warmup_batch(self, step: int) -> tuple[list[list[int]], list[list[int]]]:
        """Prompt and target token ids (EOS included) of warm-up step ``step``'s rows."""
        from runtime.hf_generate import render_prompts

        cfg = self.cfg.warmup
        idx = step_indices(len(self.warmup_samples), cfg.batch_size, step - 1, cfg.seed)
        samples = [self.warmup_samples[i] for i in idx]
        # A prefill (PASR's "<think>") belongs to the prompt here too, as in the rollouts, or the
        # model learns to write a second "<think>" (recipe.local_engine.warmup_data).
        prompts = [render_prompts(self.tokenizer, [s.chat], s.prefill)[0] for s in samples]
        eos = self.tokenizer.eos_token_id
        responses = [self.tokenizer(s.target, add_special_tokens=False)["input_ids"] + [eos] for s in samples]
        return prompts, responses

    def warmup_step(self, step: int) -> dict:
        prompts, responses = self.warmup_batch(step)
        w = self.cfg.warmup
        lr = warmup_learning_rate(w.lr, step, w.steps, w.lr_schedule)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        with timer(m := {}, "update"):
            pad = self.tokenizer.pad_token_id
            loss = sft_backward(self.model, prompts, responses, pad, w.micro_batch_size, self.algo.bf16_autocast)
            grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.algo.max_grad_norm)
            require_finite(grad_norm, "the warm-up SFT loss's gradient norm")
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)  # no stale gradients (0.54 GB here) held through evaluations
        return {"warmup/loss": loss.item(), "warmup/grad_norm": float(grad_norm), "warmup/lr": lr, **m}

    def _ensure_reference(self) -> None:
        """The KL reference is the policy the RL phase starts from (after the warm-up), not the
        base model: KL to the base would pull the policy back out of the tag format. Read from
        that start's checkpoint for each step (:mod:`recipe.local_engine.kl_reference`), or with
        ``algo.ref_in_memory`` held: a copy of the weights at the phase's start, or that
        checkpoint loaded once when the run resumed mid-phase."""
        if self.reference is not None or self.cfg.algo.kl_coef <= 0:
            return
        keep = self.cfg.algo.ref_in_memory
        if keep and self.step == self.cfg.warmup.steps:  # the current weights are the phase's start
            self.reference = KLReference.held(copy.deepcopy(self.model).eval().requires_grad_(False))
        else:
            self.reference = KLReference(self._load_phase_start, keep)

    def _load_phase_start(self):
        """The weights the RL phase started from, frozen, checked against their digest at the
        phase's start (:class:`PhaseStart`). Loaded without transformers' progress bar: read for
        every step, its bar broke the run's own at each."""
        from runtime.gqa_attention import use_attention
        from runtime.model_loading import load_model

        model = self.phase_start.read(
            lambda path, dtype: load_model(path, dtype, self.device, progress_bar=False), self.cfg.model.dtype
        )
        use_attention(model, self.cfg.model.attention)
        return model.eval().requires_grad_(False)

    def pasr_step(self, step: int) -> dict:
        """One PASR step (:func:`recipe.local_engine.pasr_step.pasr_step`) on this step's
        queries; its rollouts are dumped and the judge errors checked before the update."""
        from recipe.local_engine.pasr_step import pasr_step

        cfg = self.cfg
        self._ensure_reference()
        queries = self._step_queries(step)
        m, _ = pasr_step(
            get_generator=self._generator,
            model=self.model,
            reference=self.reference,
            optimizer=self.optimizer,
            tokenizer=self.tokenizer,
            queries=queries,
            prompts=self.prompts,
            prompt_versions=self.prompt_versions,
            judge=self.judge,
            params=self.params,
            rollout=cfg.rollout,
            pasr=cfg.pasr,
            algo=self.algo,
            run_id=self.run_id,
            step=step,
            before_update=lambda records: self._before_update(step, records),
        )
        warning = self.refine_watch.observe(step, m)
        if warning:
            from tqdm import tqdm

            tqdm.write(warning, file=sys.stderr)  # above the progress bar, which goes on below it
        return m

    def rrr_step(self, step: int) -> dict:
        """One Reflect, Retry, Reward step (:func:`recipe.local_engine.rrr.rrr_step`) on the
        queries PASR would take at this step."""
        from recipe.local_engine.rrr import rrr_step

        cfg = self.cfg
        self._ensure_reference()
        queries = self._step_queries(step)
        self.model.eval()
        m, records = rrr_step(
            generator=self._generator(),
            model=self.model,
            reference=self.reference,
            optimizer=self.optimizer,
            tokenizer=self.tokenizer,
            queries=queries,
            prompts=self.rrr_prompts,
            judge=self.judge,
            rollout=cfg.rollout,
            rrr=cfg.rrr,
            algo=self.algo,
            run_id=self.run_id,
            step=step,
        )
        # after rrr_step's update, which a stop discards with the step: nothing of it is saved
        self._dump_and_check(step, records)
        return m

    def _before_update(self, step: int, records) -> None:
        """Between a PASR step's generation and its update: the bf16 rollout copy is let go (the
        next generation makes it again from the updated weights, about 0.3 s), so its 0.27 GB on
        the embedded model is not held beside the update's gradients and activations, the run's
        peak (3 bf16 RL steps: 3.76 GB against 4.03, docs/results/demo.md); then the rollouts are
        dumped and checked."""
        self.rollout_model = None
        self._dump_and_check(step, records)

    def _dump_and_check(self, step: int, records) -> None:
        """Step ``step``'s rollouts dumped, then its judge errors checked, as the verl engine
        checks them (:func:`recipe.judge_errors.check_judge_errors`)."""
        run_io.dump_rollouts(self.run_dir, self.cfg.trainer, step, records)
        check_judge_errors(
            records,
            self.cfg.pasr.max_judge_error_rate,
            step=step,
            judge=self.cfg.pasr.judge,
            resume=f"resume: pasr train --resume {self.run_dir}",
            records_at=run_io.rollout_dump(self.run_dir, step)
            if self.cfg.trainer.dump_rollouts
            else "not dumped (trainer.dump_rollouts=false)",
        )

    # ---------------------------------------------------------------- loop
    def _total_steps(self) -> int:
        """The run's last global step: the warm-up's steps, then the method's."""
        return self.cfg.warmup.steps + self.cfg.trainer.steps

    def _phase(self, step: int) -> str:
        """``warmup`` for global steps ``1..warmup.steps``, the method's phase after them."""
        return "warmup" if step <= self.cfg.warmup.steps else self.rl_phase

    def _save(self, end_of_warmup: bool) -> Path:
        """Checkpoint of the current step. The end of the warm-up is pinned, and saved without
        the optimizer state: the phase after it starts a fresh optimizer, so no resume reads it
        (1.1 GB of AdamW moments on SmolLM2-135M)."""
        if end_of_warmup:  # the RL phase starts from these weights
            self.phase_start.record(self.model, self.cfg.model.dtype)
        state = {"phase": self._phase(self.step), "model_path": self.model_path}
        if self.phase_start.saved():  # a resume checks the KL reference against it
            state[DIGEST_KEY] = self.phase_start.saved()
        optimizer = None if end_of_warmup else self.optimizer
        return ckpt.save_checkpoint(
            self.ckpt_root,
            self.step,
            self.model,
            self.tokenizer,
            optimizer,
            state,
            self.cfg.trainer.keep_last,
            pin=end_of_warmup,
        )

    def _release_optimizer(self) -> None:
        """Drop the optimizer where nothing reads it again, before an evaluation: its two moments
        are twice the weights (1.1 GB on the embedded model), which the evaluation's KV cache
        would otherwise sit beside (the demo's final evaluation peaked at 5.1 GB with them)."""
        self.optimizer = None
        self.optimizer_phase = None

    def _on_sigint(self, signum, frame):
        if self._stop:  # second Ctrl-C: stop now
            raise KeyboardInterrupt
        self._stop = True
        print(
            "\nCtrl-C: finishing this step, saving a checkpoint, then stopping (Ctrl-C again to abort)", file=sys.stderr
        )

    def fit(self) -> dict:
        from tqdm import tqdm

        cfg = self.cfg
        self.evals = run_io.previous_evals(self.run_dir)
        total = self._total_steps()
        previous = signal.signal(signal.SIGINT, self._on_sigint)
        # the final evaluation belongs to the last step (a run extended with more trainer.steps
        # has one from its earlier end, which does not count)
        final_wanted = cfg.trainer.eval_at_end and cfg.trainer.steps > 0
        final_done = not final_wanted or self.evals.get("final", {}).get("step") == self.step
        bar = None
        try:
            if self.resume and self.step >= total and final_done:
                print(f"{self.run_dir} finished at step {self.step}: nothing to resume", file=sys.stderr)
                return self.evals
            if self.step == 0 and cfg.trainer.eval_at_start:
                self._evaluate("base")
            bar = tqdm(total=total, initial=self.step, desc="pasr train", dynamic_ncols=True, file=sys.stderr)
            while self.step < total:
                step = self.step + 1
                phase = self._phase(step)
                if self.optimizer is None or self.optimizer_phase != phase:
                    self.optimizer = self._make_optimizer(phase)  # a fresh AdamW for the RL phase
                lr = self._set_rl_lr(step) if phase != "warmup" else None
                steps = {"warmup": self.warmup_step, "pasr": self.pasr_step, "rrr": self.rrr_step}
                try:
                    m = steps[phase](step)
                except NonFiniteLoss as exc:  # raised before the update and before this step's checkpoint
                    raise NonFiniteLoss(
                        f"step {step} ({phase}): {exc}; the run stopped before the update, and "
                        f"nothing of this step was saved"
                    ) from None
                if lr is not None:
                    m["actor/lr"] = lr
                self.step = step
                self._log(step, phase, m)
                bar.update(1)
                bar.set_postfix(self._postfix(phase, m), refresh=False)
                end_of_warmup = step == cfg.warmup.steps and cfg.warmup.steps > 0
                if end_of_warmup:
                    self._release_optimizer()  # the RL phase starts a fresh one; its checkpoint keeps none
                if end_of_warmup and cfg.trainer.eval_after_warmup:
                    self._evaluate("warmup")
                if end_of_warmup or step % cfg.trainer.save_every == 0 or step == total or self._stop:
                    self._save(end_of_warmup)
                if self._stop:
                    raise StopRequested
            bar.close()
            # the last step is saved: the evaluation needs neither AdamW's moments nor the KL reference
            self._release_optimizer()
            self.reference = None
            if final_wanted:  # a resume past the last checkpoint whose final evaluation was cut off lands here too
                self._evaluate("final")
            if not cfg.trainer.keep_final_optimizer:
                # finished: no resume reads the moments (1.1 GB on the embedded model)
                ckpt.drop_optimizer(self.ckpt_root)
        finally:
            if bar is not None:  # now: closed when collected, its last line would follow an error's one line
                bar.close()
            signal.signal(signal.SIGINT, previous)
            close = getattr(self.judge, "close", None)
            if close:
                close()
        return self.evals

    @staticmethod
    def _postfix(phase: str, m: dict) -> dict:
        if phase == "warmup":
            return {"loss": f"{m['warmup/loss']:.3f}"}
        if phase == "rrr":
            return {
                "first": f"{m['rrr/first_attempt_acc']:.2f}",
                "retry": f"{m['rrr/retry_acc']:.2f}",
                "rows": f"{m['rrr/trained_rows']:.0f}",
            }
        return {
            "reward": f"{m['pasr/reward_mean']:.2f}",
            "fmt": f"{m['pasr/format_pass_rate']:.2f}",
            "refine": f"{m['pasr/refine_rate']:.2f}",
            "acc": f"{m['pasr/acc_refine']:.2f}",
            "live": f"{m['pasr/refine_term/live_groups']:.2f}",  # share of groups the refine term reached
        }
