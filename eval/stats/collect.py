"""Streaming collection for ``pasr stats``: find the dumps, read them line by line, keep counters.

Nothing here holds the responses of a dump: every group keeps counters, exact-integer
histograms (bounded by the number of distinct lengths), a bounded counter of common refine
texts and small example reservoirs. Eval records additionally keep one correctness flag per
(dataset, query id, sample index) so paired runs can be compared; eval sets are small.

Per record the work is one JSON parse (orjson when importable: verl brings it in through
tensordict; else the standard json), a type check of the fields used, a handful of counter
updates and, only for responses that contain ``<refine>``, one
:func:`rewards.format.check_format` plus :func:`rewards.refine_quality.assess_refines`. No
``RolloutRecord`` is built per line (the dict is read directly; the required fields and defaults
are taken from the dataclass). Format validity and reason come from the record's own fields (what
the reward saw); refine spans always come from the text, and a record whose ``n_refine`` field
disagrees with the text is counted (``n_refine_field_mismatch``).
"""

from __future__ import annotations

import json
import math
import random
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from data.records import PLAIN, REFINE, RecordFormatError, RolloutRecord
from rewards.format import check_format
from rewards.refine_quality import CORRECT_AT, assess_refines, normalize_refine_text

METRICS_NAME = "metrics.jsonl"
SUMMARY_NAME = "summary.json"
POSITION_BINS = 10  # [0, 0.1), ..., [0.9, 1.0]
LENGTH_EDGES = (0, 1, 5, 10, 20, 50, 100, 200, 500, 1000)  # last bin is [1000, inf)
CELLS = ("refine_correct", "refine_wrong", "no_refine_correct", "no_refine_wrong")
TRANSITION_CELLS = ("wrong->right", "right->right", "wrong->wrong", "right->wrong")
MAX_CORRUPT_LISTED = 50
EXAMPLE_MAX_CHARS = 4000
TOP_TEXT_CAP = 20000  # distinct normalised refine texts kept per group before pruning


class StatsInputError(Exception):
    """A problem with the inputs that stops the run (missing path, nothing to read)."""


KIND_ORDER = {"train": 0, "val": 1, "eval": 2, "other": 3}


def kind_of(step: int | None, dataset: str | None) -> str:
    """``train``: training rollouts (step, no dataset); ``val``: evaluation during training
    (step and dataset, e.g. the local engine's ``eval/<tag>.jsonl``, verl's ``val_step_*``);
    ``eval``: ``pasr eval`` (dataset, no step); ``other``: neither."""
    if step is not None:
        return "val" if dataset else "train"
    return "eval" if dataset else "other"


def method_of(variant: str) -> str:
    """Eval method of a record variant when the record does not say: ``refine`` -> ``pasr``,
    ``self_refine:<pass>`` -> ``self-refine``, others keep their name."""
    if variant == REFINE:
        return "pasr"
    if variant.startswith("self_refine"):
        return "self-refine"
    return variant


def eval_method(rec: dict) -> str:
    """The method of a ``pasr eval`` record: ``extra.method`` as ``pasr eval`` writes it, else
    derived from the variant (a Self-Refine run's records carry the variant of the pass that gave
    the final answer, so the variant alone would split one run)."""
    extra = rec.get("extra")
    m = extra.get("method") if isinstance(extra, dict) else None
    if not isinstance(m, str):
        m = rec.get("method")
    return m if isinstance(m, str) and m else method_of(rec["variant"])


# --------------------------------------------------------------------------- discovery


@dataclass
class Inputs:
    records: list[Path] = field(default_factory=list)
    metrics: list[Path] = field(default_factory=list)
    summaries: list[Path] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, why)

    @property
    def record_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.records)


def _first_object(path: Path) -> tuple[str, Any]:
    """('ok', obj) for the first non-blank line, ('bad', None) when it does not parse,
    ('empty', None) for a file without content."""
    with path.open("rb") as fh:
        for raw in fh:
            if raw.strip():
                try:
                    return "ok", json.loads(raw)
                except ValueError:
                    return "bad", None
    return "empty", None


