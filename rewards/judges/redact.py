"""Secrets out of judge error text.

A judge error is kept in every rollout record (``judge_error``, dumped to ``rollouts/*.jsonl``
and ``eval/*.jsonl``) and quoted in logs and stop messages, and it quotes what the server said.
A server (or a proxy in front of it) whose error page echoes the request's headers would put
the judge's API key on disk. :func:`redact_secrets` is the one place that removes it; it is
applied where judge errors are made (:class:`~rewards.judges.base.JudgeResult.failed`, and the
OpenAI judge before it cuts a server's reply to an excerpt, so that no cut leaves half a key).

A URL may carry credentials too (``http://user:password@judge:8000/v1`` in
``pasr.judge.base_url``): :func:`redact_url` replaces its user information, and
:func:`redact_secrets` does so in any text. Whatever writes a config or a URL to disk (a run's
``config.yaml``, the verl engine's printed config, stop messages) writes it redacted.
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
_AUTH_FIELD = re.compile(
    r"""(?P<name>\b(?:proxy-)?authorization)(?P<sep>["']?\s*[:=]\s*["']?)[^"'\r\n,}]+""", re.IGNORECASE
)
_KEY_FIELD = re.compile(r"""(?P<name>\b(?:x-)?api[-_]?key)(?P<sep>["']?\s*[:=]\s*["']?)[^\s"',;}]+""", re.IGNORECASE)
# ``Bearer <token>`` anywhere (a token68: letters, digits and -._~+/ with = padding).
_BEARER = re.compile(r"\b(?P<name>bearer)\s+(?!\[REDACTED\])[A-Za-z0-9\-._~+/]+=*", re.IGNORECASE)
# OpenAI-style keys (``sk-...``, ``sk-proj-...``), wherever they appear.
_SK_KEY = re.compile(r"\bsk-[A-Za-z0-9_\-]{12,}")
# The user information of a URL (``scheme://user:password@host``): up to the last ``@`` before
# the path, as URL parsers read it (an unescaped ``@`` in a password included).
_URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)[^/?#\s\"'<>]+@")


def redact_url(url: str) -> str:
    """``url`` with its user information (``user:password@``) replaced by ``[REDACTED]@``;
    a URL without any is returned as it is."""
    return _URL_USERINFO.sub(lambda m: f"{m['scheme']}{REDACTED}@", url)


def redact_urls_in(value):
    """``value`` (a config as plain containers: dicts, lists, tuples) with :func:`redact_url`
    applied to every string in it; other values as they are. For a whole config handed to a
    tracker (wandb, mlflow) that writes it to disk and to its server."""
    if isinstance(value, dict):
        return {k: redact_urls_in(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(redact_urls_in(v) for v in value)
    return redact_url(value) if isinstance(value, str) else value


def has_redacted_credentials(url: str | None) -> bool:
    """Whether ``url``'s credentials were redacted (a run's saved config holds it so): it cannot
    authenticate, and must be given again with them."""
    return bool(url) and f"://{REDACTED}@" in url


def redact_secrets(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with every credential replaced by ``[REDACTED]``: each of ``secrets`` (the
    configured key's value) wherever it appears, then ``Authorization``/API-key field values,
    ``Bearer`` tokens, ``sk-`` keys and the user information of URLs. Other text is left as it
    was, and redacting twice changes nothing."""
    for secret in sorted({s for s in secrets if s and len(s) >= MIN_SECRET_LENGTH}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    for field in (_AUTH_FIELD, _KEY_FIELD):
        text = field.sub(lambda m: f"{m['name']}{m['sep']}{REDACTED}", text)
    text = _BEARER.sub(lambda m: f"{m['name']} {REDACTED}", text)
    return redact_url(_SK_KEY.sub(REDACTED, text))
