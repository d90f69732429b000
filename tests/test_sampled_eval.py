"""The paper's evaluation protocol beside greedy (issue #61, item 4): the paired tests on
per-question means (known inputs, known p), mean@K on the tiny model (K samples a question at the
given temperature, the same seed giving the same samples, the training RNG untouched), and the
local trainer's evaluations writing the sampled figures when ``trainer.eval_sampled_k`` is on
and nothing of them when it is off, without changing a training step."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from recipe.local_engine import run_io, sampled_eval
from recipe.local_engine.config import load_config
from recipe.paired_tests import mean_at_k, paired_means_test, question_means, sign_test, wilcoxon_signed_rank
from recipe.pasr_config import ConfigError


# --------------------------------------------------------------------------- the tests on means
def test_wilcoxon_exact_without_ties():
    """Five differences of distinct sizes, all positive: the exact two-sided p is 2 / 2**5."""
    assert wilcoxon_signed_rank([0.1, 0.2, 0.3, 0.4, 0.5]) == pytest.approx(2 / 32)
    assert wilcoxon_signed_rank([-0.1, 0.2, 0.3, 0.4, 0.5]) == pytest.approx(4 / 32)  # T- = 1: {}, {1} each side
    assert wilcoxon_signed_rank([0.0, 0.0]) == 1.0 and wilcoxon_signed_rank([]) == 1.0


def test_wilcoxon_with_ties_is_the_tie_corrected_normal_approximation():
    """Differences of K=4 means tie: the normal approximation with the tie-corrected variance,
    no continuity correction, zeros dropped, computed here by hand."""
    d = [0.25, 0.5, 0.25, -0.25, 0.5, 0.75, 0.25, 0.0, 0.0]
    # |d| without zeros: 0.25 x4 (ranks 1-4, mean 2.5), 0.5 x2 (5.5), 0.75 (7); T- = 2.5 (the -0.25)
    n, t_minus = 7, 2.5
    var = n * (n + 1) * (2 * n + 1) / 24 - ((4**3 - 4) + (2**3 - 2)) / 48
    z = (t_minus - n * (n + 1) / 4) / math.sqrt(var)
    assert wilcoxon_signed_rank(d) == pytest.approx(math.erfc(abs(z) / math.sqrt(2)), rel=1e-9)


def test_paired_means_test_on_known_means():
    before = {"a": 0.0, "b": 0.25, "c": 0.5, "d": 1.0, "e": 0.5, "only_before": 1.0}
    after = {"a": 0.5, "b": 0.25, "c": 1.0, "d": 0.75, "e": 1.0, "only_after": 0.0}
    t = paired_means_test(before, after)
    assert (t["n"], t["wins"], t["losses"], t["ties"]) == (5, 3, 1, 1)
    assert t["before"] == pytest.approx(0.45) and t["after"] == pytest.approx(0.7)
    assert t["delta"] == pytest.approx(0.25)
    assert t["p_sign"] == pytest.approx(sign_test(3, 1)) == pytest.approx(0.625)
    assert t["p_wilcoxon"] == pytest.approx(wilcoxon_signed_rank([0.5, 0.5, -0.25, 0.5]))
    assert paired_means_test({}, {})["n"] == 0 and paired_means_test({}, {})["p_wilcoxon"] == 1.0


def test_question_means_leave_judge_errors_out():
    means = question_means({"q1": [1.0, 0.0, None, 1.0], "q2": [None, None], "q3": [0.5, 0.5]})
    assert means == {"q1": pytest.approx(2 / 3), "q3": 0.5}
    assert mean_at_k(means) == pytest.approx((2 / 3 + 0.5) / 2)
    assert mean_at_k({}) is None


def test_eval_significance_re_exports_the_same_tests():
    from eval import significance

    assert significance.sign_test is sign_test and significance.paired_means_test is paired_means_test


# --------------------------------------------------------------------------- mean@K on the tiny model
def _sample(tiny, monkeypatch, seed: int, k: int = 3, temperature: float = 0.5):
    """``sample_scores`` on 3 held-out problems, and what it asked ``generate_step`` for."""
    from data.loaders import load_examples
    from prompts import PromptSet
    from recipe.local_engine import rollout
    from recipe.pasr_config import JudgeConfig, PasrConfig
    from rewards.judges import build_judge

    calls = []
    real = rollout.generate_step

    def spy(*args, **kwargs):
        gens = real(*args, **kwargs)
        calls.append((kwargs, [(g.rollout.query_id, g.rollout.sample_index, g.response_ids) for g in gens]))
        return gens

    monkeypatch.setattr(rollout, "generate_step", spy)
    model, tok = tiny
    examples = load_examples("synthetic", split="test", limit=3)
    metrics, scores = sampled_eval.sample_scores(
        model,
        tok,
        examples,
        PromptSet.load("refine_system_short", "plain_system_short"),
        build_judge(JudgeConfig(kind="rule")),
        PasrConfig(),
        k=k,
        temperature=temperature,
        seed=seed,
        max_new_tokens=12,
        batch_size=8,
        prefill_think=True,
        run_id="t",
        step=0,
    )
    return metrics, scores, calls[0], examples


def test_mean_at_k_draws_k_samples_at_the_temperature_and_repeats_with_its_seed(tiny, monkeypatch):
    torch.manual_seed(123)
    state = torch.get_rng_state()
    metrics, scores, (kwargs, samples), examples = _sample(tiny, monkeypatch, seed=0)
    assert torch.equal(torch.get_rng_state(), state)  # the training RNG is where it was
    params = kwargs["params"]
    assert (kwargs["n_refine"], kwargs["n_plain"]) == (3, 0)
    assert params.do_sample and params.temperature == 0.5 and params.top_p == 1.0
    assert sorted(scores) == sorted(ex.id for ex in examples) and all(len(v) == 3 for v in scores.values())
    assert metrics["eval/sampled/k"] == 3 and metrics["eval/sampled/temperature"] == 0.5
    assert metrics["eval/sampled/acc"] == mean_at_k(question_means(scores))
    again = _sample(tiny, monkeypatch, seed=0)
    assert again[2][1] == samples and again[1] == scores  # same seed: the same tokens
    other = _sample(tiny, monkeypatch, seed=1)[2][1]
    assert other != samples  # another seed: other draws
    hot = _sample(tiny, monkeypatch, seed=0, temperature=1.5)[2]
    assert hot[0]["params"].temperature == 1.5


# --------------------------------------------------------------------------- the trainer and its table
def test_the_closing_table_shows_mean_at_k_and_the_paired_test():
    evals = {
        "warmup": {"eval/acc": 0.5, "eval/sampled/acc": 0.4, "eval/sampled/k": 4, "eval/sampled/temperature": 0.5},
        "final": {
            "eval/acc": 0.55,
            "eval/sampled/acc": 0.45,
            "eval/sampled/k": 4,
            "eval/sampled/temperature": 0.5,
            **{
                f"eval/sampled/vs_warmup/{k}": v
                for k, v in dict(
                    n=300,
                    before=0.4,
                    after=0.45,
                    delta=0.05,
                    wins=40,
                    losses=20,
                    ties=240,
                    p_wilcoxon=0.01,
                    p_sign=0.013,
                ).items()
            },
        },
    }
    table = run_io.summarize(evals)
    head = table.splitlines()[0]
    assert "| acc | mean@4 T=0.5 |" in head
    assert "| warmup | - | 0.50 | 0.40 |" in table and "| final | - | 0.55 | 0.45 |" in table
    assert "final vs warmup, mean@4 of the same 300 questions: 0.400 -> 0.450 (+0.050; 40 up, 20 down" in table
    assert "Wilcoxon signed-rank p = 0.01, sign test p = 0.013" in table
    plain = run_io.summarize({t: {"eval/acc": m["eval/acc"]} for t, m in evals.items()})
    assert "mean@" not in plain and len(plain.splitlines()) == 4  # off: the greedy table as before


def test_the_keys_are_checked():
    with pytest.raises(ConfigError, match="trainer.eval_sampled_k must be >= 0 and trainer.eval_temperature > 0"):
        load_config(preset="tiny", overrides=["trainer.eval_sampled_k=-1"])
    with pytest.raises(ConfigError, match="trainer.eval_temperature > 0, got 0 and 0"):
        load_config(preset="tiny", overrides=["trainer.eval_temperature=0"])
    with pytest.raises(ConfigError, match="set it to 0 for method=rrr"):
        load_config(preset="rrr", overrides=["trainer.eval_sampled_k=2"])
    cfg = load_config(preset="tiny")
    assert (cfg.trainer.eval_sampled_k, cfg.trainer.eval_temperature) == (0, 0.5)  # off; the paper's temperature


def test_an_earlier_finals_scores_are_kept_when_a_run_is_extended(tmp_path):
    path = sampled_eval.sampled_file(tmp_path, "final")
    sampled_eval.write_scores(path, {"q": [1.0]}, step=6, k=1)
    assert sampled_eval.keep_earlier_final(path, 6) is None and path.is_file()  # the same end: replaced
    kept = sampled_eval.keep_earlier_final(path, 8)
    assert kept == tmp_path / "eval" / "final_step_000006.sampled.json" and not path.exists()
    assert sampled_eval.read_scores(kept)["scores"] == {"q": [1.0]}
    assert sampled_eval.keep_earlier_final(path, 8) is None  # nothing to keep


def _train(tmp_path: Path, name: str, model: Path, *overrides: str) -> tuple[Path, list[dict]]:
    from pasr_cli import main

    run = tmp_path / name
    assert (
        main(["train", "--preset", "tiny", "--run-dir", str(run), f"model.path={model}", "model.threads=1", *overrides])
        == 0
    )
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    return run, lines


def _untimed(line: dict) -> dict:
    """A metrics line less its wall times (``timing_s/*``, ``pasr/reward_time_share``) and sampled figures."""
    return {k: v for k, v in line.items() if "tim" not in k and not k.startswith("eval/sampled/")}


def test_the_trainer_writes_mean_at_k_when_on_and_nothing_of_it_when_off(tiny_model_dir, tmp_path, capsys):
    off, off_lines = _train(tmp_path, "off", tiny_model_dir)
    off_out = capsys.readouterr().out
    on, on_lines = _train(tmp_path, "on", tiny_model_dir, "trainer.eval_sampled_k=2")
    on_out = capsys.readouterr().out

    assert not list((off / "eval").glob("*.sampled.json")) and "mean@" not in off_out
    assert not any(k.startswith("eval/sampled/") for line in off_lines for k in line)

    evals = {line["tag"]: line for line in on_lines if line["phase"] == "eval"}
    assert set(evals) == {"warmup", "final"}
    heldout = len((on / "eval" / "final.jsonl").read_text().splitlines())  # greedy, refine prompt only
    for tag, line in evals.items():
        saved = json.loads(sampled_eval.sampled_file(on, tag).read_text())
        assert (saved["k"], saved["temperature"], saved["seed"], saved["step"]) == (2, 0.5, 0, line["step"])
        assert len(saved["scores"]) == heldout and all(len(v) == 2 for v in saved["scores"].values())
        assert line["eval/sampled/acc"] == mean_at_k(question_means(saved["scores"]))
        assert line["eval/sampled/k"] == 2 and "timing_s/eval_sampled" in line
    assert evals["final"]["eval/sampled/vs_warmup/n"] == heldout
    assert "eval/sampled/vs_warmup/p_wilcoxon" in evals["final"] and "eval/sampled/vs_warmup/n" not in evals["warmup"]
    assert "mean@2 T=0.5" in on_out and "final vs warmup, mean@2 of the same" in on_out
    # pasr stats reads the greedy dumps alone: it still pairs the warm-up with the final evaluation
    from pasr_cli import main

    assert main(["stats", str(on), "--out", str(on / "report"), "--progress", "off"]) == 0
    pairs = json.loads((on / "report" / "stats.json").read_text())["transitions"]
    assert [(t["before"].split("@")[0], t["after"].split("@")[0]) for t in pairs] == [("on/warmup", "on/final")]

    # the sampled evaluation draws from a forked RNG: every training step and greedy figure is the same
    assert [_untimed(x) for x in on_lines] == [_untimed(x) for x in off_lines]
    dumps = [f"eval/{tag}.jsonl" for tag in evals] + [f"rollouts/{p.name}" for p in (off / "rollouts").iterdir()]
    for dump in dumps:  # the greedy answers and the RL steps' sampled ones (the run ids, the folders' names, differ)
        on_dump, off_dump = ((d / dump).read_text().splitlines() for d in (on, off))
        assert [(r["query_id"], r["response"]) for r in map(json.loads, on_dump)] == [
            (r["query_id"], r["response"]) for r in map(json.loads, off_dump)
        ]


# --------------------------------------------------------------------------- pasr eval --protocol paper
def test_the_paper_protocol_sets_temperature_and_top_p_in_one_flag():
    from eval.config import EvalConfig, EvalError

    def params(**kw):
        cfg = EvalConfig(model="m", datasets=["gsm8k"], out="o", **kw)
        cfg.validate()
        return cfg.gen_params()

    assert (params().temperature, params().top_p) == (0.0, 1.0)  # greedy, as before
    assert (params(samples=4).temperature, params(samples=4).top_p) == (0.6, 0.95)  # mean@K's own default
    for samples in (1, 4):
        p = params(protocol="paper", samples=samples)
        assert (p.temperature, p.top_p) == (0.5, 1.0)
    assert params(protocol="paper", temperature=0.5, top_p=1.0).temperature == 0.5  # the same values: fine
    with pytest.raises(EvalError, match="--protocol paper sets --temperature 0.5; drop --temperature 0.7"):
        params(protocol="paper", temperature=0.7)
    with pytest.raises(EvalError, match="--protocol paper sets --top-p 1; drop --top-p 0.9"):
        params(protocol="paper", top_p=0.9)
    with pytest.raises(EvalError, match="unknown --protocol 'nope'"):
        params(protocol="nope")


def test_pasr_eval_protocol_paper_reports_mean_at_k_at_its_temperature(tiny_model_dir, tmp_path, run_cli):
    out = tmp_path / "eval"
    argv = ["eval", "--model", str(tiny_model_dir), "--dataset", "synthetic", "--limit", "2", "--method", "pasr"]
    argv += ["--backend", "hf", "--max-new-tokens", "8", "--threads", "1", "--out", str(out)]
    rc, stdout, _ = run_cli([*argv, "--protocol", "paper", "--samples", "3"])
    assert rc == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["protocol"] == "paper" and summary["samples"] == 3
    assert (summary["settings"]["temperature"], summary["settings"]["top_p"]) == (0.5, 1.0)
    assert summary["datasets"]["synthetic"]["n_samples"] == 6
    assert "the paper protocol (top-p 1.0), max new tokens 8, temperature 0.5" in stdout
    assert "accuracy (mean@3)" in stdout
    rc, _, err = run_cli([*argv, "--protocol", "paper", "--temperature", "0.9"])
    assert rc != 0 and "--protocol paper sets --temperature 0.5" in err and "Traceback" not in err
