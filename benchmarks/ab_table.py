"""``benchmarks.pasr_ab``'s result (:mod:`benchmarks.ab_report`) as the markdown it prints and
docs/results/pasr_ab.md quotes: a row per seed and run (a run without figures shows its status,
never empty cells of None), the run-level statistics a row per arm and evaluation, the refine
term's reach per arm, and the verdict lines.
"""

from __future__ import annotations

from benchmarks.ab_report import MIXED_TARGET, RUNS


def _f(v, digits: int = 3, sign: bool = False) -> str:
    return "-" if v is None else (f"{v:+.{digits}f}" if sign else f"{v:.{digits}f}")


def _p(v) -> str:
    return "-" if v is None else f"{v:.2g}"


def run_cells(run: dict) -> list[str]:
    """A run's cells in the seed table: its figures, or its status where it has none."""
    rt = run.get("refine_term") or {}
    tail = [_f(rt.get("mixed_first_step"), 2), _f(rt.get("live_mean"), 2)] if "refine_term" in run else ["", ""]
    if run["status"] != "evaluated":
        return [f"{run['status']}: {run['why']}", *[""] * 6, *tail]
    g, s = run["greedy"], run.get("sampled") or {}
    return [
        str(run["step"]),
        _f(g["acc"]),
        _f(s.get("mean_at_k")),
        _f(g["refine_rate"], 2),
        f"{_f(g['refine_fix_rate'], 2)} / {_f(g['refine_break_rate'], 2)}",
        _f(g["tokens"], 1),
        str(g["n"]),
        *tail,
    ]


def table(head: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
        *("| " + " | ".join(r) + " |" for r in rows),
    ]


def report_lines(result: dict) -> list[str]:
    st = result["settings"]
    k = st.get("eval_sampled_k") or 0
    lines = [
        "## pasr_ab",
        "",
        f"device: {result['device']}; commit: {(result['commit'] or '?')[:7]}; wall {result['wall_s']:.0f} s"
        + ("" if result["complete"] else "; NOT COMPLETE (see the seeds left out)"),
        f"preset {st.get('preset')}, warm-up {st.get('warmup_steps')} steps (cosine, refine fraction "
        f"{st.get('refine_fraction')}), {st.get('steps')} RL steps of {st.get('queries_per_step')} x "
        f"({st.get('n_refine')} + {st.get('n_plain')}) rollouts, {st.get('eval_size')} held-out problems, "
        f"greedy and mean@{k} at T=0.5; seeds {' '.join(map(str, st.get('seeds', [])))}",
        "",
    ]
    head = ["seed", "run", "step", "greedy acc", f"mean@{k}", "refine rate", "fix / break", "tokens", "n"]
    rows = [[name, run, *run_cells(s["runs"][run])] for name, s in result["seeds"].items() for run in RUNS]
    lines += table([*head, "mixed groups, step 1", "live share (mean)"], rows)
    lines += [
        "",
        "Run-level statistics: each arm less the control of its seed, tested over the seeds; the drift "
        "arm's differences are the noise floor; pooled questions are secondary (they count questions, not runs).",
        "",
    ]
    srows = []
    for kind, s in result["stats"].items():
        label = "greedy" if kind == "greedy" else f"mean@{k}"
        if not s or "arms" not in s:
            srows.append([label, "-", (s or {}).get("refused", "no seed has every arm evaluated"), *[""] * 9])
            continue
        for arm, a in s["arms"].items():
            d = a["vs_drift"] or {}
            per = " ".join(_f(v, 3, sign=True) for v in a["per_seed"].values())
            pq = s["pooled"].get(arm) or {}
            pooled_cell = (
                f"{pq['wins']} / {pq['losses']}, p {_p(pq['p'])}"
                if kind == "greedy" and pq
                else (f"{_f(pq.get('delta'), 3, True)}, Wilcoxon p {_p(pq.get('p_wilcoxon'))}" if pq.get("n") else "-")
            )
            beyond = f"{d['seeds_up_beyond_drift']} / {d['seeds_down_beyond_drift']} of {d['n']}" if d.get("n") else "-"
            srows.append(
                [
                    label,
                    arm,
                    per,
                    _f(a["mean"], 3, True),
                    _f(a["sd"]),
                    f"{a['up']} / {a['down']}",
                    _p(a["p_sign"]),
                    _p(a["p_t"]),
                    _p(a["p_wilcoxon"]),
                    _f(d.get("drift_rms")),
                    beyond,
                    pooled_cell,
                ]
            )
    lines += table(
        [
            "evaluation",
            "arm vs control",
            "per-seed diff",
            "mean",
            "sd",
            "seeds up / down",
            "sign p",
            "t p",
            "Wilcoxon p",
            "drift RMS",
            "seeds beyond drift (up / down)",
            "pooled questions",
        ],
        srows,
    )
    lines += [
        "",
        f"The refine term (target: >= {MIXED_TARGET:.0%} of the first step's groups mixing refining and "
        "non-refining rollouts; the live share is 0 by construction where the refine weight is 0):",
        "",
    ]
    trows = []
    for arm, t in result["refine_term"].items():
        rr = t["refine_rate_curve"]
        curve = (
            " ".join(f"{v:.2f}" for v in rr.values())
            if len(rr) <= 12
            else (f"{next(iter(rr.values())):.2f} ... {list(rr.values())[-1]:.2f}")
        )
        trows.append(
            [
                arm,
                _f(t["mixed_first_step_mean"], 2),
                f"{t['seeds_mixed_at_target']} of {len(t['mixed_first_step'])}",
                _f(t["live_mean"], 2),
                curve or "-",
            ]
        )
    lines += table(
        [
            "arm",
            "mixed groups, step 1 (mean)",
            "seeds >= target",
            "live share (mean)",
            "sampled refine rate by step (mean over seeds)",
        ],
        trows,
    )
    v = result["verdict"]
    lines.append("")
    for name, x in v["by_arm"].items():
        lines.append(
            f"- {name}: beats the control by more than its seed's drift on {x['up_beyond_drift']} of "
            f"{x['seeds']} seeds (trails by more on {x['down_beyond_drift']}); |mean diff| beyond the drift's "
            f"RMS: {x['mean_beyond_drift_rms']}"
        )
    if v["headline"] is not None:
        lines.append(f"- PASR beats the control beyond the drift on most seeds under some evaluation: {v['headline']}")
    for name, why in result["seeds_left_out"].items():
        lines.append(f"- {name} left out of the statistics: {why}")
    return lines


def print_report(result: dict) -> None:
    print("\n".join(report_lines(result)))
