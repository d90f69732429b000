"""A subprocess watched line by line: its output timestamped into a log, verl's console step lines
(``step:N - key:value - ...``) parsed as they come, and signals sent the way a user sends them.

``benchmarks.gpu_check`` runs the verl driver and the local-engine stages this way: the timestamps
are where its start-up timeline comes from, the step lines where its step timings and training
metrics come from, and ``on_step`` is how a SIGTERM lands inside a chosen step.
What the log cannot hold (the signals sent, the exit code) goes to a sidecar ``<log>.events.json``
as it happens, so :meth:`WatchedRun.load` rebuilds the run from its files alone: a check whose
command was killed by a machine's time limit still reports what it did.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STEP_LINE = re.compile(r"\bstep:(\d+) - (.*)$")
NUMPY_REPR = re.compile(r"^np\.\w+\((.*)\)$")
LOG_LINE = re.compile(r"^\s*(\d+\.\d) (.*)$")


def parse_step_line(line: str) -> tuple[int, dict[str, float]] | None:
    """``(step, metrics)`` of verl's console-logger line (``step:N - key:value - ...``), or None."""
    m = STEP_LINE.search(line)
    if not m:
        return None
    metrics = {}
    for part in m.group(2).split(" - "):
        key, sep, value = part.rpartition(":")
        if not sep:
            continue
        value = NUMPY_REPR.sub(r"\1", value.strip())  # numpy 2 scalars print as np.float64(0.5)
        try:
            metrics[key.strip()] = float(value)
        except ValueError:
            continue
    return int(m.group(1)), metrics


@dataclass
class WatchedRun:
    """One subprocess, its output timestamped line by line into ``log`` and kept for parsing."""

    name: str
    cmd: list[str]
    log: Path
    t0: float = field(default_factory=time.monotonic)
    lines: list[tuple[float, str]] = field(default_factory=list)
    steps: dict[int, tuple[float, dict]] = field(default_factory=dict)
    proc: subprocess.Popen | None = None
    signals: list[tuple[float, str]] = field(default_factory=list)
    on_step: object = None  # callable(run, step) called from the reader thread
    rc: int | None = None  # the exit code, once wait() has returned
    env: dict = field(default_factory=dict)  # set in the process's environment, over this one's

    def start(self) -> WatchedRun:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        # the checkout first: a driver given as a file must import this recipe, not another `recipe`
        path = os.pathsep.join(x for x in (str(ROOT), os.environ.get("PYTHONPATH", "")) if x)
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": path, **self.env}
        self.t0 = time.monotonic()
        self._save_events()
        self.proc = subprocess.Popen(
            self.cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            bufsize=1,
            cwd=ROOT,
            env=env,
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, name=f"read-{self.name}", daemon=True)
        self._reader.start()
        return self

    @property
    def events_path(self) -> Path:
        return self.log.with_name(self.log.name + ".events.json")

    def _save_events(self) -> None:
        self.events_path.write_text(json.dumps({"cmd": self.cmd, "signals": self.signals, "rc": self.rc}) + "\n")

    @classmethod
    def load(cls, log: Path, name: str | None = None) -> WatchedRun:
        """The run as its files left it: the timestamped lines, the step lines parsed from them, and
        the signals and exit code of the sidecar (none and ``None`` where it is missing)."""
        run = cls(name or log.stem, [], log)
        if log.is_file():
            for raw in log.read_text(errors="replace").splitlines():
                m = LOG_LINE.match(raw)
                if m:
                    run._take(float(m.group(1)), m.group(2))
        if run.events_path.is_file():
            try:
                events = json.loads(run.events_path.read_text())
            except ValueError as exc:  # cut off mid-write: --report names it in its one line
                raise ValueError(f"{run.events_path}: not readable JSON ({exc})") from None
            if not isinstance(events, dict):
                raise ValueError(f"{run.events_path}: holds a JSON {type(events).__name__}, not the sidecar's object")
            run.cmd, run.rc = events.get("cmd", []), events.get("rc")
            run.signals = [tuple(s) for s in events.get("signals", [])]
        return run

    def _take(self, t: float, line: str) -> tuple[int, dict] | None:
        self.lines.append((t, line))
        parsed = parse_step_line(line)
        if parsed and parsed[0] not in self.steps:
            self.steps[parsed[0]] = (t, parsed[1])
            return parsed
        return None

    def _read(self) -> None:
        with open(self.log, "w") as f:
            for line in self.proc.stdout:
                t = time.monotonic() - self.t0
                line = line.rstrip("\n")
                f.write(f"{t:7.1f} {line}\n")
                f.flush()
                parsed = self._take(round(t, 1), line)
                if parsed and self.on_step:
                    self.on_step(self, parsed[0])

    def signal(self, sig: int = signal.SIGTERM) -> None:
        """Signal the driver only (a user's Ctrl-C or ``kill PID``), not its process group."""
        if self.proc and self.proc.poll() is None:
            in_flight = max(self.steps, default=0) + 1  # the step running when the signal is sent
            self.signals.append((round(time.monotonic() - self.t0, 1), signal.Signals(sig).name, in_flight))
            self._save_events()
            self.proc.send_signal(sig)

    def kill_group(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.signals.append((round(time.monotonic() - self.t0, 1), "SIGKILL", max(self.steps, default=0) + 1))
            self._save_events()
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def wait(self, deadline: float, grace_s: float = 90.0) -> int:
        """Wait until ``deadline`` (monotonic); then SIGTERM (a checkpoint) and, ``grace_s`` later,
        SIGKILL. Returns the exit code (also kept as ``rc``)."""
        while self.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        if self.proc.poll() is None:
            self.signal(signal.SIGTERM)
            end = time.monotonic() + grace_s
            while self.proc.poll() is None and time.monotonic() < end:
                time.sleep(0.2)
            self.kill_group()
        self.rc = self.proc.wait()
        self._reader.join(timeout=10)
        self._save_events()
        return self.rc

    @property
    def wall_s(self) -> float:
        return self.lines[-1][0] if self.lines else 0.0

    def first(self, pattern: re.Pattern) -> float | None:
        return next((t for t, line in self.lines if pattern.search(line)), None)

    def grep(self, text: str) -> bool:
        return any(text in line for _, line in self.lines)


def stop_during(step: int, delay_s: float):
    """An ``on_step`` hook: once step ``step - 1`` is logged (step ``step`` has begun), SIGTERM the
    driver ``delay_s`` later, inside step ``step``."""

    def hook(run: WatchedRun, logged: int) -> None:
        if logged == step - 1 and not run.signals:
            threading.Timer(delay_s, run.signal, args=(signal.SIGTERM,)).start()

    return hook


def run_to_end(name: str, cmd: list[str], log: Path, deadline: float) -> WatchedRun:
    run = WatchedRun(name, cmd, log).start()
    run.wait(deadline)
    return run
