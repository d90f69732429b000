"""The Markdown pieces every section of ``pasr stats``' ``report.md`` is written with: a table, a
rate or a number in a cell (``–`` for nothing to count), escaped text and inline code, a response
as a blockquote with its tags highlighted, and the evenly thinned rows of a long per-step table.
Here once, so that every section (:mod:`eval.stats.report` and the ``report_*`` modules it calls)
writes them alike.
"""

from __future__ import annotations

import re

from rewards.format import TAG_NAMES

MAX_TREND_ROWS = 25
EXAMPLE_REPORT_CHARS = 1500

_TAG = re.compile(rf"</?(?:{'|'.join(TAG_NAMES)})>")
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|#])")


def fmt_rate(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:.1f}%"


def fmt_num(v: float | None, digits: int = 1) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def escape(text: str) -> str:
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", text)


def code(text: str) -> str:
    """Inline code for a table cell (pipes escaped, backticks replaced)."""
    if not text.strip():
        return "*(blank)*"
    return "`" + text.replace("`", "'").replace("|", "\\|") + "`"


def highlight(response: str, limit: int = EXAMPLE_REPORT_CHARS) -> str:
    """A response as a Markdown blockquote: text escaped, tags shown as code, refine tags bold."""
    clipped = response if len(response) <= limit else response[:limit] + " …"
    parts = []
    pos = 0
    for m in _TAG.finditer(clipped):
        parts.append(escape(clipped[pos : m.start()]))
        tag = m.group(0)
        parts.append(f"**`{tag}`**" if "refine" in tag else f"`{tag}`")
        pos = m.end()
    parts.append(escape(clipped[pos:]))
    body = "".join(parts)
    return "\n".join("> " + line + "  " if line.strip() else ">" for line in body.splitlines() or [""])


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def shown_steps(n: int, lines: list[str]) -> list[int]:
    """Indices of the rows of an ``n``-step table shown in the report (at most
    :data:`MAX_TREND_ROWS`, spread evenly); says so in ``lines`` when some are left out."""
    if n <= MAX_TREND_ROWS:
        return list(range(n))
    idx = sorted({round(i * (n - 1) / (MAX_TREND_ROWS - 1)) for i in range(MAX_TREND_ROWS)})
    lines.append(f"{n} steps; {len(idx)} shown (all in stats.json).")
    lines.append("")
    return idx
