"""The plan's checkpoint line: how often the run saves, how many it keeps and their size, so what
a preemption costs (the steps since the last checkpoint) and what the disk holds are known before
GPUs are held. A run that saves rarely or keeps every checkpoint is a note, not a problem: it
runs, but a preemption or the disk makes it expensive (issue 64: the yaml's save_freq 50 at 78
steps an epoch left one checkpoint mid-epoch, and kept all of them at about 90 GB each).
"""

from __future__ import annotations

from pathlib import Path

from recipe.plan_check.compose import select
from recipe.plan_check.layout import Layout
from recipe.plan_check.model import ModelShape
from recipe.plan_check.report import Report

# bytes a parameter in verl's FSDP checkpoint, by actor.checkpoint.save_contents: the fp32
# weights, Adam's two fp32 moments; the bf16 Hugging Face copy when asked for
CHECKPOINT_BYTES = {"model": 4, "optimizer": 8, "hf_model": 2}
EPOCH_SHARE = 0.1  # the paper setup's checkpoint interval, a share of an epoch
RARE_SHARE = 0.25  # more than this share of an epoch between checkpoints is a note
KEEP_SUGGESTED = 3
TOPIC = "ckpts"  # the report's topic column is 9 characters wide


def checkpoint_gb(config, params: float | None) -> float | None:
    """GB of one actor checkpoint: the parts ``actor.checkpoint.save_contents`` names, at
    :data:`CHECKPOINT_BYTES` a parameter; None when the model's size is unknown."""
    if params is None:
        return None
    contents = select(config, "actor_rollout_ref.actor.checkpoint.save_contents", ["model", "optimizer", "extra"])
    per_param = sum(CHECKPOINT_BYTES.get(str(part), 0) for part in (contents or []))
    return per_param * params / 1e9


def _size(gb: float) -> str:
    return f"{gb / 1000:.1f} TB" if gb >= 1000 else f"{gb:.0f} GB"


def checkpoint_lines(config, report: Report, layout: Layout, shape: ModelShape, train_rows: int | None) -> None:
    """The ``checkpoints`` plan line, and a note when a preemption would lose more than
    :data:`RARE_SHARE` of an epoch, when every checkpoint is kept, or when a resubmission would
    not resume. A ``trainer.save_freq`` that is not a whole number is a FAIL line (verl compares
    it with 0 after start-up)."""
    freq = select(config, "trainer.save_freq", -1)
    keep = select(config, "trainer.max_actor_ckpt_to_keep")
    if isinstance(freq, bool) or not isinstance(freq, int):
        report.fail(TOPIC, f"trainer.save_freq={freq}: a whole number of steps between checkpoints (-1: none)")
        return
    if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int)):
        report.fail(TOPIC, f"trainer.max_actor_ckpt_to_keep={keep}: a whole number >= 1, or null (keep all)")
        return
    per_epoch = train_rows // layout.bsz if train_rows else None
    total = layout["trainer.total_training_steps"] or (per_epoch * layout.epochs if per_epoch else None)
    if freq <= 0:
        report.plan.append(("checkpoints", f"none (trainer.save_freq={freq})"))
        report.note(
            TOPIC,
            f"trainer.save_freq={freq}: no checkpoint is saved, so a preempted or stopped run starts over; "
            "save every tenth of an epoch or so (setup=paper_qwen2_5_7b saves every 8 of MATH's 78 steps)",
        )
        return
    saved = None if total is None else total // freq + (total % freq > 0)  # verl saves the last step too
    gb = checkpoint_gb(config, shape.params)
    limit = keep if keep and keep > 0 else None  # verl keeps every checkpoint for null or 0
    # on disk at once: verl saves a new checkpoint beside the old one when it keeps only one
    peak = None if limit is None and saved is None else (limit or saved) + (limit == 1)
    kept = min(peak, saved) if peak and saved else peak
    share = f" ({freq / per_epoch:.0%} of an epoch of {per_epoch} steps)" if per_epoch else ""
    keeping = (
        f"the last {limit} kept"
        if limit
        else f"all kept (trainer.max_actor_ckpt_to_keep={'null' if keep is None else keep})"
    )
    size = ""
    if gb is not None:
        size = f"; ~{_size(gb)} each (fp32 weights and Adam's moments)"
        if kept:
            size += f", ~{_size(gb * kept)} at most in trainer.default_local_dir"
    count = f", {saved} over the run" if saved else ""
    report.plan.append(
        (
            "checkpoints",
            f"every {freq} step(s){share}{count}, {keeping}{size}; a preemption loses at most {freq} step(s), "
            "and the same command again resumes from the newest",
        )
    )
    if per_epoch and freq > RARE_SHARE * per_epoch and (total is None or total > freq):
        better = max(1, round(EPOCH_SHARE * per_epoch))
        report.note(
            TOPIC,
            f"trainer.save_freq={freq} is {freq / per_epoch:.0%} of an epoch of {per_epoch} steps: a preemption "
            f"loses up to {freq} steps; trainer.save_freq={better} saves every tenth of an epoch",
        )
    if not limit and saved and saved > KEEP_SUGGESTED:
        disk = f" of ~{_size(gb)} (~{_size(gb * saved)})" if gb is not None else ""
        report.note(
            TOPIC,
            f"every checkpoint is kept: {saved}{disk} over the run; "
            f"trainer.max_actor_ckpt_to_keep={KEEP_SUGGESTED} keeps the last {KEEP_SUGGESTED}",
        )
    if str(select(config, "trainer.resume_mode", "auto")) == "disable":
        report.note(
            TOPIC,
            "trainer.resume_mode=disable: a resubmission starts from scratch instead of from the newest checkpoint "
            "in trainer.default_local_dir (auto, verl's default, resumes)",
        )


def check_resume(config, report: Report, layout: Layout) -> None:
    """The checkpoint a resubmission resumes from (``trainer.resume_mode=auto``: the one
    ``latest_checkpointed_iteration.txt`` names in ``trainer.default_local_dir``, when this
    machine sees it) was saved by as many FSDP ranks as the run has training GPUs: verl loads
    its shards by rank (``model_world_size_W_rank_R.pt``), so a run resubmitted on fewer nodes
    after a node was lost fails at its first load, after minutes of start-up."""
    from runtime.hf_export import VerlCheckpointError, fsdp_world_size, tracked_step

    if str(select(config, "trainer.resume_mode", "auto")) != "auto":
        return
    run_dir = Path(str(select(config, "trainer.default_local_dir"))).expanduser()
    try:
        step = tracked_step(run_dir) if run_dir.is_dir() else None
        world = fsdp_world_size(run_dir / f"global_step_{step}" / "actor") if step is not None else None
    except (VerlCheckpointError, OSError) as exc:
        report.note(TOPIC, f"the newest checkpoint in trainer.default_local_dir is not readable here: {exc}")
        return
    if world is None:
        return
    if world != layout.gpus:
        report.fail(
            TOPIC,
            f"trainer.default_local_dir={run_dir} resumes from global_step_{step}, saved by {world} FSDP rank(s), "
            f"but this run trains on {layout.gpus} GPU(s) (trainer.nnodes x trainer.n_gpus_per_node): verl loads "
            f"the shards by rank and would stop; train on {world} GPUs again, or start over in another folder",
        )
    else:
        report.ok(TOPIC, f"resumes from global_step_{step} of trainer.default_local_dir ({world} FSDP ranks, as here)")
