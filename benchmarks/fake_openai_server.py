"""A local OpenAI-compatible chat-completions server for judge tests and benchmarks.

It binds loopback only (127.0.0.1 by default, a free port chosen by the OS) and runs on its own
event loop in a background thread, so tests use it as a context manager::

    with FakeOpenAIServer(latency_s=0.05, faults={"7": ["http500", "timeout"]}) as srv:
        judge = OpenAIJudge(srv.base_url, srv.model, timeout_s=0.5)
        ...
        assert srv.requests == 3 and srv.max_inflight <= 64

Scoring is deterministic: the judge prompt is matched against the judge template (the
``{question}``, ``{gold}`` and ``{answer}`` slots become capture groups) and the reply is
``Score: 1.0`` when the answer equals the gold after stripping whitespace, else ``Score: 0.0``
(``score_fn`` replaces that rule). A ``reply`` that is not a string (None, a list, a number) is
sent as the message content as it is: a server whose content is not text.

Faults, scheduled deterministically:

* ``faults``: answer text -> list of actions; the n-th request whose prompt carries that answer
  gets the n-th action, and ``ok`` once the list is used up. Robust to concurrency, since it
  keys on the request's content, not on arrival order.
* ``script``: a list of actions consumed one per request in arrival order (before ``faults``);
  deterministic only for one request at a time.

Actions: ``ok``; ``http500``; ``garbage`` (a 200 reply with no number in it); ``timeout``
(holds the request ``hang_s`` seconds, past the client's timeout, then answers); ``slow``
(answers correctly after an extra ``slow_s`` seconds); ``not_utf8`` (a 200 reply whose body,
declared UTF-8, is not); ``echo_headers`` (an HTTP 500 whose body echoes the request's headers,
``Authorization`` included, as some debugging proxies do: the API key must not reach a record);
``oversize`` (a 200 reply holding a correct score, padded to ``oversize_bytes`` and sent chunked,
without a Content-Length, until the client stops reading; ``oversize_sent`` counts the bytes
written).

Run it standalone with ``python3 -m benchmarks.fake_openai_server --latency-ms 50``.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

from aiohttp import web

from prompts import DEFAULT_JUDGE, load_prompt

ACTIONS = ("ok", "http500", "garbage", "timeout", "slow", "not_utf8", "echo_headers", "oversize")
LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")
GARBAGE_REPLY = "I cannot grade this answer without more context."


def exact_match_score(question: str, gold: str, answer: str) -> float:
    return 1.0 if answer.strip() == gold.strip() else 0.0


def template_regex(template: str) -> re.Pattern[str]:
    """A regex that reads ``question``, ``gold`` and ``answer`` back out of a filled template."""
    pattern = re.escape(template)
    for name in ("question", "gold", "answer"):
        pattern = pattern.replace(re.escape("{" + name + "}"), f"(?P<{name}>.*?)", 1)
    return re.compile("^" + pattern + "$", re.DOTALL)


class FakeOpenAIServer:
    def __init__(
        self,
        latency_s: float = 0.0,
        *,
        template: str | None = None,
        faults: Mapping[str, Sequence[str]] | None = None,
        script: Sequence[str] | None = None,
        hang_s: float = 30.0,
        slow_s: float = 0.5,
        reply: object = "Score: {score}",
        score_fn: Callable[[str, str, str], float] = exact_match_score,
        model: str = "fake-judge",
        host: str = "127.0.0.1",
        port: int = 0,
        oversize_bytes: int = 64 << 20,
    ) -> None:
        if host not in LOOPBACK_HOSTS:
            raise ValueError(f"the fake server binds loopback only, not {host!r}")
        for action in [*(script or []), *(a for acts in (faults or {}).values() for a in acts)]:
            if action not in ACTIONS:
                raise ValueError(f"unknown fault action {action!r}; use one of {ACTIONS}")
        self.latency_s = latency_s
        self.template = template if template is not None else load_prompt(DEFAULT_JUDGE)
        self._regex = template_regex(self.template)
        self.faults = {k: list(v) for k, v in (faults or {}).items()}
        self.script = list(script or [])
        self.hang_s = hang_s
        self.slow_s = slow_s
        self.reply = reply
        self.score_fn = score_fn
        self.model = model
        self.oversize_bytes = oversize_bytes
        self.oversize_sent = 0
        self.host = "127.0.0.1" if host == "localhost" else host
        self.port = port
        # Records (read them after the requests of interest have completed).
        self.requests = 0
        self.inflight = 0
        self.max_inflight = 0
        self.by_answer: Counter[str] = Counter()
        self.actions: Counter[str] = Counter()
        self.log: list[tuple[str | None, str]] = []  # (answer, action) per request, in arrival order
        self.last_body: dict | None = None
        self.last_authorization: str | None = None  # the Authorization header of the last request
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._stop: asyncio.Event | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    def __enter__(self) -> FakeOpenAIServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        ready = threading.Event()
        failure: list[BaseException] = []

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._setup(sock))
            except BaseException as exc:  # surfaced to start()
                failure.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._teardown())
            loop.close()

        self._thread = threading.Thread(target=serve, name=f"fake-openai-{self.port}", daemon=True)
        self._thread.start()
        if not ready.wait(30):
            raise RuntimeError("fake OpenAI server did not start within 30 s")
        if failure:
            raise RuntimeError(f"fake OpenAI server failed to start: {failure[0]!r}")

    async def _setup(self, sock: socket.socket) -> None:
        self._stop = asyncio.Event()
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        await web.SockSite(self._runner, sock).start()

    async def _teardown(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        if self._stop is not None:
            loop.call_soon_threadsafe(self._stop.set)  # release held ("timeout") requests
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        self._loop = self._thread = None

    # -- handlers --------------------------------------------------------------------------------

    def _next_action(self, answer: str | None) -> str:
        with self._lock:
            self.requests += 1
            if answer is not None:
                self.by_answer[answer] += 1
            if self.script:
                action = self.script.pop(0)
            elif answer is not None and self.faults.get(answer):
                action = self.faults[answer].pop(0)
            else:
                action = "ok"
            self.actions[action] += 1
            self.log.append((answer, action))
            return action

    async def _sleep(self, seconds: float) -> None:
        """Sleep, but wake at once when the server stops."""
        if seconds <= 0:
            return
        assert self._stop is not None
        try:
            await asyncio.wait_for(self._stop.wait(), seconds)
        except TimeoutError:
            pass

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": self.model, "object": "model"}]})

    async def _oversize(self, request: web.Request) -> web.StreamResponse:
        """A valid completion scoring 1.0, padded with spaces to ``oversize_bytes``, chunked."""
        head = b'{"choices": [{"message": {"role": "assistant", "content": "Score: 1.0'
        tail = b'"}}]}'
        resp = web.StreamResponse(headers={"Content-Type": "application/json; charset=utf-8"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        pad, chunk = self.oversize_bytes - len(head) - len(tail), b" " * (256 * 1024)
        try:
            await resp.write(head)
            self.oversize_sent += len(head)
            while pad > 0:
                piece = chunk[: min(pad, len(chunk))]
                await resp.write(piece)
                self.oversize_sent += len(piece)
                pad -= len(piece)
            await resp.write(tail)
            self.oversize_sent += len(tail)
            await resp.write_eof()
        except (ConnectionError, RuntimeError):  # the client hung up: what it meant to do
            pass
        return resp

    async def _chat(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
            prompt = body["messages"][-1]["content"]
        except Exception:
            return web.json_response({"error": {"message": "bad request body"}}, status=400)
        self.last_body = body
        self.last_authorization = request.headers.get("Authorization")
        match = self._regex.match(prompt)
        answer = match.group("answer") if match else None
        action = self._next_action(answer)
        with self._lock:
            self.inflight += 1
            self.max_inflight = max(self.max_inflight, self.inflight)
        try:
            await self._sleep(self.latency_s)
            if action == "timeout":
                await self._sleep(self.hang_s)
            elif action == "slow":
                await self._sleep(self.slow_s)
            if action == "http500":
                return web.json_response({"error": {"message": "injected fault"}}, status=500)
            if action == "echo_headers":
                return web.json_response(
                    {"error": {"message": "internal error", "headers": dict(request.headers)}}, status=500
                )
            if action == "oversize":
                return await self._oversize(request)
            if action == "not_utf8":
                body = b'{"choices": [{"message": {"role": "assistant", "content": "Score: 1 \xff\xfe"}}]}'
                return web.Response(body=body, content_type="application/json", charset="utf-8")
            if match is None:
                return web.json_response({"error": {"message": "prompt does not match the judge template"}}, status=400)
            if action == "garbage":
                content = GARBAGE_REPLY
            else:
                score = self.score_fn(match.group("question"), match.group("gold"), match.group("answer"))
                content = self.reply.format(score=score) if isinstance(self.reply, str) else self.reply
            return web.json_response(
                {
                    "id": f"chatcmpl-fake-{self.requests}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", self.model),
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
                    ],
                    "usage": {"prompt_tokens": len(prompt.split()), "completion_tokens": 3, "total_tokens": 0},
                }
            )
        finally:
            with self._lock:
                self.inflight -= 1


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve a fake OpenAI-compatible judge on loopback until interrupted.")
    parser.add_argument("--latency-ms", type=float, default=50.0, help="latency added to every request")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: a free one)")
    parser.add_argument("--template", default=DEFAULT_JUDGE, help="judge template name or path")
    args = parser.parse_args(argv)
    with FakeOpenAIServer(args.latency_ms / 1000, template=load_prompt(args.template), port=args.port) as srv:
        print(srv.base_url, flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