def _classify(path: Path, explicit: bool) -> str:
    """records | metrics | skip:<why>"""
    if path.name == METRICS_NAME:
        return "metrics"
    state, obj = _first_object(path)
    if state == "ok" and isinstance(obj, dict):
        if "response" in obj and "variant" in obj:
            return "records"
        if "step" in obj and "response" not in obj:
            return "metrics"
    if explicit or state == "bad":
        return "records"  # named on the command line, or corrupt from line 1: read and report
    if state == "empty":
        return "records"  # an empty dump is still a dump (0 records)
    return "skip:not a rollout dump (first object has no 'response'/'variant')"


def discover(paths: Iterable[str | Path]) -> Inputs:
    """Record files, metrics files and eval summaries under ``paths`` (files or directories)."""
    found = Inputs()
    seen: set[Path] = set()

    def add(p: Path, explicit: bool) -> None:
        rp = p.resolve()
        if rp in seen:
            return
        seen.add(rp)
        kind = _classify(p, explicit)
        if kind == "records":
            found.records.append(p)
        elif kind == "metrics":
            found.metrics.append(p)
        else:
            found.skipped.append((str(p), kind.split(":", 1)[1]))

    for raw in paths:
        p = Path(raw)
        if p.is_file():
            add(p, explicit=True)
        elif p.is_dir():
            for f in sorted(p.rglob("*.jsonl")):
                if f.is_file():
                    add(f, explicit=False)
            found.summaries.extend(sorted(s for s in p.rglob(SUMMARY_NAME) if s.is_file()))
        else:
            raise StatsInputError(f"no such file or directory: {p}")
    return found


_DEFAULT_ENGINE = next(f.default for f in fields(RolloutRecord) if f.name == "engine")


# --------------------------------------------------------------------------- accumulators


