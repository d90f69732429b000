"""One name per concept across both engines, pasr eval and pasr stats: the refine-outcome
vocabulary, the step names of checkpoints and rollout dumps, each defined once and used from
there."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_refine_outcomes_are_one_vocabulary():
    """rewards.refine defines the outcomes; the training metrics and pasr stats' plots use that
    tuple, and every outcome the reward gives is in it."""
    from eval.stats import plots
    from recipe import metrics
    from rewards.pasr import RewardWeights, score_group
    from rewards.refine import COMPARED_OUTCOMES, OUTCOMES

    assert (
        metrics.OUTCOMES is OUTCOMES
        and plots.OUTCOME_ORDER is OUTCOMES
        and plots.COMPARED_OUTCOMES is COMPARED_OUTCOMES
    )
    w = RewardWeights(format=1.0, acc=1.0, refine=1.0)
    refined, restated = (
        "<think>2+2=5 <refine>2+2=4</refine></think><answer>4</answer>",
        "<think>4 <refine>4</refine></think><answer>4</answer>",
    )
    plain = "<think>2+2=4</think><answer>4</answer>"
    got = {
        r.refine_outcome
        for r in score_group(
            [refined, restated, plain, refined],
            [1.0, 1.0, 1.0, None],
            [0.0],
            weights=w,
            tie_value=0.0,
            zeta=1e-6,
            empty_refine_value=0.0,
        )
    }
    got |= {
        r.refine_outcome
        for r in score_group([refined, refined], [0.0, 1.0], [1.0], weights=w, tie_value=0.0, zeta=1e-6)
    }
    got |= {r.refine_outcome for r in score_group([refined], [1.0], [None], weights=w, tie_value=0.0, zeta=1e-6)}
    assert got == set(OUTCOMES)
    assert set(metrics.step_metrics([])) >= {f"pasr/refine_outcome/{o}" for o in OUTCOMES}


def test_a_step_has_one_name_for_checkpoints_and_dumps(tmp_path):
    """recipe.step_files names a step's checkpoint folder and rollout dumps for both engines; the
    local run and the verl wrapper dump a step to the same name; eval reads the step back."""
    from eval.identity import _step_of
    from recipe.local_engine import run_io
    from recipe.step_files import rollout_dump, step_name, step_of, validation_dump

    assert step_name(7) == "step_000007" and step_of("step_000007") == 7 and step_of("global_step_7") == 7
    assert (
        run_io.rollout_dump(tmp_path, 7)
        == tmp_path / "rollouts" / "step_000007.jsonl"
        == rollout_dump(tmp_path / "rollouts", 7)
    )
    assert validation_dump(tmp_path, 7).name == "val_step_000007.jsonl"
    (tmp_path / "step_000012").mkdir()
    assert _step_of(tmp_path / "step_000012") == 12


def test_no_other_module_spells_the_step_name():
    """The zero-padded step (``step_{step:06d}``) is formatted in recipe/step_files.py only; it was
    built by hand in the local checkpoints, the local trainer, the verl engine's three dumps and
    the benchmarks."""
    spelled = [
        str(p.relative_to(ROOT))
        for top in ("recipe", "eval", "runtime", "data", "rewards", "benchmarks", "pasr_cli")
        for p in (ROOT / top).rglob("*.py")
        if ":06d}" in p.read_text(encoding="utf-8")
    ]
    assert spelled == ["recipe/step_files.py"]
