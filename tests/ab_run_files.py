"""A ``benchmarks.pasr_ab`` run directory written by hand, with known figures, for the report's
tests (tests/test_pasr_ab.py): what the runs would leave (greedy dumps, their sampled scores,
``metrics.jsonl``, ``config.yaml``, logs with their sidecars), no training. Greedy correctness
is given per seed and run as the number of right answers among ``N`` questions (the first ones
right); each question's K sampled scores are its greedy score K times, except that the runs in
``SAMPLED_UP`` get one more right sample on every question they got wrong."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from data.records import RolloutRecord

N, K, STEPS = 20, 2, 3
RIGHT = "<think>2 + 2 = 5 <refine>2 + 2 = 4</refine></think><answer>4</answer>"
WRONG = "<think>2 + 2 = 5</think><answer>5</answer>"
# right answers of N, per seed and run: the drift arm moves by +-1, pasr_cpu gains 2-3, pasr_paper 0 or 1
CORRECT = {
    1: {"warmup": 10, "control": 11, "control_drift": 12, "pasr_paper": 11, "pasr_cpu": 14},
    2: {"warmup": 10, "control": 12, "control_drift": 11, "pasr_paper": 13, "pasr_cpu": 14},
    3: {"warmup": 9, "control": 10, "control_drift": 10, "pasr_paper": 10, "pasr_cpu": 13},
}
SAMPLED_UP = ("pasr_cpu",)
MIXED = {"control": 0.5, "control_drift": 0.375, "pasr_paper": 0.5, "pasr_cpu": 0.5}  # at step 1
ARMS = ("control", "control_drift", "pasr_paper", "pasr_cpu")


def record(q: int, right: bool) -> RolloutRecord:
    return RolloutRecord(
        run_id="r",
        query_id=f"q{q}",
        data_source="synthetic",
        variant="refine",
        prompt="2 + 2?",
        response=RIGHT if right else WRONG,
        response_tokens=12,
        format_ok=True,
        format_reason="ok",
        n_refine=1 if right else 0,
        extracted_answer="4" if right else "5",
        gold="4",
        acc=1.0 if right else 0.0,
    )


def write_eval(run_dir: Path, tag: str, n_right: int, sampled_up: bool, step: int) -> None:
    right = [q < n_right for q in range(N)]
    (run_dir / "eval").mkdir(parents=True, exist_ok=True)
    (run_dir / "eval" / f"{tag}.jsonl").write_text("".join(record(q, r).to_json() + "\n" for q, r in enumerate(right)))
    scores = {f"q{q}": [1.0 if r or (sampled_up and i == 0) else 0.0 for i in range(K)] for q, r in enumerate(right)}
    settings = {"tag": tag, "step": step, "k": K, "temperature": 0.5, "top_p": 1.0, "seed": 0}
    (run_dir / "eval" / f"{tag}.sampled.json").write_text(json.dumps({**settings, "scores": scores}) + "\n")


def write_log(root: Path, name: str, rc: int | None = 0, signals=()) -> None:
    log = root / f"{name.replace('/', '_')}.log"
    log.write_text("    0.5 starting\n   30.0 done\n")
    (root / f"{log.name}.events.json").write_text(json.dumps({"cmd": [], "signals": list(signals), "rc": rc}) + "\n")


def write_run(root: Path, seeds=(1, 2, 3)) -> Path:
    """The run directory of a finished pasr_ab command over ``seeds`` (of :data:`CORRECT`)."""
    root.mkdir(parents=True, exist_ok=True)
    settings = {
        "device": "cpu: test",
        "commit": "c0ffee" * 6 + "c0ff",
        "seeds": list(seeds),
        "arms": list(ARMS),
        "steps": STEPS,
        "preset": "tiny",
        "warmup_steps": 4,
        "refine_fraction": 0.4,
        "queries_per_step": 2,
        "n_refine": 2,
        "n_plain": 1,
        "rollouts_per_step": 6,
        "eval_size": N,
        "eval_sampled_k": K,
        "parallel": 2,
        "budget_s": 600.0,
    }
    (root / "settings.json").write_text(json.dumps(settings) + "\n")
    state = {"parts": {"ab": {"wall_s": 99.0, "budget_s": 600.0}}, "phases": {"runs": 90.0, "evals": 9.0}}
    (root / "state.json").write_text(json.dumps({**state, "complete": True}) + "\n")
    for s in seeds:
        d = root / f"seed_{s}"
        write_eval(d / "warmup", "warmup", CORRECT[s]["warmup"], False, 4)
        (d / "warmup" / "metrics.jsonl").write_text(
            "".join(json.dumps({"step": i, "phase": "warmup", "timing_s/update": 1.0}) + "\n" for i in (1, 2, 3, 4))
            + json.dumps({"step": 4, "phase": "eval", "tag": "warmup", "timing_s/eval": 2.0})
            + "\n"
        )
        write_log(root, f"seed_{s}/warmup")
        for arm in ARMS:
            run = d / arm
            write_eval(run, "final", CORRECT[s][arm], arm in SAMPLED_UP, STEPS)
            live = 0.0 if arm.startswith("control") else 0.25
            lines = [
                {
                    "step": i,
                    "phase": "pasr",
                    "pasr/refine_term/live_groups": live,
                    "pasr/refine_term/mixed_groups": MIXED[arm] if i == 1 else 0.25,
                    "pasr/refine_rate": 0.4 + 0.1 * i,
                    "timing_s/step": 5.0,
                }
                for i in range(1, STEPS + 1)
            ]
            lines.append({"step": STEPS, "phase": "eval", "tag": "final", "timing_s/eval": 2.0})
            (run / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
            weights = {"format": 1.0, "acc": 1.0, "refine": 0.0 if arm.startswith("control") else 1.0}
            cfg = {"pasr": {"weights": weights}, "trainer": {"seed": s}, "warmup": {"seed": s}, "rollout": {}}
            if arm == "control_drift":
                cfg["rollout"]["seed"] = s + 1000
            (run / "config.yaml").write_text(yaml.safe_dump(cfg))
            write_log(root, f"seed_{s}/{arm}")
    return root
