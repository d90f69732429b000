"""``pasr eval compare DIR...``: eval runs side by side, and accuracy against output tokens.

Reads each run directory's ``summary.json``; prints one table with a row per (model, method)
and, per dataset, accuracy and mean output tokens; writes a scatter plot with one panel per
dataset (x: mean output tokens, y: accuracy, a point per run). The paper's claim is a point
up and to the left of its baselines.

When a reflect-retry run is among them, each dataset also gets its first-attempt accuracy and
the share of samples it retried (``-`` for the other methods), so a Reflect, Retry, Reward
checkpoint's gain from the retry stands beside its first answer. Without one the table is as
it always was.

The method column names how a run chose its answer where it had a choice
(:func:`eval.summary.method_label`: ``self-refine (select best)``, ``best-of-n (8 candidates,
select majority)``), so runs of one method with different ``--select`` are told apart.

A run is named by the checkpoint it evaluated (:func:`model_label`: the training run's folder
and step, ``demo step 12``, never the ``latest`` the command was given) and its method; two rows
that would read alike get their eval folder's name too, so every row has its own label and its
own legend entry. Each dataset shows its question count; when runs evaluated different
questions on a dataset (another file, ``--limit``, edited rows: the summaries' ``question_set``
digests differ) each count gets a letter per question set (``40 [B]``) and only rows of one
letter compare.
A row that is the same evaluation as an earlier one (same settings, model weights and
questions) is marked; one directory given twice is refused, and so is a summary.json that is
not one ``pasr eval`` wrote (one line naming the file).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from eval.best_of_n import METHOD as BEST_OF_N
from eval.reflect_retry import METHOD as REFLECT_RETRY
from eval.stats import plot_style as ps
from eval.summary import SUMMARY_JSON, method_label


class CompareError(ValueError):
    """A run directory cannot be compared (one line)."""


_COUNTS = ("n_questions", "n_samples", "expected_samples", "n_scored", "errors", "generation_errors", "judge_errors")
_RATES = (
    "accuracy",
    "format_rate",
    "refine_rate",
    "truncated_rate",
    "first_attempt_accuracy",
    "retry_rate",
    "recovered_rate",
)
_AMOUNTS = ("mean_tokens", "mean_refines")


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def summary_problem(summary: Any) -> str | None:
    """What makes ``summary`` no summary ``pasr eval`` wrote (a hand edit, a truncated file), in
    a few words, or None: the fields this command reads, with their types and ranges."""
    if not isinstance(summary, dict):
        return f"a JSON {type(summary).__name__}, not an object"
    datasets = summary.get("datasets")
    if not isinstance(datasets, dict):
        return "no 'datasets' object"
    for key in ("model", "method", "select", "fingerprint"):
        if summary.get(key) is not None and not isinstance(summary[key], str):
            return f"{key!r} is not text"
    ckpt = summary.get("checkpoint")
    if ckpt is not None and not (
        isinstance(ckpt, dict)
        and (ckpt.get("step") is None or isinstance(ckpt["step"], int))
        and all(isinstance(ckpt.get(k), (str, type(None))) for k in ("run", "path"))
    ):
        return "'checkpoint' is not a step with its path"
    if summary.get("settings") is not None and not isinstance(summary["settings"], dict):
        return "'settings' is not an object"
    for ds, v in datasets.items():
        if not isinstance(v, dict):
            return f"dataset {ds!r} is not an object"
        for key in _COUNTS:
            if key in v and not (isinstance(v[key], int) and not isinstance(v[key], bool) and v[key] >= 0):
                return f"{ds}.{key} is not a count: {v[key]!r}"
        for key in _RATES:
            if v.get(key) is not None and not (_number(v[key]) and 0 <= v[key] <= 1):
                return f"{ds}.{key} is not a rate in [0, 1]: {v[key]!r}"
        for key in _AMOUNTS:
            if v.get(key) is not None and not (_number(v[key]) and v[key] >= 0):
                return f"{ds}.{key} is not a number >= 0: {v[key]!r}"
        if v.get("question_set") is not None and not isinstance(v["question_set"], str):
            return f"{ds}.question_set is not text"
    return None


def load_runs(dirs: list[str]) -> list[dict[str, Any]]:
    """Each directory's summary, checked (:func:`summary_problem`); a directory given twice is
    refused (its row would be compared with itself)."""
    runs = []
    seen: dict[Path, str] = {}
    for d in dirs:
        path = Path(d) / SUMMARY_JSON if Path(d).is_dir() else Path(d)
        if not path.is_file():
            raise CompareError(f"{d}: no {SUMMARY_JSON} (is it a `pasr eval` run directory?)")
        if (same := seen.get(path.resolve())) is not None:
            raise CompareError(f"{d} and {same} are the same run ({path.resolve()}); give each run once")
        seen[path.resolve()] = d
        try:
            summary = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise CompareError(f"{path}: cannot read it ({exc.strerror or exc})") from None
        except ValueError as exc:  # UnicodeDecodeError included
            raise CompareError(f"{path}: not a pasr eval summary (not JSON: {str(exc).splitlines()[0]})") from None
        if (problem := summary_problem(summary)) is not None:
            raise CompareError(
                f"{path}: not a pasr eval summary ({problem}); run `pasr eval` into {path.parent} again to rewrite it"
            )
        summary["_dir"] = str(d)
        runs.append(summary)
    if not runs:
        raise CompareError("no run directories given")
    return runs


def model_label(run: dict[str, Any]) -> str:
    """The model a run evaluated, by the training run's folder and step (``demo step 12``) where
    it was a training checkpoint, else the model's last path part. A summary written before
    summaries named their checkpoint: ``RUN/checkpoints/latest`` reads ``RUN latest``."""
    ckpt = run.get("checkpoint") or {}
    if ckpt.get("step") is not None:
        where = ckpt.get("run") or ckpt.get("path") or str(run.get("model", "?"))
        return f"{Path(where).name} step {ckpt['step']}"
    parts = [p for p in str(run.get("model", "?")).split("/") if p]
    if len(parts) >= 3 and parts[-2] == "checkpoints":
        return f"{parts[-3]} {parts[-1]}"
    return parts[-1] if parts else "?"


def run_names(runs: list[dict[str, Any]]) -> list[str]:
    """Each run's :func:`model_label`, with its eval folder's name (then that folder's path as
    given, then its row number) added where two rows of one method would otherwise read alike."""
    names = [model_label(run) for run in runs]
    methods = [method_label(run) for run in runs]
    dirs = [str(run.get("_dir", "")) for run in runs]
    for extra in (lambda i: Path(dirs[i]).name, lambda i: dirs[i], lambda i: f"row {i + 1}"):
        pairs = list(zip(names, methods))
        repeated = {pair for pair in pairs if pairs.count(pair) > 1}
        if not repeated:
            break
        names = [f"{n} ({extra(i)})" if (n, methods[i]) in repeated else n for i, n in enumerate(names)]
    return names


def run_labels(runs: list[dict[str, Any]]) -> list[str]:
    """One label per run, no two alike: ``name / method`` (:func:`run_names`)."""
    return [f"{name} / {method_label(run)}" for name, run in zip(run_names(runs), runs)]


def run_label(run: dict[str, Any]) -> str:
    """One run's label on its own (:func:`run_labels` tells apart runs that share it)."""
    return f"{model_label(run)} / {method_label(run)}"


