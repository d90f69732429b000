"""Secrets out of judge error text.

A judge error is kept in every rollout record (``judge_error``, dumped to ``rollouts/*.jsonl``
and ``eval/*.jsonl``) and quoted in logs and stop messages, and it quotes what the server said.
A server (or a proxy in front of it) whose error page echoes the request's headers would put
the judge's API key on disk. :func:`redact_secrets` is the one place that removes it; it is
applied where judge errors are made (:class:`~rewards.judges.base.JudgeResult.failed`, and the
OpenAI judge before it cuts a server's reply to an excerpt, so that no cut leaves half a key).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

REDACTED = "[REDACTED]"

# A configured secret shorter than this is not looked for by value: vLLM's placeholder key
# ("EMPTY") or a one-character key would otherwise blank out ordinary words. Header-shaped
# values are still redacted by the patterns below, whatever their length.
MIN_SECRET_LENGTH = 6

# Header-like fields whose value is a credential. ``Authorization: <scheme> <credentials>``
# (``"authorization": "Bearer ..."`` in a JSON echo): the value runs to the end of the line, a
# quote, a comma or a closing brace, since credentials may hold spaces (Digest). ``x-api-key:
# ...``, ``api_key=...``: one token.
_AUTH_FIELD = re.compile(r"""(?P<name>\b(?:proxy-)?authorization)(?P<sep>["']?\s*[:=]\s*["']?)[^"'\r\n,}]+""", re.IGNORECASE)
_KEY_FIELD = re.compile(r"""(?P<name>\b(?:x-)?api[-_]?key)(?P<sep>["']?\s*[:=]\s*["']?)[^\s"',;}]+""", re.IGNORECASE)
# ``Bearer <token>`` anywhere (a token68: letters, digits and -._~+/ with = padding).
_BEARER = re.compile(r"\b(?P<name>bearer)\s+(?!\[REDACTED\])[A-Za-z0-9\-._~+/]+=*", re.IGNORECASE)
# OpenAI-style keys (``sk-...``, ``sk-proj-...``), wherever they appear.
_SK_KEY = re.compile(r"\bsk-[A-Za-z0-9_\-]{12,}")


def redact_secrets(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with every credential replaced by ``[REDACTED]``: each of ``secrets`` (the
    configured key's value) wherever it appears, then ``Authorization``/API-key field values,
    ``Bearer`` tokens and ``sk-`` keys. Other text is left as it was, and redacting twice
    changes nothing."""
    for secret in sorted({s for s in secrets if s and len(s) >= MIN_SECRET_LENGTH}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    for field in (_AUTH_FIELD, _KEY_FIELD):
        text = field.sub(lambda m: f"{m['name']}{m['sep']}{REDACTED}", text)
    text = _BEARER.sub(lambda m: f"{m['name']} {REDACTED}", text)
    return _SK_KEY.sub(REDACTED, text)
