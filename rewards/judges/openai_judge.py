"""The LLM judge: any OpenAI-compatible chat-completions endpoint (``vllm serve`` in production).

One judge request per (question, gold, answer): the judge template (``prompts/templates``) is
filled in, sent as a single user message at temperature 0, and the reply is read with
:func:`rewards.judges.judge_reply.parse_score` (the reply's reading lives there; the counters and
the cache in :mod:`rewards.judges.score_cache`).

Transport: ``aiohttp.ClientSession``, not ``openai.AsyncOpenAI`` nor a bare
``httpx.AsyncClient``. The judge needs one POST and one field of the reply, and it must own
timeouts and retries (an SDK that retries inside makes retry counts and the time bound
unknowable). The OpenAI SDK sends through httpx, and httpx 0.28 / httpcore 1.0 is slow at
high concurrency: against the fake server (50 ms per request, loopback) it reached about
110-120 req/s with 64 requests in flight (less than with 32), where aiohttp reached about
1000 req/s with the same semaphore. aiohttp is already installed as a dependency of
``ray[default]``.

Failure policy (see ``rewards/judges/base.py``): transport errors, timeouts, HTTP 408/409/425/
429/5xx and replies with no readable score (or no message text: a content that is null, a list
or a number is a bad reply, never read through ``str()``) are retried with exponential backoff; other 4xx
(wrong model name, bad request) fail at once since repeating them cannot help. After the last
attempt the result is ``JudgeResult.failed(reason)`` and ``stats.errors`` counts it; a failure
is never turned into a score of 0. A reply body that does not decode is a bad reply (retried),
and so is one over ``max_reply_bytes`` (:data:`MAX_REPLY_BYTES`, 1 MiB: a verdict is a few
hundred bytes), which is read no further: at most ``concurrency`` such bodies are in memory at
once, whatever a server sends. The reason never holds the API key nor the URL's credentials
(:mod:`rewards.judges.redact`): it is written to disk. An answer of ``None`` (the response gave
none) or an empty answer is scored 0.0 without a request, as the rule judge does.

Credentials in the URL (``http://user:password@judge:8000/v1``) are sent as HTTP Basic
authentication (instead of the bearer key: a request has one ``Authorization`` header) and
kept out of the URL the judge shows and of every error.

Cache: successful scores are kept in memory keyed by (model, prompt version, question, gold,
answer), and optionally appended to a JSONL file that is loaded at start. Identical requests
that are in flight at the same moment (a GRPO group often repeats an answer) share one request.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import threading
import weakref
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import yarl

from prompts import DEFAULT_JUDGE, load_prompt, prompt_version
from rewards.judges.base import JudgeItem, JudgeResult
from rewards.judges.judge_reply import BadReply, message_content, parse_score
from rewards.judges.redact import has_redacted_credentials, redact_secrets, redact_url
from rewards.judges.score_cache import JudgeStats, ScoreCache, cache_key

DUMMY_API_KEY = "EMPTY"  # vLLM accepts any key unless started with --api-key
_RETRYABLE_STATUS = frozenset({408, 409, 425, 429})
# The largest reply body read: a chat completion holding a verdict is a few hundred bytes (a few
# KiB with reasoning); a server streaming megabytes (four 50 MB replies held 868 MB before this
# bound) is answering something else.
MAX_REPLY_BYTES = 1 << 20
_READ_CHUNK = 64 * 1024


class ReplyTooLarge(Exception):
    """A reply body over the judge's ``max_reply_bytes``: a bad reply (retried, then a judge error)."""


@dataclass(frozen=True)
class JudgeTrial:
    """One judge request seen whole (:meth:`OpenAIJudge.trial`): what was sent, what came back,
    the score read from it (None with ``error`` saying why: no reply, or none readable)."""

    prompt: str
    reply: str | None
    score: float | None
    error: str | None


# ---------------------------------------------------------------------------------------------
# Templates


