"""The numbers a verl run is laid out by, and what the GPUs hold: nodes, GPUs, tensor parallel
sizes, batches and lengths read as whole numbers (a zero, a negative or a word is a FAIL line
naming the key, and the arithmetic that would build on it waits); the policy's heads split over
the rollout's tensor parallel size; the memory its weights, gradients and Adam moments take a
GPU; and the GPUs of the nodes no role uses.
"""

from __future__ import annotations

from dataclasses import dataclass

from recipe.plan_check.compose import select
from recipe.plan_check.model import (
    REMOTE_PREFIXES,
    ModelShape,
    heads_problem,
    heads_that_fit,
    human,
    is_local_path,
    model_folder_problem,
    model_shape,
)
from recipe.plan_check.report import Report

ROLLOUT = "actor_rollout_ref.rollout"
ACTOR = "actor_rollout_ref.actor"
# (key, may be null, default when absent): whole numbers >= 1 that the plan and verl divide by
WHOLE_NUMBERS = (
    ("trainer.nnodes", False, 1),
    ("trainer.n_gpus_per_node", False, 1),
    (f"{ROLLOUT}.tensor_model_parallel_size", True, 1),
    ("data.train_batch_size", False, None),
    (f"{ROLLOUT}.n", False, 1),
    (f"{ACTOR}.ppo_mini_batch_size", False, None),
    (f"{ACTOR}.ulysses_sequence_parallel_size", True, 1),
    ("data.max_prompt_length", False, None),
    ("data.max_response_length", False, None),
    ("trainer.total_epochs", False, 1),
    ("trainer.total_training_steps", True, None),
    (f"{ACTOR}.ppo_micro_batch_size_per_gpu", True, None),
    (f"{ACTOR}.ppo_max_token_len_per_gpu", True, None),
    ("actor_rollout_ref.ref.log_prob_max_token_len_per_gpu", True, None),
    (f"{ROLLOUT}.log_prob_max_token_len_per_gpu", True, None),
)
MEMORY_UTILIZATION = f"{ROLLOUT}.gpu_memory_utilization"
ACTOR_BYTES = 16  # a parameter of the FSDP actor: fp32 weight, fp32 gradient, Adam's two fp32 moments


