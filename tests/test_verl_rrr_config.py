"""Reflect, Retry, Reward in the verl engine's config, on CPU: ``method`` and the ``rrr.*`` section
of the Hydra config (their defaults, bad keys, what the RRR rollout needs, preflight), the rollout
manager each method gets, and the 1-GPU smoke script's overrides."""

from __future__ import annotations

import argparse
import dataclasses
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.rrr_scripted_rollout import RRR_OK, tokenizer  # noqa: F401  (tokenizer is a fixture)
from tests.verl_compose import _compose, _script_overrides

REPO = Path(__file__).resolve().parents[1]


def test_method_and_rrr_section_compose_with_their_defaults():
    from omegaconf import OmegaConf

    from recipe.rrr_config import RrrConfig
    from recipe.verl_engine.config import method_of, plain_sections, rrr_config

    cfg = _compose()
    assert method_of(cfg) == "pasr" and cfg.actor_rollout_ref.rollout.n == 8  # PASR unchanged
    assert OmegaConf.to_container(cfg.rrr) == dataclasses.asdict(RrrConfig())  # the defaults live in the dataclass
    rrr = _compose(RRR_OK)
    assert method_of(rrr) == "rrr" and rrr.actor_rollout_ref.rollout.n == 2  # derived from rrr.n_reflections
    assert rrr_config(rrr).n_reflections == 2
    plain_sections(rrr)
    assert OmegaConf.get_type(rrr.rrr) is dict and rrr.actor_rollout_ref.rollout.n == 2


def test_rrr_config_errors_name_the_key():
    from hydra.errors import ConfigCompositionException

    from recipe.pasr_config import ConfigError
    from recipe.verl_engine.config import method_of, pasr_config, rrr_config

    with pytest.raises(ConfigError, match=r"invalid config key rrr\.n_reflexions"):
        rrr_config(_compose([*RRR_OK, "+rrr.n_reflexions=3"]))
    with pytest.raises(ConfigError, match=r"invalid config key rrr\.prompts\.reflection"):
        rrr_config(_compose(["+rrr.prompts.reflection=x"]))  # checked with method=pasr too
    with pytest.raises(ConfigCompositionException):
        _compose(["rrr.bogus=1"])  # Hydra itself refuses a key without '+'
    with pytest.raises(ConfigCompositionException):
        _compose(["rrr.n_reflections=many"])  # typed by the schema
    with pytest.raises(ConfigError, match=r"rrr.n_reflections must be >= 1, got 0"):
        rrr_config(_compose([*RRR_OK, "rrr.n_reflections=0"]))
    with pytest.raises(ConfigError, match=r"method must be one of pasr \| rrr, got 'sft'"):
        method_of(_compose(["method=sft"]))
    with pytest.raises(ConfigError, match="method must be one of"):
        pasr_config(_compose(["method=sft"]))


def test_rrr_config_checks_what_the_rrr_rollout_needs():
    from recipe.pasr_config import ConfigError
    from recipe.verl_engine.config import pasr_config, rrr_config

    with pytest.raises(ConfigError, match=r"rollout.n=3 differs from rrr.n_reflections=2"):
        rrr_config(_compose([*RRR_OK, "actor_rollout_ref.rollout.n=3"]))
    pasr_config(_compose([*RRR_OK, "actor_rollout_ref.rollout.n=3"]))  # PASR's n check is PASR's only
    with pytest.raises(ConfigError, match=r"data.max_prompt_length=1024 cannot hold an RRR retry prompt.*e.g. 2140"):
        rrr_config(_compose(["method=rrr"]))  # 1500 answer tokens + 128 reflection tokens
    judge = ["pasr.judge.kind=openai", "pasr.judge.base_url=http://j/v1", "pasr.judge.model=m"]
    with pytest.raises(ConfigError, match=r"binary, exact judge.*pasr.judge.kind=openai"):
        rrr_config(_compose([*RRR_OK, *judge]))
    rrr_config(_compose([*RRR_OK, "pasr.judge.kind=countdown"]))


