"""When ``gpu_check --part learn`` stops verl: decided from what the command measures as it goes.

Why: the check compares verl's last checkpoint with the local engine's checkpoint of the same
step, each evaluated, and all of it must end inside one device command. A stop time fixed in
advance (the budget less a reserve planned from the last loan) failed on a fresh H200 on
2026-11-28 (commit e097103): verl's start-up took 254 s, not the 199 s of the loan before; the
local engine stepped in 13-23 s against verl's 6.85 s; verl was stopped after step 10 while the
local engine had checkpointed step 9, and the command's outer ``timeout`` ended the check as it
waited, so its JSON had no local row and no parity test.

Here the stop is re-decided every poll from this run's own numbers. verl's recipe stops after
the step in flight (SIGTERM: that step finishes and is checkpointed), so letting verl run on
means it will end step ``s + 2`` (``s`` its last logged step) rather than ``s + 1``. That is
allowed only while both engines can still finish with it:

* verl: step ``s + 2`` ends at ``t_s + 2 d`` (``d`` its measured step time), then its
  checkpoint, the merge and its evaluation (``verl_tail_s``) before the end;
* the local engine: it reaches ``s + 2`` at its own measured pace (its checkpoints as they
  appear, its remaining steps counted ``local_slack`` times slower: it shares the machine with the
  evaluations after verl's stop; before it has two, ``local_ratio`` times verl's step after
  ``local_start_s``), then its evaluation (``local_eval_s``) before the end.

The first rule that fails stops verl now, so the last step is the latest both engines can
evaluate. Before verl's first step the only rule is that a first step (``first_step_s``) and
its tail still fit; a run stopped before then is reported as stopped before its first
checkpoint, not as rows of ``None``. Everything here is arithmetic on timestamps (no clocks, no
processes), so the CPU tests play a 250-s start-up and a slow local engine in milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

# The priors, each replaced by this run's measurement as soon as there is one. H200 2026-11-28:
# verl's first step 42.8 s (generation 37 s); the local engine 13-23 s a step against verl's 6.85
# (about 3x, hence the conservative ratio); its start (python, model, the warm-up's weights) about
# 30 s before its first step; its evaluation of 300 problems 30.4 s beside verl's.
FIRST_STEP_S = 45.0
LOCAL_RATIO = 3.0
LOCAL_START_S = 30.0
# the local engine's remaining steps, at its measured pace, are counted this much slower: once verl
# stops, it shares the machine with verl's merge and evaluation (a CPU rehearsal beside other work:
# its 1.5-s steps took 3 s then, and it reached verl's step 10 at 8). The prior needs none: it is
# already three times verl's step.
LOCAL_SLACK = 1.2


@dataclass
class Pace:
    """One engine's steps as the check saw them end: ``ends[step]`` = when (monotonic) it was
    logged or its checkpoint appeared; ``start`` = when the process started."""

    start: float
    ends: dict[int, float] = field(default_factory=dict)

    def last(self) -> tuple[int, float]:
        """The last step seen and when; ``(0, start)`` before the first."""
        if not self.ends:
            return 0, self.start
        s = max(self.ends)
        return s, self.ends[s]

    def step_s(self, recent: int = 5) -> float | None:
        """The mean time between consecutive steps over the last ``recent`` intervals (the first
        step, which pays the start-up, is not an interval); None with fewer than two steps."""
        steps = sorted(self.ends)
        gaps = [(self.ends[b] - self.ends[a]) / (b - a) for a, b in zip(steps, steps[1:])][-recent:]
        return sum(gaps) / len(gaps) if gaps else None

    def see_checkpoints(self, folder: Path, now: float) -> None:
        """Record each ``step_*`` checkpoint folder of ``folder`` the first time it is seen."""
        from recipe.step_files import step_of

        if not folder.is_dir():
            return
        for p in folder.glob("step_*"):
            s = step_of(p.name)
            if s is not None and p.is_dir() and s not in self.ends:
                self.ends[s] = now


@dataclass
class LearnDeadline:
    """The stop rule above. ``end`` is the command's own end (monotonic): results written by then."""

    end: float
    verl_tail_s: float  # verl's last checkpoint, the merge and its evaluation
    local_eval_s: float  # the local engine's evaluation, its start included
    first_step_s: float = FIRST_STEP_S
    local_ratio: float = LOCAL_RATIO
    local_start_s: float = LOCAL_START_S
    local_slack: float = LOCAL_SLACK

    def local_reaches(self, step: int, verl_step_s: float, local: Pace | None, now: float) -> float:
        """When the local engine will have checkpointed ``step``, at its measured pace."""
        if local is None:  # not started yet: it starts now at the earliest
            return now + self.local_start_s + step * verl_step_s * self.local_ratio
        s, t = local.last()
        if s >= step:
            return t
        d = local.step_s()
        if d is None:
            d = verl_step_s * self.local_ratio
            if s == 0:  # its start-up still going: at least the prior from its start, or from now
                return max(local.start + self.local_start_s, now) + step * d
            return max(t + (step - s) * d, now)
        return max(t + (step - s) * d * self.local_slack, now)

    def stop_now(self, now: float, verl: Pace, local: Pace | None, max_steps: int) -> str | None:
        """Why verl must be stopped now (during the step in flight), or None to let it run on."""
        s, t = verl.last()
        if s == 0:
            if now + self.first_step_s + self.verl_tail_s > self.end:
                return f"no time left for a first step ({self.first_step_s:.0f} s) and its evaluation"
            return None
        if s + 1 >= max_steps:
            return None  # the step in flight is the last asked: verl ends on its own
        d = verl.step_s() or max(now - t, 1.0)  # one step seen: the in-flight one's time so far at least
        nxt, ends_at = s + 2, max(t + 2 * d, now + d)
        if ends_at + self.verl_tail_s > self.end:
            return (
                f"verl's step {nxt} would end at {self._left(ends_at)} with {self.verl_tail_s:.0f} s of "
                "checkpoint, merge and evaluation after it"
            )
        reach = self.local_reaches(nxt, d, local, now)
        if local is not None and reach + self.local_eval_s > self.end:
            return (
                f"the local engine would reach step {nxt} at {self._left(reach)} (pace "
                f"{local.step_s() or d * self.local_ratio:.1f} s a step) with its {self.local_eval_s:.0f}-s "
                "evaluation after it"
            )
        return None

    def _left(self, t: float) -> str:
        return f"{self.end - t:+.0f} s before the end" if t <= self.end else f"{t - self.end:.0f} s past the end"