class BoundedCounter:
    """A counter of at most ``cap`` keys: when it grows past ``cap`` the rarer half is dropped
    (counts of texts seen fewer times than that are then approximate; flagged)."""

    def __init__(self, cap: int = TOP_TEXT_CAP):
        self.cap = cap
        self.counts: Counter[str] = Counter()
        self.pruned = False

    def add(self, key: str) -> None:
        self.counts[key] += 1
        if len(self.counts) > self.cap:
            self.counts = Counter(dict(self.counts.most_common(self.cap // 2)))
            self.pruned = True

    def top(self, k: int) -> list[dict[str, Any]]:
        return [{"text": t, "count": c} for t, c in self.counts.most_common(k)]


class Reservoir:
    """Uniform sample of at most ``size`` items from a stream (reservoir sampling). Callers ask
    :meth:`slot` first and build the item only when it is kept."""

    def __init__(self, size: int, rng: random.Random):
        self.size, self.rng, self.seen, self.items = size, rng, 0, []

    def slot(self) -> int:
        """Index to store the next item at, or -1 when it is not kept."""
        self.seen += 1
        if len(self.items) < self.size:
            self.items.append(None)
            return len(self.items) - 1
        if self.size <= 0:
            return -1
        j = self.rng.randrange(self.seen)
        return j if j < self.size else -1


def _rate(num: float, den: float) -> float | None:
    return num / den if den else None


def _dist(counts: Counter[int], edges: tuple[int, ...] = LENGTH_EDGES) -> dict[str, Any]:
    """Summary of an exact integer histogram: n, mean, median, p90, max and binned counts."""
    n = sum(counts.values())
    out: dict[str, Any] = {"n": n, "mean": None, "median": None, "p90": None, "max": None}
    binned = [0] * len(edges)
    for v, c in counts.items():
        i = len(edges) - 1
        while i > 0 and v < edges[i]:
            i -= 1
        binned[i] += c
    out["bin_edges"] = list(edges) + [None]  # bin i is [edges[i], edges[i+1]); last is open
    out["bin_counts"] = binned
    if n:
        out["mean"] = sum(v * c for v, c in counts.items()) / n
        out["max"] = max(counts)
        ordered = sorted(counts.items())

        def quantile(q: float) -> int:
            target = q * (n - 1)
            acc = 0
            for v, c in ordered:
                acc += c
                if acc - 1 >= target:
                    return v
            return ordered[-1][0]

        out["median"] = quantile(0.5)
        out["p90"] = quantile(0.9)
    return out


class GroupStats:
    """Every counter of one group: a training run's variant (``train``), an in-training
    evaluation's dataset+variant (``val``), a ``pasr eval`` run's dataset+method (``eval``)."""

    def __init__(self, kind: str, run_id: str, dataset: str | None, name: str, n_examples: int, rng: random.Random):
        # name: the method for eval groups, the variant otherwise
        self.kind, self.run_id, self.dataset, self.name = kind, run_id, dataset, name
        self.variants: Counter[str] = Counter()
        self.generation_errors = 0
        self.n = 0
        self.n_refining = 0
        self.n_spans = 0
        self.n_empty = 0
        self.n_fix = 0
        self.n_fix_known = 0
        self.refines_per_response: Counter[int] = Counter()
        self.position_bins = [0] * POSITION_BINS
        self.position_sum = 0.0
        self.span_len: Counter[int] = Counter()
        self.think_len: Counter[int] = Counter()
        self.answer_len: Counter[int] = Counter()
        self.tokens_sum = 0
        self.tokens_max = 0
        self.n_format_ok = 0
        self.format_reasons: Counter[str] = Counter()
        self.acc_sum = [0.0, 0.0]  # [without refine, with refine]
        self.acc_n = [0, 0]
        self.n_correct = [0, 0]
        self.judge_errors = 0
        self.outcomes: Counter[str] = Counter()
        self.refine_rewards: Counter[str] = Counter()
        self.engines: Counter[str] = Counter()
        self.finish_reasons: Counter[str] = Counter()
        self.n_refine_mismatch = 0
        self.top_texts = BoundedCounter()
        self.examples = {c: Reservoir(n_examples, rng) for c in CELLS}

    @property
    def key(self) -> str:
        if self.dataset is not None:
            return f"{self.kind}/{self.run_id}/{self.dataset}/{self.name}"
        return f"{self.kind}/{self.run_id}/{self.name}"

    @property
    def label(self) -> str:
        if self.dataset is not None:
            return f"{self.run_id} · {self.kind} {self.dataset} · {self.name}"
        return f"{self.run_id} · {self.kind} · {self.name}"

    def to_json(self, top_k: int) -> dict[str, Any]:
        pos_n = sum(self.position_bins)
        judged = self.acc_n[0] + self.acc_n[1]
        return {
            "kind": self.kind,
            "run_id": self.run_id,
            "dataset": self.dataset,
            "variant": None if self.kind == "eval" else self.name,
            "method": self.name if self.kind == "eval" else None,
            "variants": dict(self.variants.most_common()),
            "label": self.label,
            "engines": dict(self.engines),
            "n_responses": self.n,
            "n_refining": self.n_refining,
            "refine_rate": _rate(self.n_refining, self.n),
            "n_spans": self.n_spans,
            "n_empty_spans": self.n_empty,
            "empty_refine_rate": _rate(self.n_empty, self.n_spans),
            "n_fix": self.n_fix,
            "n_fix_applicable": self.n_fix_known,
            "refine_fix_rate": _rate(self.n_fix, self.n_fix_known),
            "refines_per_response": {str(k): v for k, v in sorted(self.refines_per_response.items())},
            "mean_refines_per_response": _rate(self.n_spans, self.n),
            "n_refine_field_mismatch": self.n_refine_mismatch,
            "position_hist": {
                "bin_edges": [round(i / POSITION_BINS, 4) for i in range(POSITION_BINS + 1)],
                "counts": list(self.position_bins),
                "n": pos_n,
                "mean": _rate(self.position_sum, pos_n),
            },
            "refine_length_tokens": _dist(self.span_len),
            "think_length_tokens": _dist(self.think_len),
            "answer_length_tokens": _dist(self.answer_len),
            "response_tokens": {"mean": _rate(self.tokens_sum, self.n), "max": self.tokens_max if self.n else None},
            "format": {
                "n_ok": self.n_format_ok,
                "pass_rate": _rate(self.n_format_ok, self.n),
                "failure_reasons": dict(self.format_reasons.most_common()),
            },
            "accuracy": {
                "mean": _rate(self.acc_sum[0] + self.acc_sum[1], judged),
                "n_judged": judged,
                "n_correct": self.n_correct[0] + self.n_correct[1],
                "with_refine": {"mean": _rate(self.acc_sum[1], self.acc_n[1]), "n": self.acc_n[1], "n_correct": self.n_correct[1]},
                "without_refine": {"mean": _rate(self.acc_sum[0], self.acc_n[0]), "n": self.acc_n[0], "n_correct": self.n_correct[0]},
            },
            "judge_errors": self.judge_errors,
            "generation_errors": self.generation_errors,
            "refine_outcomes": dict(self.outcomes.most_common()),
            "refine_reward_values": dict(sorted(self.refine_rewards.items())),
            "finish_reasons": dict(self.finish_reasons.most_common()),
            "top_refines": self.top_texts.top(top_k),
            "top_refines_approximate": self.top_texts.pruned,
            "examples": {c: list(r.items) for c, r in self.examples.items()},
            "example_cell_sizes": {c: r.seen for c, r in self.examples.items()},
        }


class StepTrend:
    __slots__ = (
        "n_ref", "n_refining", "n_format_ok", "ref_acc_sum", "ref_acc_n", "ref_tokens",
        "n_spans", "n_empty", "n_plain", "plain_acc_sum", "plain_acc_n", "plain_tokens", "judge_errors",
    )

    def __init__(self) -> None:
        for name in self.__slots__:
            setattr(self, name, 0)


# --------------------------------------------------------------------------- the collector


def _think_answer_fast(text: str) -> tuple[str, str] | None:
    """Think and answer content of a response known to be well-formed without refine tags."""
    a = text.find("<think>")
    b = text.find("</think>", a + 7)
    c = text.find("<answer>", b + 8)
    d = text.find("</answer>", c + 8)
    if min(a, b, c, d) < 0:
        return None
    return text[a + 7 : b], text[c + 8 : d]


def _short(text: str | None, limit: int = EXAMPLE_MAX_CHARS) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return text[:limit] + " …[truncated]"


class Collector:
    def __init__(self, *, n_examples: int = 3, correct_at: float = CORRECT_AT, seed: int = 0):
        self.n_examples = n_examples
        self.correct_at = correct_at
        self.rng = random.Random(seed)
        self.groups: dict[tuple, GroupStats] = {}
        self.trends: dict[str, dict[int, StepTrend]] = defaultdict(dict)
        self.val_trends: dict[tuple[str, str], dict[int, StepTrend]] = defaultdict(dict)
        # eval system (run_id, method) -> {(dataset, query_id, sample_index): correct | None}
        self.outcomes: dict[tuple[str, str], dict[tuple[str, str, int], bool | None]] = defaultdict(dict)
        self.duplicate_eval_keys = 0
        self.n_records = 0
        self.run_dirs: dict[str, set[str]] = defaultdict(set)  # directory -> run ids seen under it

    def group(self, kind: str, run_id: str, dataset: str | None, name: str) -> GroupStats:
        key = (kind, run_id, dataset, name)
        g = self.groups.get(key)
        if g is None:
            g = self.groups[key] = GroupStats(kind, run_id, dataset, name, self.n_examples, self.rng)
        return g

    def ordered_groups(self) -> list[GroupStats]:
        """Training groups first (refine before plain), then eval, then other; stable within."""
        names = {REFINE: 0, "pasr": 0, PLAIN: 1}
        return sorted(
            self.groups.values(),
            key=lambda g: (KIND_ORDER[g.kind], g.run_id, g.dataset or "", names.get(g.name, 2), g.name),
        )

    def add_record(self, rec: RolloutRecord) -> None:
        """Add one :class:`RolloutRecord` (tests, in-process callers)."""
        self.add(asdict(rec))

    def add(self, rec: dict) -> None:
        """Add one record dict (as read from a dump; see :func:`data.records.iter_record_dicts`)."""
        self.n_records += 1
        get = rec.get
        step = get("step")
        dataset = get("dataset")
        variant = rec["variant"]
        kind = kind_of(step, dataset)
        run_id = str(rec["run_id"])
        name = eval_method(rec) if kind == "eval" else variant
        gkey = (kind, run_id, dataset or None, name)
        g = self.groups.get(gkey)
        if g is None:
            g = self.group(*gkey)
        g.variants[variant] += 1
        text = rec["response"]
        acc = rec["acc"]
        correct = None if acc is None else acc >= self.correct_at

        fmt = check_format(text) if "<refine>" in text else None
        spans = fmt.refine_spans if fmt is not None else ()
        n = len(spans)

        g.n += 1
        g.engines[get("engine", _DEFAULT_ENGINE)] += 1
        g.refines_per_response[n] += 1
        if n != rec["n_refine"]:
            g.n_refine_mismatch += 1
        tokens = rec["response_tokens"]
        g.tokens_sum += tokens
        if tokens > g.tokens_max:
            g.tokens_max = tokens
        finish = get("finish_reason")
        if finish:
            g.finish_reasons[finish] += 1
        format_ok = rec["format_ok"]
        if format_ok:
            g.n_format_ok += 1
        else:
            reason = rec["format_reason"] or "unknown"
            g.format_reasons[reason] += 1
            if reason == "generation_error":
                g.generation_errors += 1

        # think / answer of a well-formed response (lengths, refine positions)
        think = None
        if fmt is not None:
            if fmt.ok:
                think = fmt.think
                g.think_len[len(think.split())] += 1
                g.answer_len[len(fmt.answer.split())] += 1
        elif format_ok:
            parts = _think_answer_fast(text)
            if parts is not None:
                g.think_len[len(parts[0].split())] += 1
                g.answer_len[len(parts[1].split())] += 1

        if acc is None:
            g.judge_errors += 1
        else:
            g.acc_sum[n > 0] += acc
            g.acc_n[n > 0] += 1
            g.n_correct[n > 0] += correct

        q = None
        if n:
            g.n_refining += 1
            q = assess_refines(text, rec["gold"], correct, fmt=fmt)
            g.n_spans += n
            g.n_empty += q.n_empty
            think_len = len(think) if think else 0
            for span in spans:
                g.span_len[len(span.text.split())] += 1
                if think_len:
                    pos = span.start / think_len
                    g.position_sum += pos
                    g.position_bins[min(int(pos * POSITION_BINS), POSITION_BINS - 1)] += 1
                g.top_texts.add(normalize_refine_text(span.text))
            if q.fix is not None:
                g.n_fix_known += 1
                g.n_fix += q.fix

        outcome = get("refine_outcome")
        if outcome is not None:
            g.outcomes[outcome] += 1
        reward = get("refine_reward")
        if reward is not None:
            g.refine_rewards[f"{float(reward):+g}"] += 1

        if correct is not None and self.n_examples > 0:
            cell = ("refine_" if n else "no_refine_") + ("correct" if correct else "wrong")
            res = g.examples[cell]
            j = res.slot()
            if j >= 0:
                res.items[j] = {
                    "query_id": rec["query_id"],
                    "sample_index": get("sample_index", 0),
                    "step": step,
                    "acc": acc,
                    "gold": rec["gold"],
                    "extracted_answer": rec["extracted_answer"],
                    "format_ok": format_ok,
                    "n_refine": n,
                    "empty": list(q.empty) if q else [],
                    "fix": q.fix if q else None,
                    "response": _short(text),
                }

        if kind == "val":
            if variant == REFINE:
                t = self.val_trends[(run_id, dataset)].get(step)
                if t is None:
                    t = self.val_trends[(run_id, dataset)][step] = StepTrend()
                t.n_ref += 1
                t.n_refining += n > 0
                t.n_format_ok += bool(format_ok)
                t.ref_tokens += tokens
                t.n_spans += n
                t.n_empty += q.n_empty if q else 0
                if acc is not None:
                    t.ref_acc_sum += acc
                    t.ref_acc_n += 1
                else:
                    t.judge_errors += 1
        elif kind == "train":
            t = self.trends[run_id].get(step)
            if t is None:
                t = self.trends[run_id][step] = StepTrend()
            if variant == REFINE:
                t.n_ref += 1
                t.n_refining += n > 0
                t.n_format_ok += bool(format_ok)
                t.ref_tokens += tokens
                t.n_spans += n
                t.n_empty += q.n_empty if q else 0
                if acc is not None:
                    t.ref_acc_sum += acc
                    t.ref_acc_n += 1
            elif variant == PLAIN:
                t.n_plain += 1
                t.plain_tokens += tokens
                if acc is not None:
                    t.plain_acc_sum += acc
                    t.plain_acc_n += 1
            if acc is None:
                t.judge_errors += 1
        elif kind == "eval":
            table = self.outcomes[(run_id, name)]
            k = (dataset, str(rec["query_id"]), get("sample_index", 0))
            if k in table:
                self.duplicate_eval_keys += 1
            table[k] = correct

    # ------------------------------------------------------------------ results

    def trends_json(self) -> dict[str, Any]:
        out = {}
        for run_id, steps in sorted(self.trends.items()):
            order = sorted(steps)
            ts = [steps[s] for s in order]
            out[run_id] = {
                "steps": order,
                "n_refine_rollouts": [t.n_ref for t in ts],
                "n_plain_rollouts": [t.n_plain for t in ts],
                "refine_rate": [_rate(t.n_refining, t.n_ref) for t in ts],
                "format_pass_rate": [_rate(t.n_format_ok, t.n_ref) for t in ts],
                "empty_refine_rate": [_rate(t.n_empty, t.n_spans) for t in ts],
                "acc_refine": [_rate(t.ref_acc_sum, t.ref_acc_n) for t in ts],
                "acc_plain": [_rate(t.plain_acc_sum, t.plain_acc_n) for t in ts],
                "response_tokens_refine": [_rate(t.ref_tokens, t.n_ref) for t in ts],
                "response_tokens_plain": [_rate(t.plain_tokens, t.n_plain) for t in ts],
                "judge_errors": [t.judge_errors for t in ts],
            }
        return out

    def val_trends_json(self) -> dict[str, dict[str, Any]]:
        """Per run, per in-training evaluation dataset: refine rollouts' numbers per step."""
        out: dict[str, dict[str, Any]] = {}
        for (run_id, dataset), steps in sorted(self.val_trends.items()):
            order = sorted(steps)
            ts = [steps[s] for s in order]
            out.setdefault(run_id, {})[dataset] = {
                "steps": order,
                "n": [t.n_ref for t in ts],
                "acc": [_rate(t.ref_acc_sum, t.ref_acc_n) for t in ts],
                "refine_rate": [_rate(t.n_refining, t.n_ref) for t in ts],
                "format_pass_rate": [_rate(t.n_format_ok, t.n_ref) for t in ts],
                "empty_refine_rate": [_rate(t.n_empty, t.n_spans) for t in ts],
                "response_tokens": [_rate(t.ref_tokens, t.n_ref) for t in ts],
                "judge_errors": [t.judge_errors for t in ts],
            }
        return out

    def systems(self) -> list[str]:
        return [f"{r}:{m}" for r, m in self.outcomes]

    def resolve_system(self, name: str) -> tuple[str, str]:
        """``run_id:method`` or a bare ``run_id`` that has exactly one eval method."""
        keys = list(self.outcomes)
        exact = [k for k in keys if f"{k[0]}:{k[1]}" == name]
        if exact:
            return exact[0]
        by_run = [k for k in keys if k[0] == name]
        if len(by_run) == 1:
            return by_run[0]
        listed = ", ".join(self.systems()) or "none"
        if by_run:
            raise StatsInputError(f"--pair {name!r} is ambiguous: give run_id:method (eval runs: {listed})")
        raise StatsInputError(f"--pair {name!r} names no eval run (eval runs: {listed})")

    def auto_pairs(self) -> list[tuple[tuple[str, str], tuple[str, str]]]:
        """Exactly two eval runs: compare them, the plain one (if any) as the 'before'."""
        keys = list(self.outcomes)
        if len(keys) != 2:
            return []
        a, b = keys
        if b[1] == PLAIN and a[1] != PLAIN:
            a, b = b, a
        return [(a, b)]

    def transition(self, a: tuple[str, str], b: tuple[str, str]) -> dict[str, Any]:
        ta, tb = self.outcomes[a], self.outcomes[b]
        cells: dict[str, list[str]] = {c: [] for c in TRANSITION_CELLS}
        by_dataset: dict[str, dict[str, int]] = {}
        unjudged: list[str] = []
        for k in sorted(set(ta) & set(tb), key=lambda k: (k[0], k[1], k[2])):
            qid = f"{k[0]}/{k[1]}#{k[2]}"
            ca, cb = ta[k], tb[k]
            if ca is None or cb is None:
                unjudged.append(qid)
                continue
            cell = f"{'right' if ca else 'wrong'}->{'right' if cb else 'wrong'}"
            cells[cell].append(qid)
            ds = by_dataset.setdefault(k[0], {c: 0 for c in TRANSITION_CELLS})
            ds[cell] += 1
        n_pairs = sum(len(v) for v in cells.values())
        acc_a = _rate(len(cells["right->right"]) + len(cells["right->wrong"]), n_pairs)
        acc_b = _rate(len(cells["right->right"]) + len(cells["wrong->right"]), n_pairs)
        return {
            "before": f"{a[0]}:{a[1]}",
            "after": f"{b[0]}:{b[1]}",
            "counts": {c: len(v) for c, v in cells.items()},
            "query_ids": cells,
            "by_dataset": by_dataset,
            "n_pairs": n_pairs,
            "unjudged": unjudged,
            "only_before": len(set(ta) - set(tb)),
            "only_after": len(set(tb) - set(ta)),
            "acc_before": acc_a,
            "acc_after": acc_b,
            "net_gain": len(cells["wrong->right"]) - len(cells["right->wrong"]),
        }


# --------------------------------------------------------------------------- metrics.jsonl


def read_metrics(path: Path, strict: bool, errors: list[RecordFormatError]) -> dict[str, Any]:
    """Numeric series per key from a ``metrics.jsonl`` (one JSON object per step)."""
    rows: dict[int, dict[str, float]] = {}
    with path.open("rb") as fh:
        for line_no, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
                if not isinstance(obj, dict):
                    raise ValueError("not a JSON object")
                step = obj.get("step", obj.get("training/global_step"))
                if isinstance(step, float) and step.is_integer():
                    step = int(step)
                if isinstance(step, bool) or not isinstance(step, int):
                    raise ValueError("no integer 'step'")
            except (ValueError, TypeError) as exc:
                err = RecordFormatError(path, line_no, f"corrupt metrics line ({exc})")
                if strict:
                    raise err from exc
                errors.append(err)
                continue
            row = rows.setdefault(step, {})
            for k, v in obj.items():
                if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                    row[k] = float(v)
    steps = sorted(rows)
    keys = sorted({k for r in rows.values() for k in r})
    return {"file": str(path), "steps": steps, "series": {k: [rows[s].get(k) for s in steps] for k in keys}}
