"""What a run directory says about the records in it: its label, a ``pasr eval`` run's checkpoint,
a training run's refine reward.

* **label**: the directory as a path (relative to the working directory when it is under it). A
  run id or a folder name (``latest``, ``eval-final``) is shared by many runs; the directory is not.
* **checkpoint** (``summary.json`` of ``pasr eval``): the training run and step of the weights that
  answered, which orders two evaluations of one training run (:mod:`eval.stats.pairing`).
* **reward** (``config.yaml`` of a local training run): which refine reward the run paid
  (``pasr.refine_compare``, ``tie_value``, ``empty_refine_value``), so that a plot's title states
  the run's own reward, not the paper's.

Files that are missing or unreadable leave the field None: the caller says "not recorded".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewards.refine import BETTER, EMPTY, NO_BASELINE, NONE, TIE, WORSE

CONFIG_NAME = "config.yaml"  # the local engine's resolved config (recipe.local_engine.run_io)
SUMMARY_NAME = "summary.json"  # pasr eval (eval.summary.SUMMARY_JSON)


def display(path: str | Path) -> str:
    """A directory as a person would type it: relative to the working directory when under it."""
    p = Path(path)
    try:
        rel = p.resolve().relative_to(Path.cwd().resolve())
    except (ValueError, OSError):
        return str(p)
    return "." if str(rel) == "." else str(rel)


def _num(v: Any) -> str:
    return f"{v:+g}" if v else "0"


@dataclass(frozen=True)
class RewardMode:
    """The refine reward a training run paid (see :mod:`rewards.refine`)."""

    compare: str  # sign | margin | draft
    tie_value: float
    empty_value: float | None

    def describe(self) -> str:
        """What each refine outcome earned, in words: ``margin: better/worse acc - plain mean, tie 0, no refine 0``."""
        if self.compare == "sign":
            paid = "better +1, worse -1"
        elif self.compare == "margin":
            paid = "better/worse acc - plain mean"
        else:
            paid = "better/worse acc - own draft (none: plain mean)"
        text = f"{self.compare}: {paid}, tie {_num(self.tie_value)}"
        if self.empty_value is not None:
            text += f", empty refine {_num(self.empty_value)}"
        return text + ", no refine 0"

    def pays(self) -> dict[str, str]:
        """What each refine outcome earned (``margin``/``draft``: better and worse earn the difference)."""
        diff = self.compare != "sign"
        out = {
            BETTER: "+diff" if diff else "+1",
            WORSE: "-diff" if diff else "-1",
            TIE: _num(self.tie_value),
            NONE: "0",
            NO_BASELINE: "0",
        }
        if self.empty_value is not None:
            out[EMPTY] = _num(self.empty_value)
        return out

    def basis(self) -> str:
        """What a refine rollout is compared with."""
        if self.compare == "draft":
            return "its own draft (else the mean plain accuracy of the query)"
        return "the mean plain accuracy of the query"

    def to_json(self) -> dict[str, Any]:
        return {
            "refine_compare": self.compare,
            "tie_value": self.tie_value,
            "empty_refine_value": self.empty_value,
            "describe": self.describe(),
            "basis": self.basis(),
            "pays": self.pays(),
        }


@dataclass(frozen=True)
class RunInfo:
    dir: str  # resolved
    label: str  # :func:`display` of it
    checkpoint_run: str | None = None  # pasr eval: the training run directory of the checkpoint
    checkpoint_step: int | None = None  # pasr eval: its training step
    reward: RewardMode | None = None  # training run: the refine reward it paid

    def checkpoint_words(self) -> str:
        """``checkpoint step 6 of runs/demo``, or empty when the summary names no training step."""
        if self.checkpoint_step is None:
            return ""
        of = f" of {display(self.checkpoint_run)}" if self.checkpoint_run else ""
        return f"checkpoint step {self.checkpoint_step}{of}"


def _checkpoint(folder: Path) -> tuple[str | None, int | None]:
    try:
        summary = json.loads((folder / SUMMARY_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None, None
    ckpt = summary.get("checkpoint") if isinstance(summary, dict) else None
    if not isinstance(ckpt, dict):
        return None, None
    step, run = ckpt.get("step"), ckpt.get("run")
    step = step if isinstance(step, int) and not isinstance(step, bool) else None
    run = str(Path(run).resolve()) if isinstance(run, str) and run else None
    return run, step


def _config(folder: Path) -> Any:
    """The run's ``config.yaml`` as YAML reads it; None when missing or unreadable."""
    import yaml

    try:
        return yaml.safe_load((folder / CONFIG_NAME).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None


def warmup_of(folder: str | Path) -> dict[str, Any] | None:
    """A training run's warm-up (``steps``, ``lr_schedule``) from its ``config.yaml``; None when not recorded."""
    try:
        w = _config(Path(folder))["warmup"]
        return {"steps": int(w["steps"]), "lr_schedule": str(w.get("lr_schedule", "constant"))}
    except (TypeError, KeyError, ValueError, AttributeError):
        return None


def _reward(folder: Path) -> RewardMode | None:
    try:
        pasr = _config(folder)["pasr"]
        compare, tie, empty = pasr["refine_compare"], pasr["tie_value"], pasr.get("empty_refine_value")
    except (TypeError, KeyError, AttributeError):
        return None
    if not isinstance(compare, str) or not isinstance(tie, (int, float)) or isinstance(tie, bool):
        return None
    if empty is not None and (not isinstance(empty, (int, float)) or isinstance(empty, bool)):
        empty = None
    return RewardMode(compare, float(tie), None if empty is None else float(empty))


def read_run(folder: str | Path) -> RunInfo:
    """The :class:`RunInfo` of a run directory (a few small files; read once per ``pasr stats``)."""
    folder = Path(folder).resolve()
    run, step = _checkpoint(folder)
    return RunInfo(str(folder), display(folder), run, step, _reward(folder))
