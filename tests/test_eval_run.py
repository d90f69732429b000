"""`pasr eval` end to end on a scripted backend: scoring real rows of each data set, mean@k and the
sampling defaults, the last-number fallback, the progress bar."""

from __future__ import annotations

import pytest

from eval.run import EvalConfig, run_eval
from tests.scripted_eval import Scripted, cfg_for, golds, pasr_text, plain_text, records_of

WRONG = {"gsm8k": "-12345", "math500": "\\frac{7}{13}", "aime24": "1000"}


@pytest.mark.parametrize("dataset", ["gsm8k", "math500", "aime24"])
@pytest.mark.parametrize("method", ["pasr", "plain"])
def test_scoring_on_real_rows(data_env, tmp_path, dataset, method):
    gold = golds(data_env, dataset, 4)
    questions = list(gold)
    right = set(questions[::2])  # alternate correct / incorrect responses
    style = pasr_text if method == "pasr" else plain_text

    def respond(system, user):
        return style(gold[user] if user in right else WRONG[dataset])

    summary = run_eval(cfg_for(tmp_path, datasets=[dataset], method=method, limit=4), backend=Scripted(respond))
    recs = records_of(tmp_path / "run")
    assert len(recs) == 4
    for r in recs:
        assert r.engine == "eval" and r.dataset == dataset and r.step is None
        assert r.gold == gold[r.prompt]
        assert r.acc == (1.0 if r.prompt in right else 0.0), (r.extracted_answer, r.gold)
        assert r.extracted_answer == (gold[r.prompt] if r.prompt in right else WRONG[dataset])
        assert r.variant == ("refine" if method == "pasr" else "plain")
        assert r.format_ok is (method == "pasr")
        assert r.n_refine == (1 if method == "pasr" else 0)
        assert r.response_tokens == len(r.response.split())
    d = summary["datasets"][dataset]
    assert d["accuracy"] == 0.5 and d["n_samples"] == 4 and d["errors"] == 0
    assert d["refine_rate"] == (1.0 if method == "pasr" else 0.0)
    md = (tmp_path / "run" / "summary.md").read_text()
    assert f"| {dataset} | 4 | 4 | 50.0% |" in md


def test_mean_at_k_and_sampling_defaults(data_env, tmp_path):
    assert EvalConfig("m", ["gsm8k"], "o").gen_params().temperature == 0.0
    gp = EvalConfig("m", ["gsm8k"], "o", samples=4).gen_params()
    assert (gp.temperature, gp.top_p) == (0.6, 0.95)
    gold = golds(data_env, "gsm8k", 3)
    seen: dict[str, int] = {}

    def respond(system, user):  # each question: right on its first sample only
        seen[user] = seen.get(user, 0) + 1
        return plain_text(gold[user] if seen[user] == 1 else "0")

    summary = run_eval(cfg_for(tmp_path, method="plain", limit=3, samples=4), backend=Scripted(respond))
    d = summary["datasets"]["gsm8k"]
    assert d["n_samples"] == 12 and d["n_questions"] == 3 and d["accuracy"] == 0.25
    assert sorted({r.sample_index for r in records_of(tmp_path / "run")}) == [0, 1, 2, 3]
    assert "mean@4" in (tmp_path / "run" / "summary.md").read_text()


def test_fallback_last_number(data_env, tmp_path):
    gold = golds(data_env, "gsm8k", 2)

    def respond(system, user):
        return f"So the total is {gold[user]} dollars."

    s0 = run_eval(cfg_for(tmp_path, method="plain", limit=2, out=str(tmp_path / "a")), backend=Scripted(respond))
    s1 = run_eval(
        cfg_for(tmp_path, method="plain", limit=2, out=str(tmp_path / "b"), fallback_last_number=True),
        backend=Scripted(respond),
    )
    assert s0["datasets"]["gsm8k"]["accuracy"] == 0.0 and s1["datasets"]["gsm8k"]["accuracy"] == 1.0
    assert s1["settings"]["fallback_last_number"] is True


def test_progress_moves_as_sequences_finish_and_never_runs_ahead_of_the_chunk():
    """pasr eval's bar ticks per finished sequence inside a chunk, holds one short of the
    chunk's end until the chunk is recorded, then lands on it exactly."""
    import io

    from tqdm import tqdm

    from eval.run import _ChunkTicks

    bar = tqdm(total=10, file=io.StringIO())
    ticks = _ChunkTicks(bar)
    ticks.start(4)
    ticks.tick(1)
    ticks.tick(2)
    assert bar.n == 3
    ticks.tick(5)  # a later pass (self-refine) finishing more sequences than the chunk has samples
    assert bar.n == 3
    ticks.finish()
    assert bar.n == 4
    ticks.start(6)
    ticks.finish()  # a backend that never ticks
    assert bar.n == 10


def test_synthetic_is_the_local_engines_held_out_set_never_its_training_set():
    """`pasr eval --dataset synthetic` scores what `pasr train` holds out (split test, seed
    data.seed + 1), so evaluating a local checkpoint repeats its held-out table; it used to draw the
    training split of seed 0."""
    from data.generated_sets import heldout_seed
    from data.synthetic import generate_problems
    from eval.run import load_datasets
    from recipe.local_engine.config import load_config

    data = load_config().data
    evaluated = [e.question for e in load_datasets(["synthetic"], 40)["synthetic"]]
    heldout = [
        p.question
        for p in generate_problems(40, seed=heldout_seed(data.seed), difficulty=data.difficulty, split="test")
    ]
    assert evaluated == heldout
    trained = {
        p.question
        for p in generate_problems(data.train_size, seed=data.seed, difficulty=data.difficulty, split="train")
    }
    assert not trained & set(evaluated)


def test_countdown_is_the_rrr_presets_held_out_set():
    """`pasr eval --dataset countdown` scores the problems `pasr train --preset rrr` holds out
    (split test, seed data.seed + 1, the preset's difficulty), so evaluating an RRR checkpoint
    repeats its held-out table; it used to draw seed 0, another set of problems."""
    from data.countdown import generate_problems
    from data.generated_sets import heldout_seed
    from eval.run import load_datasets
    from recipe.local_engine.config import load_config

    data = load_config(preset="rrr").data
    evaluated = [
        e.question for e in load_datasets(["countdown"], 30, countdown_difficulty=data.difficulty)["countdown"]
    ]
    heldout = [
        p.question
        for p in generate_problems(30, seed=heldout_seed(data.seed), difficulty=data.difficulty, split="test")
    ]
    assert evaluated == heldout
    assert evaluated != [p.question for p in generate_problems(30, seed=0, difficulty=data.difficulty, split="test")]
