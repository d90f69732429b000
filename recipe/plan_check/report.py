"""The report ``pasr check`` prints: one line a finding (``ok``, ``FAIL``, ``note``), then the plan."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Report:
    lines: list[tuple[str, str, str]] = field(default_factory=list)  # (status, topic, text)
    plan: list[tuple[str, str]] = field(default_factory=list)

    def ok(self, topic: str, text: str) -> None:
        self.lines.append(("ok", topic, text))

    def fail(self, topic: str, text: str) -> None:
        self.lines.append(("FAIL", topic, text))

    def note(self, topic: str, text: str) -> None:
        self.lines.append(("note", topic, text))

    @property
    def problems(self) -> int:
        return sum(status == "FAIL" for status, _, _ in self.lines)

    def failed(self, topic: str) -> bool:
        """Whether a FAIL line of ``topic`` was written (the checks that build on it then wait)."""
        return any(status == "FAIL" and t == topic for status, t, _ in self.lines)

    def render(self) -> str:
        out = [f"  {status:<5} {topic:<9} {text}" for status, topic, text in self.lines]
        if self.plan:
            out.append("plan:")
            out += [f"  {key:<16} {text}" for key, text in self.plan]
        n = self.problems
        out.append(
            f"pasr check: {n} problem(s): fix the FAIL line(s) before GPUs are held"
            if n
            else "pasr check: no problem found"
        )
        return "\n".join(out)


def short(text: str, width: int) -> str:
    one = " ".join(str(text).split())
    return one if len(one) <= width else one[: width - 3] + "..."


def seconds(s: float) -> str:
    if s >= 3600:
        return f"{s / 3600:.1f} h"
    if s >= 120:
        return f"{s / 60:.0f} min"
    return f"{s:.0f} s"
