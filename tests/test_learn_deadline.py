"""gpu_check --part learn's stop rule (benchmarks/learn_deadline.py), played on simulated clocks:
a fresh H200's 250-s start-up and a local engine three times slower than verl must still end with
both engines evaluated at the same step inside the command, where the fixed reserve of the
2026-11-28 loan did not."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from benchmarks.learn_deadline import LearnDeadline, Pace


@dataclass
class Machine:
    """The true timeline of one command (seconds from its start): verl's start-up and step time,
    when the local engine starts (with verl's loop), its start-up and its step time."""

    verl_start_s: float = 250.0
    verl_step_s: float = 6.85
    verl_first_step_s: float = 42.8
    local_start_s: float = 25.0
    local_step_s: float = 18.0
    steps: int = 40

    def verl_end(self, step: int) -> float:
        return self.verl_start_s + self.verl_first_step_s + (step - 1) * self.verl_step_s

    def local_end(self, step: int) -> float:
        return self.verl_start_s + self.local_start_s + step * self.local_step_s


def play(m: Machine, rule: LearnDeadline, poll_s: float = 0.5) -> tuple[int, str | None, float]:
    """Poll the rule as ``drive_verl`` does; the stop lands in the step in flight, which verl
    finishes. Returns verl's last step, why it was stopped, and when that step ended."""
    verl, local = Pace(0.0), Pace(m.verl_start_s)
    now = 0.0
    while True:
        verl.ends = {s: m.verl_end(s) for s in range(1, m.steps + 1) if m.verl_end(s) <= now}
        local.ends = {s: m.local_end(s) for s in range(1, m.steps + 1) if m.local_end(s) <= now}
        done = max(verl.ends, default=0)
        if done == m.steps:
            return done, None, m.verl_end(done)
        why = rule.stop_now(now, verl, local if now >= m.verl_start_s else None, m.steps)
        if why:
            last = done + 1 if done else 0  # the step in flight; before the first: none
            if last and m.verl_end(last) > rule.end:
                last = done  # not reached in time: its checkpoint is the one before
            return last, why, m.verl_end(last) if last else now
        now += poll_s


def rule(budget_s: float = 430.0) -> LearnDeadline:
    return LearnDeadline(end=budget_s, verl_tail_s=75.0, local_eval_s=35.0)


def test_a_slow_start_and_a_slow_local_engine_still_end_at_one_step_both_evaluated():
    m = Machine()  # the fresh H200 of 2026-11-28: 250 s of start-up, the local engine 18 s a step
    r = rule()
    k, why, verl_done = play(m, r)
    assert why and "local engine" in why  # the local engine's pace is what decided
    assert k >= 2
    assert verl_done + r.verl_tail_s <= r.end  # verl checkpoints, merges and evaluates in time
    assert m.local_end(k) + r.local_eval_s <= r.end  # the local engine reaches k and evaluates in time
    # and not stopped much early: at the true pace, two more steps would not have fitted (the rule
    # counts the local engine's remaining steps 1.2x slower, for the machine it shares after the stop)
    assert m.local_end(k + 2) + r.local_eval_s > r.end or m.verl_end(k + 2) + r.verl_tail_s > r.end


def test_the_fixed_reserve_of_the_last_loan_left_the_local_engine_behind():
    """What the rule replaces: SIGTERM at the budget less 75 s. On the same machine verl's step
    then is one the local engine cannot reach and evaluate before the end."""
    m = Machine()
    fixed = max(s for s in range(1, m.steps + 1) if m.verl_end(s - 1) <= 430.0 - 75.0)
    k, _, _ = play(m, rule())
    assert fixed > k
    assert m.local_end(fixed) + 35.0 > 430.0


@pytest.mark.parametrize("local_step_s", [3.0, 7.0, 25.0])
def test_the_stop_follows_the_local_engines_measured_pace(local_step_s):
    m = Machine(verl_start_s=120.0, local_step_s=local_step_s)
    r = rule()
    k, _, verl_done = play(m, r)
    assert verl_done + r.verl_tail_s <= r.end and m.local_end(k) + r.local_eval_s <= r.end
    fits_more = m.local_end(k + 3) + r.local_eval_s <= r.end and m.verl_end(k + 1) + r.verl_tail_s <= r.end
    assert not fits_more or k == m.steps


def test_verl_ends_on_its_own_when_every_step_fits():
    m = Machine(verl_start_s=60.0, local_step_s=5.0, steps=6)
    k, why, _ = play(m, rule())
    assert (k, why) == (6, None)


def test_a_start_up_that_leaves_no_time_for_a_first_step_is_stopped_before_it():
    m = Machine(verl_start_s=400.0)
    k, why, _ = play(m, rule())
    assert k == 0 and "first step" in why


def test_pace_reads_checkpoints_once_and_averages_recent_steps(tmp_path):
    pace = Pace(100.0)
    assert pace.last() == (0, 100.0) and pace.step_s() is None
    (tmp_path / "step_000001").mkdir()
    pace.see_checkpoints(tmp_path, 130.0)
    (tmp_path / "step_000002").mkdir()
    (tmp_path / "step_000003.tmp").mkdir()  # a checkpoint still being written is not a step
    pace.see_checkpoints(tmp_path, 150.0)
    pace.see_checkpoints(tmp_path, 170.0)  # seen again: its time stays the first sighting's
    assert pace.ends == {1: 130.0, 2: 150.0} and pace.step_s() == 20.0
    pace.ends[5] = 210.0  # steps 3 and 4 never seen: the gap counts as 20 s a step
    assert pace.step_s() == pytest.approx(20.0) and pace.last() == (5, 210.0)


def test_local_reach_uses_the_prior_only_until_it_has_two_steps():
    r = rule()
    fresh = Pace(100.0)
    prior = 5.0 * r.local_ratio
    assert r.local_reaches(4, 5.0, fresh, now=110.0) == 100.0 + r.local_start_s + 4 * prior
    measured = Pace(100.0, {1: 140.0, 2: 150.0})  # 10 s a step, faster than the prior's 15
    assert r.local_reaches(4, 5.0, measured, now=151.0) == 150.0 + 2 * 10.0 * r.local_slack
    assert r.local_reaches(2, 5.0, measured, now=151.0) == 150.0  # already there