def check_template(template: str) -> str:
    """``template`` when it can judge (it holds ``{gold}`` and ``{answer}``; ``{question}`` is
    optional), else ValueError naming the placeholder it lacks."""
    for placeholder in ("{gold}", "{answer}"):
        if placeholder not in template:
            raise ValueError(f"judge template has no {placeholder} placeholder")
    return template


def fill_template(template: str, question: str, gold: str, answer: str) -> str:
    """The judge prompt. Plain replacement, not ``str.format``: templates and answers may hold
    LaTeX braces."""
    return template.replace("{question}", question).replace("{gold}", gold).replace("{answer}", answer)


# ---------------------------------------------------------------------------------------------
# The judge


@dataclass
class _LoopState:
    """What must belong to one event loop: the semaphore, the requests in flight and the HTTP
    session. ``score_sync`` runs a fresh loop per call, and asyncio objects cannot cross loops.
    The session lives while at least one ``score``/``score_many`` call runs on the loop and is
    closed by the last one out, so no session outlives its loop."""

    semaphore: asyncio.Semaphore
    inflight: dict[str, asyncio.Future[JudgeResult]] = field(default_factory=dict)
    session: aiohttp.ClientSession | None = None
    users: int = 0


class OpenAIJudge:
    """LLM judge over an OpenAI-compatible ``/chat/completions`` endpoint.

    ``base_url`` is the API root including ``/v1`` (``http://judge:8000/v1`` for
    ``vllm serve``). ``template`` is the judge prompt text with ``{question}``, ``{gold}``
    and ``{answer}``; its content hash is part of every cache key. At most ``concurrency``
    requests are in flight per event loop; each attempt is bounded by ``timeout_s`` in total;
    an item gets ``1 + retries`` attempts with backoff ``backoff_s * 2**k`` (k = 0, 1, ...,
    jittered up to +25%, capped at ``max_backoff_s``) between them, sleeping outside the
    concurrency slot. ``max_tokens`` and ``extra_body`` (e.g. vLLM's
    ``{"chat_template_kwargs": {"enable_thinking": False}}``) go into every request body. A
    reply body over ``max_reply_bytes`` is a bad reply (retried, then a judge error).
    """

    name = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        template: str | None = None,
        api_key: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        concurrency: int = 64,
        timeout_s: float = 30.0,
        retries: int = 3,
        backoff_s: float = 0.5,
        max_backoff_s: float = 30.0,
        cache_path: str | os.PathLike[str] | None = None,
        max_tokens: int | None = None,
        extra_body: dict | None = None,
        max_reply_bytes: int = MAX_REPLY_BYTES,
    ) -> None:
        if not base_url or not model:
            raise ValueError("OpenAIJudge needs base_url and model")
        finite = math.isfinite(timeout_s) and math.isfinite(backoff_s) and math.isfinite(max_backoff_s)
        if not finite or concurrency < 1 or retries < 0 or timeout_s <= 0 or backoff_s < 0 or max_reply_bytes < 1:
            raise ValueError(
                "OpenAIJudge: concurrency >= 1, retries >= 0, timeout_s > 0, backoff_s >= 0, max_reply_bytes >= 1 "
                f"(timeouts finite), got concurrency={concurrency} retries={retries} timeout_s={timeout_s} "
                f"backoff_s={backoff_s} max_backoff_s={max_backoff_s} max_reply_bytes={max_reply_bytes}"
            )
        if has_redacted_credentials(base_url):
            raise ValueError(
                f"the judge URL {base_url} had its credentials removed when its config was saved: "
                "give pasr.judge.base_url again with them (user:password@)"
            )
        try:
            url = yarl.URL(base_url.rstrip("/"))
        except ValueError as exc:
            raise ValueError(f"the judge URL {redact_url(base_url)} is not a URL ({exc})") from None
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError(
                f"the judge URL {redact_url(base_url)} is not an http(s) URL with a host: give the API root, "
                "e.g. http://judge-host:8000/v1"
            )
        # user:password@ in the URL: Basic authentication, kept out of the URL shown and used
        self._url_auth = aiohttp.BasicAuth(url.user or "", url.password or "") if url.user or url.password else None
        self.base_url = str(url.with_user(None))
        self.url = self.base_url + "/chat/completions"
        self.max_reply_bytes = int(max_reply_bytes)
        self.model = model
        self.template = check_template(template if template is not None else load_prompt(DEFAULT_JUDGE))
        self.prompt_version = prompt_version(self.template)
        self._api_key = api_key  # an explicit key; else read from api_key_env per session
        self.api_key_env = api_key_env
        self.concurrency = concurrency
        self.timeout_s = float(timeout_s)
        self.retries = retries
        self.backoff_s = float(backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self.max_tokens = max_tokens
        self.extra_body = dict(extra_body or {})
        self.cache = ScoreCache(cache_path)
        self.stats = JudgeStats()
        self._states: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState] = weakref.WeakKeyDictionary()
        self._states_lock = threading.Lock()

    @classmethod
    def from_config(cls, cfg: Any, template: str | None = None) -> OpenAIJudge:
        # cfg: a ``pasr.judge`` section (recipe.pasr_config.JudgeConfig; rewards/ imports no recipe code)
        return cls(
            base_url=cfg.base_url or "",
            model=cfg.model or "",
            template=template,
            api_key_env=cfg.api_key_env,
            concurrency=cfg.concurrency,
            timeout_s=cfg.timeout_s,
            retries=cfg.retries,
            backoff_s=cfg.backoff_s,
            cache_path=cfg.cache_path,
            max_tokens=cfg.max_tokens,
            extra_body=dict(cfg.extra_body or {}),
        )

    def __getstate__(self) -> dict:
        """Picklable (to ship to a Ray worker): per-loop sessions and locks stay behind."""
        return {k: v for k, v in self.__dict__.items() if k not in ("_states", "_states_lock")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._states = weakref.WeakKeyDictionary()
        self._states_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"OpenAIJudge(url={self.url!r}, model={self.model!r}, prompt_version={self.prompt_version})"

    def _resolve_api_key(self) -> str:
        # Read when a session opens, not at construction: a pickled judge carries no key from
        # the environment, and the worker that unpickles it uses its own.
        return self._api_key or os.environ.get(self.api_key_env) or DUMMY_API_KEY

    def _secrets(self) -> tuple[str, ...]:
        """What no error text may hold: the API key and the URL's credentials."""
        auth = self._url_auth
        return (self._resolve_api_key(),) + ((auth.login, auth.password) if auth is not None else ())

    @asynccontextmanager
    async def _loop_state(self) -> AsyncIterator[_LoopState]:
        loop = asyncio.get_running_loop()
        with self._states_lock:
            state = self._states.get(loop)
            if state is None:
                state = self._states[loop] = _LoopState(asyncio.Semaphore(self.concurrency))
        if state.session is None or state.session.closed:
            state.session = aiohttp.ClientSession(
                # one Authorization header: the URL's Basic credentials, else the bearer key
                headers={} if self._url_auth is not None else {"Authorization": f"Bearer {self._resolve_api_key()}"},
                auth=self._url_auth,
                connector=aiohttp.TCPConnector(limit=self.concurrency),
                timeout=aiohttp.ClientTimeout(total=self.timeout_s),
            )
        state.users += 1
        try:
            yield state
        finally:
            state.users -= 1
            if state.users == 0 and state.session is not None:
                session, state.session = state.session, None
                await session.close()

    # -- scoring ---------------------------------------------------------------------------------

    def key(self, question: str, gold: str, answer: str) -> str:
        return cache_key(self.model, self.prompt_version, question, gold, answer)

    async def score(self, question: str, gold: str, answer: str | None) -> JudgeResult:
        return (await self.score_many([JudgeItem(question, gold, answer)]))[0]

    async def score_many(self, items: Sequence[JudgeItem]) -> list[JudgeResult]:
        async with self._loop_state() as state:
            return list(await asyncio.gather(*(self._score_one(state, i.question, i.gold, i.answer) for i in items)))

    async def _score_one(self, state: _LoopState, question: str, gold: str, answer: str | None) -> JudgeResult:
        if answer is None or not answer.strip():
            self.stats.no_answer += 1
            return JudgeResult(0.0)
        key = self.key(question, gold, answer)
        cached = self.cache.get(key)
        if cached is not None:
            self.stats.cache_hits += 1
            return JudgeResult(cached)
        pending = state.inflight.get(key)
        if pending is not None:
            self.stats.coalesced += 1
            try:
                return await asyncio.shield(pending)
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if pending.cancelled() and task is not None and not task.cancelling():
                    self.stats.coalesced -= 1
                    return await self._score_one(state, question, gold, answer)  # the owner was cancelled, not us
                raise
        future: asyncio.Future[JudgeResult] = asyncio.get_running_loop().create_future()
        state.inflight[key] = future
        try:
            result = await self._request_with_retries(state, fill_template(self.template, question, gold, answer))
            if result.ok and result.score is not None:
                self.cache.put(key, result.score, prompt_version=self.prompt_version, model=self.model)
            else:
                self.stats.errors += 1
            future.set_result(result)
            return result
        except asyncio.CancelledError:
            future.cancel()  # waiters see it and ask again themselves
            raise
        except Exception as exc:
            future.set_exception(exc)
            future.exception()  # mark retrieved: waiters re-raise it, the owner raises it here
            raise
        finally:
            state.inflight.pop(key, None)

    def _backoff(self, attempt: int) -> float:
        delay = min(self.max_backoff_s, self.backoff_s * (2**attempt))
        return delay * (1.0 + 0.25 * random.random())

    def _body(self, prompt: str) -> dict:
        body: dict = {"model": self.model, "messages": [{"role": "user", "content": prompt}], "temperature": 0.0}
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        body.update(self.extra_body)
        return body

    def prompt(self, question: str, gold: str, answer: str) -> str:
        """The judge prompt this judge sends for one item (the user message of its request)."""
        return fill_template(self.template, question, gold, answer)

    async def trial(self, question: str, gold: str, answer: str) -> JudgeTrial:
        """One request for one item, as a run sends it (endpoint, model, template, body), with no
        retry and no cache: the prompt, the reply's text and the score read from it, or why
        there is none. ``pasr judge try`` shows these; :meth:`ping` asks one."""
        prompt = self.prompt(question, gold, answer)
        async with self._loop_state() as state:
            assert state.session is not None
            reply, error, _ = await self._exchange(state.session, self._body(prompt))
        score = None
        if error is None:
            score = parse_score(reply)
            if score is None:
                error = f"unparsable_score: {self._excerpt(str(reply))!r}"
        return JudgeTrial(
            prompt,
            None if reply is None else redact_secrets(reply, self._secrets()),
            score,
            None if error is None else redact_secrets(error, self._secrets()),
        )

    async def ping(self, question: str = "What is 2 + 3?", gold: str = "5", answer: str = "5") -> str | None:
        """Why this judge cannot score, from one request for one item (:meth:`trial`), or None:
        the endpoint, the model name, the template and the reply's score all as a run uses them.
        What :func:`rewards.judges.ping_judge` asks at the start of a run."""
        return (await self.trial(question, gold, answer)).error

    async def _request_with_retries(self, state: _LoopState, prompt: str) -> JudgeResult:
        body = self._body(prompt)
        last_error = "no attempt made"
        attempts = 0
        for attempt in range(self.retries + 1):
            if attempt:
                await asyncio.sleep(self._backoff(attempt - 1))
                self.stats.retries += 1
            attempts += 1
            async with state.semaphore:
                self.stats.requests += 1
                assert state.session is not None
                score, error, retryable = await self._attempt(state.session, body)
            if error is None:
                return JudgeResult(score)
            last_error = error
            if not retryable:
                break
        return JudgeResult.failed(
            f"openai judge: {last_error} (after {attempts} attempt{'s' if attempts > 1 else ''})",
            secrets=self._secrets(),
        )

    def _excerpt(self, text: str, limit: int = 120) -> str:
        """The start of what a server said, for an error: redacted *before* it is cut, so that
        an echoed key cut in half cannot slip past (``redact_secrets`` looks for whole keys)."""
        return redact_secrets(text, self._secrets())[:limit]

    async def _read_bounded(self, resp: aiohttp.ClientResponse) -> bytes:
        """The reply body, read a chunk at a time; :class:`ReplyTooLarge` as soon as it is over
        ``max_reply_bytes`` (from its Content-Length, before reading any, or as it streams in,
        chunked): the rest is never read, and the connection is closed rather than reused."""
        limit = self.max_reply_bytes
        if resp.content_length is not None and resp.content_length > limit:
            resp.close()
            raise ReplyTooLarge(f"Content-Length {resp.content_length}")
        body = bytearray()
        async for chunk in resp.content.iter_chunked(_READ_CHUNK):
            body += chunk
            if len(body) > limit:
                resp.close()
                raise ReplyTooLarge(f"{len(body)} bytes read")
        return bytes(body)

    async def _attempt(self, session: aiohttp.ClientSession, body: dict) -> tuple[float | None, str | None, bool]:
        """(score, error, retryable) for one HTTP attempt: :meth:`_exchange`, then the score read
        from the reply (none readable is a retryable error)."""
        text, error, retryable = await self._exchange(session, body)
        if error is not None:
            return None, error, retryable
        score = parse_score(text)
        if score is None:
            return None, f"unparsable_score: {self._excerpt(str(text))!r}", True
        return score, None, False

    async def _exchange(self, session: aiohttp.ClientSession, body: dict) -> tuple[str | None, str | None, bool]:
        """(the reply's message text, error, retryable) for one HTTP attempt. Every error that
        quotes the server is redacted (:meth:`_excerpt`): the text ends up in records on disk."""
        try:
            async with asyncio.timeout(self.timeout_s):
                async with session.post(self.url, json=body) as resp:
                    status = resp.status
                    charset = resp.charset or "utf-8"  # JSON is UTF-8 (RFC 8259) unless the server says otherwise
                    payload = await self._read_bounded(resp)
        except TimeoutError:
            return None, "timeout", True
        except ReplyTooLarge as exc:
            return (
                None,
                f"bad_response: the reply body is over {self.max_reply_bytes} bytes ({exc}): not read further",
                True,
            )
        except aiohttp.ClientError as exc:
            return None, f"transport: {type(exc).__name__}: {self._excerpt(str(exc), 180)}", True
        if status >= 400:
            retryable = status >= 500 or status in _RETRYABLE_STATUS
            return None, f"http_{status}: {self._excerpt(payload.decode('utf-8', errors='replace'))}", retryable
        try:
            raw = payload.decode(charset)
        except (UnicodeDecodeError, LookupError) as exc:
            # a garbled reply, as retryable as any other bad one; never an exception that
            # fails the whole batch
            why = f"{exc.reason} at byte {exc.start}" if isinstance(exc, UnicodeDecodeError) else "unknown charset"
            excerpt = self._excerpt(payload.decode("utf-8", errors="replace"))
            return None, f"bad_response: the reply body is not {charset.upper()} ({why}): {excerpt!r}", True
        try:
            text = message_content(json.loads(raw))
        except ValueError as exc:  # not JSON (JSONDecodeError), or BadReply: no message text in it
            why = f"{exc}: " if isinstance(exc, BadReply) else ""
            return None, f"bad_response: {why}{self._excerpt(raw)!r}", True
        return text, None, False
