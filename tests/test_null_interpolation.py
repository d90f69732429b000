"""A null key interpolated into text (issue 63): ``trainer.default_local_dir=null`` made
``pasr_verl.rollout_dir`` (``${trainer.default_local_dir}/rollouts``) the relative folder
``None/rollouts``; ``pasr check`` printed "pasr_verl.rollout_dir=None/rollouts: writable" and a run
would have dumped there. It is a config error naming the null key."""

from __future__ import annotations

import pytest

from recipe.pasr_config import ConfigError
from tests.verl_compose import _compose


def test_a_null_run_folder_is_named_not_written_as_none():
    from recipe.verl_engine.config import engine_config

    with pytest.raises(ConfigError) as err:
        engine_config(_compose(["trainer.default_local_dir=null"]))
    text = str(err.value)
    assert "trainer.default_local_dir is null" in text and "pasr_verl.rollout_dir" in text and "'None/rollouts'" in text
    # the dumps' own null (no dumps) and a folder of its own stay valid with a null run folder
    assert engine_config(_compose(["trainer.default_local_dir=null", "pasr_verl.rollout_dir=null"])).rollout_dir is None
    assert engine_config(_compose(["trainer.default_local_dir=null", "pasr_verl.rollout_dir=/d"])).rollout_dir == "/d"
    assert engine_config(_compose(["trainer.default_local_dir=/ck"])).rollout_dir == "/ck/rollouts"


def test_pasr_check_says_so_instead_of_none_rollouts_ok(run_cli):
    rc, out, err = run_cli(["check", "trainer.default_local_dir=null"])
    assert rc != 0 and "Traceback" not in out + err
    assert "None/rollouts:" not in out and "None/rollouts ok" not in out
    assert any(
        line.strip().startswith("FAIL") and "trainer.default_local_dir is null" in line for line in out.splitlines()
    )
