"""What ``--report RUN_DIR`` of the GPU benchmarks (``gpu_check``, ``gpu_scale``) reads, and when it
refuses: one line, exit 2, nothing written.

Why refuse: ``--report`` writes its result to ``--out``, by default the committed
``benchmarks/results/gpu_check.json`` / ``gpu_scale.json`` that ``pasr check`` reads for its step
estimate. A directory that does not exist, or holds no run, used to rebuild an all-null result
over it and exit 0; a JSON file cut off mid-write (a machine's time limit) was a traceback.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable
from pathlib import Path

SETTINGS = "settings.json"  # the first file every run writes: how it was asked to run


class ReportError(Exception):
    """Why a run directory gives no result: one line, naming the directory or file."""


def read_json(path: Path) -> dict:
    """The JSON object in ``path``; ``{}`` when there is no such file. A file cut off mid-write,
    or holding something else than an object, is a :class:`ReportError` naming it."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as exc:  # json.JSONDecodeError is a ValueError
        raise ReportError(f"{path}: not readable JSON ({exc}); cut off mid-write?") from None
    if not isinstance(data, dict):
        raise ReportError(f"{path}: holds a JSON {type(data).__name__}, not the object a run writes")
    return data


def report_dir(arg: str, name: str) -> Path:
    """The run directory ``--report ARG`` names, when it holds a run of ``name``: its settings and
    something the run did (its state, a log)."""
    root = Path(arg).expanduser()
    if not root.is_dir():
        what = "not a directory" if root.exists() else "no such directory"
        raise ReportError(f"--report {arg}: {what}; give the run directory a {name} run wrote (its --run-dir)")
    if not (root / SETTINGS).is_file():
        raise ReportError(
            f"--report {arg}: no {name} run found there (no {SETTINGS}, the first file a run writes); nothing to report"
        )
    read_json(root / SETTINGS)  # cut off mid-write: named before anything else is said of the run
    if not (root / "state.json").is_file() and not any(root.glob("*.log")):
        raise ReportError(
            f"--report {arg}: the run there wrote its {SETTINGS} and nothing else (no state.json, no log); "
            "nothing to report"
        )
    return root


def rebuild(arg: str, name: str, build: Callable[[Path], dict], show: Callable[[dict], None]) -> dict:
    """``build`` the result of the run in ``--report ARG`` and ``show`` it; a :class:`ReportError`
    in one line for what is not a run's directory, or files that do not hold what a run writes
    (an exception of reading them, rather than a traceback)."""
    root = report_dir(arg, name)
    shown = io.StringIO()  # printed once the whole report is made: no half table before an error
    try:
        result = build(root)
        with contextlib.redirect_stdout(shown):
            show(result)
    except ReportError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError, IndexError, OSError) as exc:
        text = str(exc).strip().splitlines()
        raise ReportError(
            f"--report {arg}: its files do not hold what a {name} run writes "
            f"({type(exc).__name__}: {text[0] if text else ''}); nothing written"
        ) from None
    print(shown.getvalue(), end="")
    return result
