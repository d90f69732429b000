"""`pasr eval` on a scripted backend, for the eval tests: the backend (it answers each chat with
``respond(system, user)``; tokens = words), the run's config and records, gold answers of the real
data sets, answers written as PASR and as a plain prompt answer, and a local run's checkpoints
(``latest`` naming one; trained further). The ``data_env`` fixture
(``PASR_DATA_DIR`` set to the shared data sets) is in tests/conftest.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from data.records import iter_records
from eval.backends import Completion, GenParams
from eval.run import EvalConfig


class Scripted:
    """A backend that answers each chat with ``respond(system, user)``; tokens = words."""

    name = "scripted"

    def __init__(self, respond, interrupt_on_call: int | None = None, fail_if=None):
        self.respond = respond
        self.interrupt_on_call = interrupt_on_call
        self.fail_if = fail_if
        self.calls: list[list] = []

    def load(self) -> None:
        pass

    def generate(self, chats, params: GenParams, on_finished=None):
        self.calls.append([list(c) for c in chats])
        if self.interrupt_on_call == len(self.calls):
            raise KeyboardInterrupt
        out = []
        for chat in chats:
            system = chat[0]["content"] if chat[0]["role"] == "system" else None
            user = chat[-1]["content"]
            if self.fail_if is not None and self.fail_if(user):
                raise ValueError("prompt too long for the context window")
            text = self.respond(system, user)
            out.append(Completion(text, len(text.split()), "stop"))
        return out


def cfg_for(tmp_path, **kw) -> EvalConfig:
    kw.setdefault("model", "scripted-model")
    kw.setdefault("datasets", ["gsm8k"])
    kw.setdefault("out", str(tmp_path / "run"))
    kw.setdefault("progress", False)
    return EvalConfig(**kw)


def records_of(out) -> list:
    return list(iter_records(Path(out) / "samples.jsonl", strict=True))


def golds(shared_data: Path, name: str, n: int) -> dict[str, str]:
    from data.loaders import load_examples

    return {ex.question: ex.answer for ex in load_examples(name, limit=n)}


def pasr_text(answer: str) -> str:
    return (
        "<think> First attempt: compute it. <refine> The first step was off; redo it carefully. "
        f"</refine> So the result is {answer}. </think> <answer> \\boxed{{{answer}}} </answer>"
    )


def plain_text(answer: str) -> str:
    return f"Step by step we find the result. The final answer is <answer>\\boxed{{{answer}}}</answer>"


def local_run(tmp_path: Path, model_dir: Path) -> Path:
    """A local run's checkpoints (no config.yaml): step_000002 and ``latest`` naming it."""
    run = tmp_path / "train_run"
    step = run / "checkpoints" / "step_000002"
    shutil.copytree(model_dir, step)
    (step / "trainer_state.json").write_text('{"phase": "pasr", "step": 2}')
    (run / "checkpoints" / "latest").write_text("step_000002")
    return run


def train_further(run: Path, step: int) -> None:
    """What two more steps leave: another checkpoint, other weights, ``latest`` naming it."""
    from safetensors.torch import load_file, save_file

    old = run / "checkpoints" / "step_000002"
    new = run / "checkpoints" / f"step_{step:06d}"
    shutil.copytree(old, new)
    weights = load_file(new / "model.safetensors")
    save_file({k: v + 0.01 for k, v in weights.items()}, new / "model.safetensors", metadata={"format": "pt"})
    (new / "trainer_state.json").write_text(json.dumps({"phase": "pasr", "step": step}))
    (run / "checkpoints" / "latest").write_text(new.name)
