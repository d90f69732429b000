"""The verl engine's refine-term warning (issue 61): three PASR steps through the rollout wrapper
(verl's own agent-loop code, scripted token ids) in which every refine rollout refines print the
one-line warning once; a script that mixes refining and non-refining rollouts prints none."""

from __future__ import annotations

import pytest

from tests import verl_scripted_rollout as scripted
from tests.verl_scripted_rollout import (  # noqa: F401  (fixtures)
    ScriptedRollout,
    _manager,
    _train_gen_batch,
    gen_batch,
    prompts,
    tokenizer,
    verl_mods,
)

R, N, P = scripted.R, scripted.N, scripted.P
ALL_REFINING = {  # every refine rollout refines; accuracies vary within each group
    0: ([R(0), R(1), R(0)], [P(0), P(0), P(1)]),
    1: ([R(2), R(5), R(5)], [P(2), P(7), P(7)]),
    2: ([R(4), R(9), R(4)], [P(4), P(4), P(9)]),
}


@pytest.mark.parametrize("all_refining", [True, False], ids=["all-refining", "mixed"])
def test_the_verl_rollout_warns_when_the_refine_term_is_dead(
    all_refining, gen_batch, tokenizer, prompts, verl_mods, tmp_path, monkeypatch, capsys
):
    if all_refining:
        monkeypatch.setattr(scripted, "SCRIPT", ALL_REFINING)
    inner = ScriptedRollout(tokenizer, prompts, verl_mods.agent_loop)
    manager = _manager(inner, tokenizer, prompts, tmp_path, pasr={"prefill_think": True})
    try:
        live = []
        for step in (1, 2, 3):
            manager.generate_sequences(_train_gen_batch(gen_batch, 3, step=step))
            live.append(manager.pop_metrics()["pasr/refine_term/live_groups"])
    finally:
        manager.close()
    err = capsys.readouterr().err
    if all_refining:
        assert live == [0.0, 0.0, 0.0]
        assert err.count("PASR WARNING steps 1-3: the refine term changed the advantages") == 1
    else:
        assert all(x > 0 for x in live) and "the refine term changed" not in err