def dataset_order(runs: list[dict[str, Any]]) -> list[str]:
    order: list[str] = []
    for run in runs:
        for ds in run["datasets"]:
            if ds not in order:
                order.append(ds)
    return order


def _cell(v: dict[str, Any] | None) -> tuple[str, str]:
    if not v or not v.get("n_samples"):
        return "-", "-"
    acc = "n/a" if v.get("accuracy") is None else f"{100 * v['accuracy']:.1f}"
    tok = "n/a" if v.get("mean_tokens") is None else f"{v['mean_tokens']:.0f}"
    if v.get("n_samples", 0) < v.get("expected_samples", 0) or v.get("errors"):
        acc += "*"
    return acc, tok


def _retry_cells(run: dict[str, Any], v: dict[str, Any] | None) -> tuple[str, str]:
    """First-attempt accuracy and retry rate (%) of a reflect-retry run's dataset; ``-`` otherwise."""
    if run.get("method") != REFLECT_RETRY or not v or not v.get("n_samples"):
        return "-", "-"
    return tuple("n/a" if v.get(k) is None else f"{100 * v[k]:.1f}" for k in ("first_attempt_accuracy", "retry_rate"))


def question_sets(runs: list[dict[str, Any]], ds: str) -> list[str | None]:
    """Per run, a letter naming its set of questions on ``ds`` (``A``, ``B``, ... in order of
    first appearance), or None for every run when they all evaluated the same set (or a run
    lacks ``ds``). Sets are told apart by the summaries' ``question_set`` digest; a summary
    written before it existed, by its question count."""
    keys = []
    for run in runs:
        v = run["datasets"].get(ds)
        keys.append(None if not v else (v.get("question_set") or f"n={v.get('n_questions')}"))
    distinct = list(dict.fromkeys(k for k in keys if k is not None))
    if len(distinct) < 2:
        return [None] * len(runs)
    return [None if k is None else "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[distinct.index(k) % 26] for k in keys]


def same_evaluations(runs: list[dict[str, Any]]) -> list[int | None]:
    """Per run, the earlier row (0-based) it is the same evaluation as (same settings, model
    identity included, and the same questions on every dataset), else None. Only summaries whose
    settings name the model by content can be matched (older ones held the ``--model`` text,
    which ``latest`` shares across checkpoints)."""

    def key(run):
        settings = run.get("settings") or {}
        if not isinstance(settings.get("model"), dict) or not run.get("fingerprint"):
            return None
        return run["fingerprint"], tuple(sorted((ds, v.get("question_set")) for ds, v in run["datasets"].items()))

    keys = [key(run) for run in runs]
    return [next((j for j in range(i) if k is not None and keys[j] == k), None) for i, k in enumerate(keys)]


def comparison_table(runs: list[dict[str, Any]]) -> str:
    """A Markdown table: one row per run, questions, accuracy (%) and mean output tokens per
    dataset; question counts lettered where runs evaluated different questions, and rows that
    repeat an earlier row's evaluation marked."""
    datasets = dataset_order(runs)
    retry = any(run.get("method") == REFLECT_RETRY for run in runs)
    whats = ("questions", "acc %", "tokens") + (("1st acc %", "retried %") if retry else ())
    head = ["model", "method"] + [f"{ds} {what}" for ds in datasets for what in whats]
    names = run_names(runs)
    letters = {ds: question_sets(runs, ds) for ds in datasets}
    repeats = same_evaluations(runs)
    rows = []
    for i, run in enumerate(runs):
        cells = [names[i] + (f" (= row {repeats[i] + 1})" if repeats[i] is not None else ""), method_label(run)]
        for ds in datasets:
            v = run["datasets"].get(ds)
            n = "-" if not v or v.get("n_questions") is None else str(v["n_questions"])
            if letters[ds][i] is not None:
                n += f" [{letters[ds][i]}]"
            cells += [n, *_cell(v)] + (list(_retry_cells(run, v)) if retry else [])
        rows.append(cells)
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]

    def line(cells: list[str]) -> str:
        return (
            "| " + " | ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))) + " |"
        )

    sep = "| " + " | ".join(("-" * w if i < 2 else "-" * (w - 1) + ":") for i, w in enumerate(widths)) + " |"
    out = [line(head), sep, *(line(r) for r in rows)]
    notes = []
    if any(c.endswith("*") for r in rows for c in r[2:]):
        notes.append("* unfinished run, or samples with generation/judge errors (see that run's summary.md)")
    split = [ds for ds in datasets if any(letters[ds])]
    if split:
        notes.append(
            f"[A], [B], ...: the runs evaluated different questions on {', '.join(split)} (another file, "
            "--limit or edited rows); compare accuracy only between rows of one letter"
        )
    if any(r is not None for r in repeats):
        notes.append("(= row N): the same evaluation as row N (same model weights, settings and questions)")
    if notes:
        out += ["", *notes]
    return "\n".join(out)


