"""The paper's evaluation protocol in the GPU benchmarks' reports (``gpu_check``, ``gpu_scale``):
mean@K at temperature 0.5 beside each greedy row, and paired tests on per-question means.

Both benchmarks evaluate through the local trainer (``pasr train`` with ``trainer.eval_*``), so
they ask it for the sampled half too (``trainer.eval_sampled_k``, :func:`overrides`), and each
greedy dump ``<run>/eval/<tag>.jsonl`` gets its per-question sampled scores beside it
(``<tag>.sampled.json``, :mod:`recipe.local_engine.sampled_eval`). Here those files become rows
(:func:`row`) and tests (:func:`paired`, :func:`section`), from the run directory alone, like
everything else in the reports. The greedy rows and their sign tests, and what PASS needs, stay
as they were.
"""

from __future__ import annotations

from pathlib import Path
from statistics import fmean

from recipe.local_engine.sampled_eval import compare, read_scores
from recipe.paired_tests import mean_at_k, paired_means_test, question_means

DEFAULT_K = 4  # answers a question: enough for a per-question mean, about K greedy evaluations of time
# Estimated, not measured: the extra seconds of one evaluation's K samples a question on a GPU, as
# a share of a greedy evaluation's generation (gpu_scale.EVAL_S, 5 s for 300 problems on the
# H100) per sample: 4 x 300 rows are 5 batches of 256 where 300 greedy ones are 2.
SAMPLED_SHARE_PER_K = 0.625
GREEDY_EVAL_S = 5.0  # the H100's greedy evaluation of 300 problems (gpu_scale.EVAL_S), start-up aside


def add_option(parser) -> None:
    parser.add_argument(
        "--eval-sampled-k",
        type=int,
        default=DEFAULT_K,
        metavar="K",
        help=f"every held-out evaluation also samples K answers a question at temperature 0.5 (the paper's "
        f"protocol; trainer.eval_sampled_k) for mean@K and paired tests on per-question means beside the "
        f"greedy rows (default {DEFAULT_K}; 0: greedy only)",
    )


def overrides(args) -> list[str]:
    """The local trainer's key for ``--eval-sampled-k``."""
    return [f"trainer.eval_sampled_k={args.eval_sampled_k}"]


def extra_s(args, greedy_s: float = GREEDY_EVAL_S) -> float:
    """The estimated seconds (:data:`SAMPLED_SHARE_PER_K`) ``--eval-sampled-k`` adds to an
    evaluation whose greedy generation takes ``greedy_s``."""
    return greedy_s * SAMPLED_SHARE_PER_K * args.eval_sampled_k


def scores_beside(dump: Path) -> Path:
    """The sampled scores written beside a greedy dump ``<run>/eval/<tag>.jsonl``."""
    return dump.with_name(f"{dump.stem}.sampled.json")


def row(dump: Path) -> dict | None:
    """mean@K of the evaluation whose greedy dump is ``dump``, with its K, temperature and
    questions, or None where it sampled nothing."""
    saved = read_scores(scores_beside(dump))
    if saved is None:
        return None
    means = question_means(saved["scores"])
    return {"mean_at_k": mean_at_k(means), "k": saved["k"], "temperature": saved["temperature"], "n": len(means)}


def paired(before: Path, after: Path) -> dict | None:
    """:func:`recipe.paired_tests.paired_means_test` of ``after``'s per-question means against
    ``before``'s (both greedy dumps' sampled scores), or None where either has none."""
    a, b = read_scores(scores_beside(before)), read_scores(scores_beside(after))
    return compare(a, b) if a is not None and b is not None else None


def pairs(tests) -> dict[str, tuple[str, str]]:
    """Test names ``AFTER_vs_BEFORE`` (the greedy tests' names) as ``(before, after)`` row names."""
    return {t: tuple(reversed(t.split("_vs_"))) for t in tests}


def section(dumps: dict[str, Path], *tests: str) -> dict:
    """A report's sampled half: ``rows`` by name (``dumps``' names), and ``tests`` named
    ``AFTER_vs_BEFORE`` after two of them."""
    return {
        "rows": {name: row(path) for name, path in dumps.items()},
        "tests": {name: paired(dumps[a], dumps[b]) for name, (a, b) in pairs(tests).items()},
    }


def pooled(dumps: list[dict[str, Path]], *tests: str) -> dict:
    """Over the seeds (each seed's dumps by name): each row's mean@K averaged over the seeds, and
    each test (:func:`section`) on the union of the seeds' per-question means (a question of each
    seed counts once: like the greedy pool, it counts questions, not runs), with the seeds whose
    own test went up and down."""
    seeds = [section(d, *tests) for d in dumps]
    rows = {}
    for name in dict.fromkeys(n for d in dumps for n in d):
        own = [r for s in seeds if (r := s["rows"].get(name)) and r["mean_at_k"] is not None]
        rows[name] = {**own[0], "mean_at_k": fmean(r["mean_at_k"] for r in own), "n_seeds": len(own)} if own else None

    def means(which: str) -> dict[str, float]:
        out = {}
        for i, d in enumerate(dumps):
            saved = read_scores(scores_beside(d[which]))
            if saved is not None:
                out |= {f"{i}:{q}": m for q, m in question_means(saved["scores"]).items()}
        return out

    out = {}
    for name, (a, b) in pairs(tests).items():
        own = [s["tests"][name] for s in seeds if s["tests"][name] and s["tests"][name]["n"]]
        out[name] = {
            **paired_means_test(means(a), means(b)),
            "seeds_up": sum(t["delta"] > 0 for t in own),
            "seeds_down": sum(t["delta"] < 0 for t in own),
        }
    return {"rows": rows, "tests": out}


def test_words(t: dict | None) -> str:
    """A test on per-question means in one line."""
    if not t or not t["n"]:
        return "-"
    return (
        f"{t['delta']:+.3f} ({t['wins']} up, {t['losses']} down, {t['ties']} same), "
        f"Wilcoxon p {t['p_wilcoxon']:.3g}, sign p {t['p_sign']:.3g}"
    )


def print_report(sampled: dict | None, title: str = "") -> None:
    for line in report_lines(sampled, title):
        print(line)


def report_lines(sampled: dict | None, title: str = "") -> list[str]:
    """The sampled half of a report (:func:`section`, :func:`pooled`) as printed: the rows'
    mean@K on one line after ``title``, a test a line; nothing where nothing was sampled."""
    rows = (sampled or {}).get("rows", {})
    first = next((r for r in rows.values() if r), None)
    if first is None:
        return []
    cells = "  ".join(
        f"{name} {r['mean_at_k']:.3f}" if r and r["mean_at_k"] is not None else f"{name} -" for name, r in rows.items()
    )
    return [
        f"{title}mean@{first['k']} at T={first['temperature']:g} (per-question means): {cells}",
        *(f"  {name}: {test_words(t)}" for name, t in sampled["tests"].items()),
    ]
