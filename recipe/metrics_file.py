"""Where a training run's metrics go, the same for both engines: ``metrics.jsonl`` and
``tensorboard/`` in the run's folder (the local engine's run directory, the verl engine's
``trainer.default_local_dir``).

``metrics.jsonl`` holds one JSON object a line, whatever ``trainer.logger`` names; that key
(verl's, in both engines) lists verl ``Tracking`` backends, checked before a run starts
(:func:`logger_problems`).

Each line is ``{"step": N, "phase": ..., KEY: VALUE, ...}``: the local engine writes one per step
(``phase`` warmup | pasr | rrr) and per evaluation (``eval``, with its ``tag``) in its run
directory; the verl engine one per logged step (``phase`` pasr | rrr; ``eval`` for the
validation verl logs before the first step) in ``trainer.default_local_dir``, beside its
checkpoints and ``rollouts/``. ``pasr stats`` reads either (:mod:`eval.stats.metrics_log`), so a
run's curves need no tracking backend. A resume cuts the file back to the checkpoint it starts
from (:func:`truncate_metrics`), so the steps after it are written once, not twice.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from data.atomic_write import appending, replace_text

METRICS_FILE = "metrics.jsonl"

# verl's Tracking backends (verl.utils.tracking.Tracking.supported_backend; a test checks the two
# agree) and the package each imports when the run starts (None: none). Importing verl itself
# takes seconds, too slow for a config check.
TRACKING_BACKENDS = {
    "console": None,
    "file": None,
    "tensorboard": "tensorboard",
    "wandb": "wandb",
    "mlflow": "mlflow",
    "swanlab": "swanlab",
    "vemlp_wandb": "volcengine_ml_platform",
    "clearml": "clearml",
    "trackio": "trackio",
    "rl_insight": "rl_insight",
}


def logger_problems(loggers: list[str] | str, find_module: Callable[[str], object] | None = None) -> list[str]:
    """Why ``trainer.logger`` would fail when the run creates its loggers (verl's ``Tracking``
    asserts on an unknown name; a backend whose package is missing raises ImportError), in
    either engine; ``find_module`` (default ``importlib.util.find_spec``) says whether a package
    is installed. A single name is a list of one, as ``Tracking`` takes it."""
    import importlib.util

    find_module = find_module or importlib.util.find_spec
    problems = []
    for name in (b for b in ([loggers] if isinstance(loggers, str) else loggers) if b):
        if name not in TRACKING_BACKENDS:
            problems.append(f"trainer.logger: unknown logger {name!r} (use {', '.join(TRACKING_BACKENDS)})")
        elif (package := TRACKING_BACKENDS[name]) and find_module(package) is None:
            problems.append(f"trainer.logger: {name} needs the Python package {package}, which is not installed")
    return problems


WANDB_HOST = "api.wandb.ai"  # wandb's default server; WANDB_BASE_URL names another
WANDB_OFF_MODES = ("offline", "disabled", "dryrun")  # WANDB_MODE values that need no login


def tracker_login_problems(loggers: list[str] | str, environ: Mapping[str, str] | None = None) -> list[str]:
    """Why a ``trainer.logger`` backend would stop the run for want of a login, found before
    anything is made (the local engine's ``Tracking`` meets it after the run folder is made and
    the model loaded). Only wandb is asked, as wandb itself looks (no network): ``WANDB_API_KEY``
    or ``WANDB_IDENTITY_TOKEN_FILE``, a ``.netrc`` entry for its host (what ``wandb login``
    writes; ``$NETRC`` or ``~/.netrc``), or a mode that needs none (``WANDB_MODE=offline``)."""
    import netrc
    from urllib.parse import urlparse

    environ = os.environ if environ is None else environ
    names = [loggers] if isinstance(loggers, str) else list(loggers)
    if "wandb" not in names:
        return []
    if environ.get("WANDB_MODE", "").lower() in WANDB_OFF_MODES or environ.get("WANDB_DISABLED", "").lower() in (
        "1",
        "true",
    ):
        return []
    if environ.get("WANDB_API_KEY") or environ.get("WANDB_IDENTITY_TOKEN_FILE"):
        return []
    host = urlparse(environ.get("WANDB_BASE_URL", "")).hostname or WANDB_HOST
    home = Path(environ.get("HOME") or Path.home())
    path = Path(environ["NETRC"]).expanduser() if environ.get("NETRC") else home / ".netrc"
    try:
        if path.is_file() and netrc.netrc(str(path)).authenticators(host):
            return []
    except (netrc.NetrcParseError, OSError):
        pass  # a .netrc wandb could not read either
    return [
        f"trainer.logger has wandb but this machine has no Weights & Biases login (no WANDB_API_KEY, no {host} "
        f"entry in {path}): set WANDB_API_KEY, run `wandb login`, set WANDB_MODE=offline, or drop wandb from "
        "trainer.logger"
    ]


def _plain(value: Any) -> Any:
    """A value ``json`` cannot write as it is: numpy and torch scalars (verl's metrics are
    numpy floats) as Python numbers, arrays as lists, anything else as its text."""
    tolist = getattr(value, "tolist", None)
    return tolist() if callable(tolist) else str(value)


def append_metrics(run_dir: str | Path, step: int, phase: str, metrics: Mapping[str, Any]) -> None:
    """Append one line for ``step`` to ``run_dir/metrics.jsonl`` (the folder is made if needed);
    a whole line or none (:func:`data.atomic_write.appending`)."""
    path = Path(run_dir) / METRICS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"step": int(step), "phase": phase, **metrics}, default=_plain)
    with appending(path) as fh:
        fh.write(line + "\n")


def metric_lines(run_dir: str | Path) -> list[dict]:
    """The parsable lines of ``run_dir/metrics.jsonl``. A line cut off by a kill mid-write (or
    any other line that is not a JSON object with an integer step) is skipped with a warning,
    not a crash."""
    path = Path(run_dir) / METRICS_FILE
    if not path.is_file():
        return []
    lines = []
    for n, raw in enumerate(path.read_bytes().splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
            if not isinstance(line, dict) or not isinstance(line.get("step", 0), int):
                raise ValueError("not a metrics line")
        except ValueError:  # JSONDecodeError and UnicodeDecodeError included
            print(f"warning: {path}:{n}: dropping a corrupt line (cut off by a kill?)", file=sys.stderr)
            continue
        lines.append(line)
    return lines


def truncate_metrics(run_dir: str | Path, step: int) -> None:
    """Keep the lines of steps up to ``step`` (the checkpoint a resume starts from); ``step`` 0
    (no checkpoint) removes the file. The old file or the new one, never half."""
    path = Path(run_dir) / METRICS_FILE
    if step == 0:
        path.unlink(missing_ok=True)
    elif path.is_file():
        kept = [line for line in metric_lines(run_dir) if line.get("step", 0) <= step]
        replace_text(path, "".join(json.dumps(line) + "\n" for line in kept))


def use_run_tensorboard_dir(run_dir: str | Path) -> str:
    """The folder verl's tensorboard backend writes to: ``TENSORBOARD_DIR`` when set, else
    ``run_dir/tensorboard``, set in this process's environment, where the backend reads it
    (verl's own default is ``tensorboard_log/PROJECT/EXPERIMENT`` under the working directory,
    which in a Ray job is a temporary copy of the repository)."""
    return os.environ.setdefault("TENSORBOARD_DIR", str(Path(run_dir) / "tensorboard"))