@dataclass(frozen=True)
class Layout:
    """The run's whole numbers, each checked >= 1 (the optional ones None when unset)."""

    values: dict

    def __getitem__(self, key: str):
        return self.values[key]

    @property
    def nnodes(self) -> int:
        return self.values["trainer.nnodes"]

    @property
    def per_node(self) -> int:
        return self.values["trainer.n_gpus_per_node"]

    @property
    def gpus(self) -> int:
        return self.nnodes * self.per_node

    @property
    def tp(self) -> int:
        return self.values[f"{ROLLOUT}.tensor_model_parallel_size"] or 1

    @property
    def sp(self) -> int:
        return self.values[f"{ACTOR}.ulysses_sequence_parallel_size"] or 1

    @property
    def dp(self) -> int:
        return max(1, self.gpus // self.sp)

    @property
    def bsz(self) -> int:
        return self.values["data.train_batch_size"]

    @property
    def n(self) -> int:
        return self.values[f"{ROLLOUT}.n"]

    @property
    def mini(self) -> int:
        return self.values[f"{ACTOR}.ppo_mini_batch_size"]

    @property
    def prompt(self) -> int:
        return self.values["data.max_prompt_length"]

    @property
    def response(self) -> int:
        return self.values["data.max_response_length"]

    @property
    def epochs(self) -> int:
        return self.values["trainer.total_epochs"]


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def read_layout(config) -> tuple[Layout | None, list[str]]:
    """``(the layout, [])`` or ``(None, one line a bad number)``: a number verl divides by or
    counts with that is zero, negative, fractional or a word (``trainer.nnodes=abc`` composes:
    verl's yaml does not type it) would make every figure built on it wrong, or a traceback."""
    values, problems = {}, []
    for key, nullable, default in WHOLE_NUMBERS:
        value = select(config, key, default)
        if value is None and nullable:
            values[key] = None
        elif _whole(value):
            values[key] = value
        else:
            unset = " or null" if nullable else ""
            problems.append(f"{key}={value}: must be a whole number >= 1{unset}")
    utilization = select(config, MEMORY_UTILIZATION, 0.5)
    if isinstance(utilization, bool) or not isinstance(utilization, (int, float)) or not 0 < utilization <= 1:
        problems.append(f"{MEMORY_UTILIZATION}={utilization}: must be a fraction in (0, 1] of a GPU's memory")
    else:
        values[MEMORY_UTILIZATION] = float(utilization)
    return (None, problems) if problems else (Layout(values), [])


# --------------------------------------------------------------------------- GPUs of the nodes
def idle_gpus(layout: Layout, node_gpus: int, judge_gpus: int) -> int:
    """GPUs of ``trainer.nnodes`` nodes of ``node_gpus`` that neither train nor serve the judge:
    every node trains on ``trainer.n_gpus_per_node`` (one number for all of them), the judge
    takes its GPUs on one of them."""
    return max(0, layout.nnodes * node_gpus - layout.gpus - judge_gpus)


def gpu_lines(report: Report, layout: Layout, node_gpus: int, judge_gpus: int, fits: bool) -> None:
    """The plan's GPU lines: the sum by role and the GPUs no role uses (named, so a layout that
    leaves some idle says so)."""
    judge = f" + {judge_gpus} judge (vLLM, tensor parallel {judge_gpus}, on one node)" if judge_gpus else ""
    roles = f"{layout.gpus} training ({layout.nnodes} node(s) x {layout.per_node}){judge}"
    if not fits:
        report.plan.append(("GPUs", f"{roles}: does not fit nodes of {node_gpus} GPU(s) (the FAIL line above)"))
        return
    report.plan.append(("GPUs", f"{layout.gpus + judge_gpus} = {roles}"))
    idle = idle_gpus(layout, node_gpus, judge_gpus)
    cluster = f"{layout.nnodes} node(s) x {node_gpus} GPU(s)"
    if not idle:
        report.plan.append(("idle GPUs", f"none: every GPU of the {cluster} has a role"))
        return
    why = (
        "every node trains on trainer.n_gpus_per_node (one number for all nodes) and the judge takes "
        f"{judge_gpus} on one of them; serve the judge elsewhere (pasr.judge.base_url) to train on all"
        if judge_gpus and layout.nnodes > 1
        else f"trainer.n_gpus_per_node={layout.per_node} of a node's {node_gpus}"
    )
    report.plan.append(("idle GPUs", f"{idle} of the {cluster}: {why}"))


# --------------------------------------------------------------------------- the policy
def check_policy(config, report: Report, layout: Layout | None, gpu_memory_gb: float, here: bool) -> ModelShape:
    """``actor_rollout_ref.model.path``: a local folder verl can load (checked where the run
    reads it: with ``here`` false a folder not on this machine is a note), its heads split over
    the rollout's tensor parallel size and its memory a GPU. Returns its shape."""
    key = "actor_rollout_ref.model.path"
    path = str(select(config, key))
    if path.startswith(REMOTE_PREFIXES):
        report.note("model", f"{key}={path}: remote storage, copied at start; not checked")
    elif is_local_path(path):
        why = model_folder_problem(path)
        if why is None:
            report.ok("model", f"{key}={path}: a model folder with a config.json and weights")
        elif not here and why == "no such folder":
            report.note("model", f"{key}={path}: not on this machine (the job reads it on the cluster); not checked")
        else:
            report.fail(
                "model",
                f"{key}={path}: {why}; verl would stop after minutes of start-up: give a Hugging Face model "
                "folder (config.json, tokenizer, weights) or a hub name",
            )
    shape = model_shape(path)
    if layout is None:
        return shape
    tp_key = f"{ROLLOUT}.tensor_model_parallel_size"
    if shape.heads is None:
        report.note(
            "model",
            f"attention heads unknown (no local config.json): vLLM needs them divisible by {tp_key}={layout.tp}",
        )
    elif why := heads_problem(shape, layout.tp):
        fit = ", ".join(str(t) for t in heads_that_fit(shape, layout.per_node))
        report.fail("model", f"{tp_key}={layout.tp}: {path}: {why} (vLLM refuses it); sizes that split: {fit}")
    else:
        report.ok("model", f"its {shape.heads} attention heads split over {tp_key}={layout.tp}")
    if shape.params is None:
        return shape
    weights, actor = memory_figures(layout, shape)
    budget = layout[MEMORY_UTILIZATION] * gpu_memory_gb
    if weights > 0.75 * budget:
        report.fail(
            "memory",
            f"{tp_key}={layout.tp}: {human(shape.params)} parameters are {weights:.0f} GB of bf16 weights a GPU, "
            f"more than 3/4 of vLLM's {MEMORY_UTILIZATION}={layout[MEMORY_UTILIZATION]:g} of a {gpu_memory_gb:.0f} GB "
            "GPU (--gpu-memory-gb), leaving its KV cache almost nothing: a larger tensor parallel size",
        )
    if actor > 0.9 * gpu_memory_gb:
        report.fail(
            "memory",
            f"the FSDP actor's fp32 weights, gradients and Adam moments ({ACTOR_BYTES} bytes a parameter, "
            f"{human(shape.params)}) take {actor:.0f} GB a GPU over {layout.gpus} training GPU(s), more than a "
            f"{gpu_memory_gb:.0f} GB GPU holds beside activations: more training GPUs (trainer.nnodes)",
        )
    return shape


def memory_figures(layout: Layout, shape: ModelShape) -> tuple[float, float]:
    """GB a GPU: (the rollout's bf16 weights at its tensor parallel size, the FSDP actor's state
    sharded over the training GPUs); the model's size must be known."""
    return 2 * shape.params / 1e9 / layout.tp, ACTOR_BYTES * shape.params / 1e9 / layout.gpus


def memory_line(layout: Layout, shape: ModelShape, gpu_memory_gb: float) -> str:
    if shape.params is None:
        return "unknown (the policy's size is unknown)"
    weights, actor = memory_figures(layout, shape)
    return (
        f"~{actor:.0f} GB of FSDP actor state ({ACTOR_BYTES} bytes a parameter over {layout.gpus} GPU(s), "
        f"plus activations) while updating; {weights:.0f} GB of rollout weights at tensor parallel {layout.tp} "
        f"in vLLM's {layout[MEMORY_UTILIZATION]:.0%} of {gpu_memory_gb:.0f} GB while generating"
    )