def test_preflight_runs_the_rrr_checks():
    from recipe.verl_engine.config import PreflightError, preflight

    ok = dict(local_gpus=lambda: 8, find_module=lambda n: object(), judge_check=lambda c: None)
    preflight(_compose(RRR_OK), **ok)
    with pytest.raises(PreflightError, match="cannot hold an RRR retry prompt"):
        preflight(_compose(["method=rrr"]), **ok)
    with pytest.raises(PreflightError, match="method must be one of"):
        preflight(_compose(["method=grpo"]), **ok)


def test_build_rollout_manager_picks_the_method(tokenizer):
    from recipe.verl_engine.rollout import PasrRolloutManager, build_rollout_manager
    from recipe.verl_engine.rrr_rollout import RrrRolloutManager
    from rewards.judges import RuleJudge

    inner = SimpleNamespace(generate_sequences=None, start_profile=lambda: "inner")
    rrr = build_rollout_manager(_compose(RRR_OK), tokenizer, inner)
    pasr = build_rollout_manager(_compose(), tokenizer, inner)
    try:
        assert isinstance(rrr, RrrRolloutManager) and isinstance(pasr, PasrRolloutManager)
        assert rrr.cfg.n_reflections == 2 and isinstance(rrr.judge, RuleJudge) and rrr.size_divisor == 8
        assert rrr.prompt_versions == rrr.prompts.version() and rrr.start_profile() == "inner"
    finally:
        rrr.close()
        pasr.close()


def test_rrr_smoke_script_drives_the_node_script_with_an_rrr_config():
    script = REPO / "recipe" / "scripts" / "run_rrr_smoke_1gpu.sh"
    node = (REPO / "recipe" / "scripts" / "run_pasr_node.sh").read_text()
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    text = script.read_text()
    train = text[text.index("train() {") : text.index("\n}\n", text.index("train() {"))]
    env = dict(re.findall(r"\b([A-Z_]+)=(\"?[^\s\\\\]+)", train.split("bash recipe/scripts/run_pasr_node.sh")[0]))
    for name in env:  # every variable the smoke run sets is one the node script reads
        assert "${" + name in node or "$" + name in node, name
    assert (env["TRAIN_DATASET"], env["VAL_DATASET"], env["TRAIN_BSZ"], env["MINI_BSZ"]) == (
        "countdown",
        "countdown",
        "16",
        "16",
    )
    # the data files it writes are the ones the node script would otherwise prepare
    from data.prepare import output_file

    assert text.count('--out "$DATA_DIR"') == 2
    for split in ("train", "test"):  # pasr data prepare --out DIR names it <dataset>_<split>.parquet
        assert f"--dataset countdown --split {split} " in text
        args = argparse.Namespace(dataset="countdown", split=split, out="D")
        assert output_file(args) == Path("D") / f"countdown_{split}.parquet"
    assert 'local file="$DATA_DIR/$(basename "$dataset" | sed \'s/\\.[a-z]*$//\')_$split.parquet"' in node
    overrides = [line.strip().rstrip("\\").strip() for line in train.split("run_pasr_node.sh")[1].splitlines()]
    literal = [o for o in overrides if "=" in o and "$" not in o]
    assert literal == [
        "method=rrr",
        "pasr.judge.kind=countdown",
        "data.max_response_length=384",
        "trainer.max_actor_ckpt_to_keep=2",
    ]
    from recipe.verl_engine.config import pasr_config, rrr_config

    cfg = _compose(_script_overrides(REPO / "recipe" / "scripts" / "run_pasr_node.sh") + literal)
    assert rrr_config(cfg).n_reflections == 4 and cfg.actor_rollout_ref.rollout.n == 4
    assert pasr_config(cfg).judge.kind == "countdown"