def _token_axis(ax, xs: list[float]) -> None:
    """Room around the points on the tokens axis, never below 0 tokens, and never a range of
    nothing (one run, or runs of the same length)."""
    lo, hi = min(xs), max(xs)
    pad = 0.25 * (hi - lo) if hi - lo >= 1 else max(1.0, 0.25 * hi)
    ax.set_xlim(max(0.0, lo - pad), hi + pad)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def scatter_figure(runs: list[dict[str, Any]]):
    """The figure of :func:`scatter`, laid out, not saved. Accuracy is on a fixed 0-100 % axis;
    a dataset no run has both numbers for gets a "no data" panel."""
    plt = _pyplot()

    datasets = dataset_order(runs)
    fig, axes = plt.subplots(1, max(1, len(datasets)), figsize=(5 * max(1, len(datasets)), 4.2), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    markers = {"plain": "o", "pasr": "*", "self-refine": "s", REFLECT_RETRY: "^", BEST_OF_N: "P"}
    labels_seen = set()
    run_names = run_labels(runs)
    for ax in axes[0]:
        ax.set_xlabel("mean output tokens per sample")
        ax.set_ylabel("accuracy (%)")
        ps.rate_axis(ax)
    if not datasets:
        ps.title(axes[0][0], "no dataset")
        ps.no_data(axes[0][0], "no dataset in these runs' summary.json", rate=True)
    for ax, ds in zip(axes[0], datasets):
        ps.title(ax, ds)
        xs = []
        for i, run in enumerate(runs):
            v = run["datasets"].get(ds)
            if not v or v.get("accuracy") is None or v.get("mean_tokens") is None:
                continue
            label = run_names[i]
            ax.scatter(
                v["mean_tokens"],
                100 * v["accuracy"],
                s=90,
                color=colors[i % len(colors)],
                marker=markers.get(run.get("method"), "D"),
                label=None if label in labels_seen else label,
                edgecolors="black",
                linewidths=0.5,
                zorder=3,
                clip_on=False,
            )
            labels_seen.add(label)
            ax.annotate(
                label,
                (v["mean_tokens"], 100 * v["accuracy"]),
                textcoords="offset points",
                xytext=(6, 4 if v["accuracy"] < 0.9 else -10),
                fontsize=7,
            )  # below a point at the top
            xs.append(v["mean_tokens"])
        if xs:
            _token_axis(ax, xs)
            ax.grid(True, alpha=0.3)
        else:
            ps.no_data(ax, f"no run has an accuracy and a mean token count for {ds}", rate=True)
    ps.suptitle(fig, "pasr eval: accuracy vs output tokens (up and left is better)")
    handles, labels = [], []
    for ax in axes[0]:
        h, lab = ax.get_legend_handles_labels()
        for hh, ll in zip(h, lab):
            if ll not in labels:
                handles.append(hh)
                labels.append(ll)
    bottom = 0.0
    if handles:
        # as many columns (at most 4) as fit the figure's width (ten runs in four columns ran off
        # both edges of a one-panel figure), and the figure made taller by the legend's height,
        # so a long legend does not squeeze the panels
        renderer = fig.canvas.get_renderer()
        for ncol in range(min(4, len(labels)), 0, -1):
            legend = fig.legend(handles, labels, loc="lower center", ncol=ncol, fontsize=8, frameon=False)
            if ncol == 1 or legend.get_window_extent(renderer).width <= fig.bbox.width:
                break
            legend.remove()
        width, height = fig.get_size_inches()
        legend_in = legend.get_window_extent(renderer).height / fig.dpi
        fig.set_size_inches(width, height + legend_in)
        bottom = legend_in / (height + legend_in) + 0.01
    fig.tight_layout(rect=(0, bottom, 1, 1))
    return fig


def scatter(runs: list[dict[str, Any]], out_png: str | Path) -> Path:
    """Accuracy vs mean output tokens, one panel per dataset, one point per run, one legend entry
    per run (:func:`run_labels`)."""
    fig = scatter_figure(runs)
    out = Path(out_png)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    _pyplot().close(fig)
    return out
