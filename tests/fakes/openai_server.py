"""A real HTTP fake of the OpenAI API, served on 127.0.0.1 from a daemon thread.

The bot talks to language models over OpenAI-compatible HTTP, so the tests talk to this
server over real sockets rather than mocking the client: streaming, timeouts, dropped
connections and malformed events then exercise the same code paths as production.

Use it as a context manager::

    with FakeModelServer() as fake:
        fake.queue("Once upon a time.", Reply(fault="429"))
        ...  # point the client at fake.base_url

or run it by hand for trying the bot::

    python -m tests.fakes.openai_server --port 8089 --text "The cave is dark." --delay 0.05
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import math
import random
import re
import select
import socket
import struct
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FAULTS = ("500", "429", "401", "404", "timeout", "disconnect", "malformed", "empty")
EMBEDDING_FAULTS = ("500", "429", "timeout")

# How long a "timeout" fault holds the request; long enough that any sane client gives up first.
TIMEOUT_FAULT_SECONDS = 60.0
# Granularity of every wait, so stop() and vanished clients are noticed quickly.
POLL_SECONDS = 0.05
# serve_forever() only notices shutdown() between polls, so this bounds what stop() costs each
# test; a hundred idle wake-ups a second are cheap.
ACCEPT_POLL_SECONDS = 0.01

_TOKEN_RE = re.compile(r"\S+\s*|\s+")


@dataclass
class Reply:
    """One scripted answer of the fake server."""

    text: str = ""  # story text, streamed token by token
    reasoning: str = ""  # reasoning trace, streamed before the text
    reasoning_field: str = "reasoning_content"  # or "reasoning" (OpenRouter/Ollama style)
    delay: float = 0.0  # seconds before EACH streamed chunk (non-streamed: the same total)
    finish_reason: str = "stop"  # "stop" or "length"
    fault: str | None = None  # one of FAULTS
    retry_after: float = 2.0  # for fault "429"
    status_delay: float = 0.0  # seconds before the response headers are sent at all
    prompt_tokens: int | None = None  # default: whitespace words of the messages
    completion_tokens: int | None = None  # default: whitespace words of reasoning + text

    def __post_init__(self) -> None:
        if self.fault is not None and self.fault not in FAULTS:
            raise ValueError(f"unknown fault {self.fault!r}; expected one of {FAULTS}")


def tokens(text: str) -> list[str]:
    """Split text into stream tokens that concatenate back to exactly the input."""
    return _TOKEN_RE.findall(text)


def fake_embedding(text: str, dim: int) -> list[float]:
    """A deterministic, L2-normalised pseudo-random vector for a text."""
    # sha256 rather than hash(): hash() is salted per process, and tests compare across runs.
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest(), "big")
    rng = random.Random(seed)
    vec = [rng.gauss(0.0, 1.0) for _ in range(dim)]
    norm = math.sqrt(sum(v * v for v in vec)) or 1.0
    return [v / norm for v in vec]


def _words(text: str) -> int:
    return len(text.split())


def _prompt_words(messages: Any) -> int:
    """Rough prompt size: whitespace words of every text part of every message."""
    count = 0
    if not isinstance(messages, list):
        return 0
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            count += _words(content)
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    count += _words(part["text"])
    return count


def _error_body(message: str, type_: str, code: str | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"message": message, "type": type_}
    if code is not None:
        error["code"] = code
    return {"error": error}


def _bad_key_body() -> dict[str, Any]:
    return _error_body("Incorrect API key provided", "invalid_request_error", "invalid_api_key")


def _no_model_body(model: Any) -> dict[str, Any]:
    return _error_body(
        f"The model `{model}` does not exist", "invalid_request_error", "model_not_found"
    )


class _ClientGone(Exception):
    """The client closed its side of the connection before the response ended."""


class _Stopping(Exception):
    """The fake server is shutting down; abandon the response."""


class FakeModelServer:
    """An OpenAI-compatible HTTP server with scripted replies and injectable faults."""

    def __init__(
        self,
        *,
        model: str = "fake-model",
        api_key: str | None = None,
        embedding_dim: int = 8,
        embedding_model: str = "fake-embed",
        port: int = 0,
        chunked: bool = True,
    ) -> None:
        self.model = model
        self.api_key = api_key
        self.embedding_dim = embedding_dim
        self.embedding_model = embedding_model
        self.port = port
        # Real servers (OpenAI, vLLM, llama.cpp) stream with chunked transfer encoding, which
        # is also what lets a client tell a dropped stream from a finished one.
        self.chunked = chunked
        self.default_text = "The story goes on."
        self.default_delay = 0.0
        self.requests: list[dict[str, Any]] = []
        self.disconnects = 0
        # Unexpected exceptions raised inside handlers: the server logs nothing, so tests can
        # assert this stays empty instead.
        self.errors: list[BaseException] = []

        self._lock = threading.Lock()
        self._disconnected = threading.Condition(self._lock)
        self._replies: deque[Reply] = deque()
        self._embedding_faults: deque[tuple[str, float]] = deque()
        self._stopping = threading.Event()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None
        self._connections: dict[socket.socket, threading.Thread] = {}
        self._ids = 0

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> FakeModelServer:
        if self._thread is not None:
            raise RuntimeError("FakeModelServer already started")
        self._stopping.clear()
        self._httpd = _Server(("127.0.0.1", self.port), _Handler)
        self._httpd.fake = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": ACCEPT_POLL_SECONDS},
            name="fake-openai-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is None or self._httpd is None:
            return
        self._stopping.set()
        self._httpd.shutdown()
        # Idle keep-alive connections block their handler in a read; shutting the sockets
        # down wakes them so the handler threads can be joined.
        with self._lock:
            connections = list(self._connections.items())
        for conn, _ in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._httpd.server_close()
        self._thread.join(timeout=2)
        deadline = time.monotonic() + 1.0
        for _, thread in connections:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        self._thread = None
        self._httpd = None

    def __enter__(self) -> FakeModelServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("FakeModelServer is not running")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    # ----------------------------------------------------------------- scripting

    def queue(self, *replies: Reply | str) -> None:
        """Script the next chat replies, consumed in order by /chat/completions."""
        items = [Reply(text=r) if isinstance(r, str) else r for r in replies]
        with self._lock:
            self._replies.extend(items)

    def queue_embedding_fault(self, fault: str, *, retry_after: float = 2.0) -> None:
        """Make the next /embeddings request fail; embeddings otherwise always succeed."""
        if fault not in EMBEDDING_FAULTS:
            raise ValueError(f"unknown embedding fault {fault!r}; expected {EMBEDDING_FAULTS}")
        with self._lock:
            self._embedding_faults.append((fault, retry_after))

    @property
    def queued(self) -> int:
        """How many scripted chat replies have not been consumed yet."""
        with self._lock:
            return len(self._replies)

    def wait_for_disconnect(self, timeout: float = 5, count: int = 1) -> bool:
        """Wait until at least `count` clients have gone away mid-response."""
        with self._disconnected:
            return self._disconnected.wait_for(lambda: self.disconnects >= count, timeout)

    # ----------------------------------------------------------------- used by the handler

    def _next_reply(self) -> Reply:
        with self._lock:
            if self._replies:
                return self._replies.popleft()
        return Reply(text=self.default_text, delay=self.default_delay)

    def _next_embedding_fault(self) -> tuple[str, float] | None:
        with self._lock:
            return self._embedding_faults.popleft() if self._embedding_faults else None

    def _record(self, entry: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append(entry)

    def _count_disconnect(self) -> None:
        with self._disconnected:
            self.disconnects += 1
            self._disconnected.notify_all()

    def _new_id(self) -> str:
        with self._lock:
            self._ids += 1
            return f"chatcmpl-fake-{self._ids}"

    def _track(self, conn: socket.socket) -> None:
        with self._lock:
            self._connections[conn] = threading.current_thread()
        if self._stopping.is_set():
            # Accepted just before stop() took its snapshot of connections: cut it here.
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _untrack(self, conn: socket.socket) -> None:
        with self._lock:
            self._connections.pop(conn, None)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeModelServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # The default prints a traceback to stderr; clients hanging up are expected here,
        # anything else is kept for the tests to inspect.
        exc = sys.exc_info()[1]
        if exc is not None and not isinstance(exc, OSError):
            self.fake.errors.append(exc)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FakeOpenAI/1.0"
    sys_version = ""
    # Headers and body go out in separate writes; with Nagle on, delayed ACKs add ~40 ms to
    # every response.
    disable_nagle_algorithm = True
    server: _Server

    # ----------------------------------------------------------------- plumbing

    @property
    def fake(self) -> FakeModelServer:
        return self.server.fake

    def setup(self) -> None:
        super().setup()
        self.fake._track(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.fake._untrack(self.connection)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # tests and the developer CLI want a quiet server

    def _client_gone(self) -> bool:
        """True when the peer has closed its end (readable socket with nothing to read)."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            if not readable:
                return False
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True

    def _wait(self, seconds: float) -> None:
        """Sleep in short steps, bailing out when the server stops or the client leaves."""
        deadline = time.monotonic() + seconds
        while True:
            if self.fake._stopping.is_set():
                raise _Stopping
            if self._client_gone():
                raise _ClientGone
            left = deadline - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(POLL_SECONDS, left))

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return self._read_chunked_body()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _read_chunked_body(self) -> bytes:
        parts: list[bytes] = []
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                # Skip trailers up to the blank line that ends the body.
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return b"".join(parts)
            parts.append(self.rfile.read(size))
            self.rfile.readline()

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_rate_limited(self, retry_after: float) -> None:
        seconds = max(1, math.ceil(retry_after))
        self._send_json(
            429,
            _error_body("Rate limit reached", "rate_limit_error"),
            # OpenAI sends both; the ms header carries the precise value.
            {"Retry-After": str(seconds), "retry-after-ms": str(int(retry_after * 1000))},
        )

    def _send_server_error(self) -> None:
        self._send_json(500, _error_body("Internal server error", "server_error"))

    def _hold_without_answer(self) -> None:
        """The "timeout" fault: keep the request open, say nothing."""
        self.close_connection = True
        self._wait(TIMEOUT_FAULT_SECONDS)

    def _key_ok(self) -> bool:
        if self.fake.api_key is None:
            return True
        return self.headers.get("Authorization", "") == f"Bearer {self.fake.api_key}"

    def _parse_request(self) -> dict[str, Any] | None:
        """Read and record the JSON body; answer 400 and return None when it is unusable."""
        raw = self._read_body()
        entry: dict[str, Any]
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            body = None
        entry = dict(body) if isinstance(body, dict) else {"_raw": raw.decode("utf-8", "replace")}
        entry["_path"] = self.path
        entry["_headers"] = {name.lower(): value for name, value in self.headers.items()}
        self.fake._record(entry)
        if not isinstance(body, dict):
            self._send_json(
                400, _error_body("We could not parse the JSON body", "invalid_request_error")
            )
            return None
        return body

    # ----------------------------------------------------------------- routing

    def do_GET(self) -> None:
        self._guard(self._route_get)

    def do_POST(self) -> None:
        self._guard(self._route_post)

    def _guard(self, route: Any) -> None:
        try:
            route()
        except _Stopping:
            self.close_connection = True
        except (_ClientGone, ConnectionError):
            # ConnectionError covers BrokenPipe/ConnectionReset/ConnectionAborted on write.
            self.close_connection = True
            if not self.fake._stopping.is_set():  # stop() cutting sockets is not the client
                self.fake._count_disconnect()

    def _route_get(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        if path != "/v1/models":
            self._not_found()
            return
        if not self._key_ok():
            self._send_json(401, _bad_key_body())
            return
        models = [self.fake.model, self.fake.embedding_model]
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in models]
        self._send_json(200, {"object": "list", "data": data})

    def _route_post(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        if path == "/v1/chat/completions":
            self._chat()
        elif path == "/v1/embeddings":
            self._embeddings()
        else:
            self._read_body()  # drain it so the connection stays usable
            self._not_found()

    def _not_found(self) -> None:
        self._send_json(
            404, _error_body(f"Unknown request URL: {self.path}", "invalid_request_error")
        )

    # ----------------------------------------------------------------- chat

    def _chat(self) -> None:
        body = self._parse_request()
        if body is None:
            return
        # Auth and model errors do not consume a scripted reply: the script is for requests
        # the server would otherwise have answered.
        if not self._key_ok():
            self._send_json(401, _bad_key_body())
            return
        if body.get("model") != self.fake.model:
            self._send_json(404, _no_model_body(body.get("model")))
            return
        reply = self.fake._next_reply()
        if reply.status_delay > 0:
            self._wait(reply.status_delay)
        if self._answer_fault(reply):
            return
        if body.get("stream"):
            _ChatStream(self, reply, body).run()
        else:
            self._chat_json(reply, body)

    def _answer_fault(self, reply: Reply) -> bool:
        """Answer faults that look the same streamed or not; True when answered."""
        if reply.fault == "500":
            self._send_server_error()
        elif reply.fault == "429":
            self._send_rate_limited(reply.retry_after)
        elif reply.fault == "401":
            self._send_json(401, _bad_key_body())
        elif reply.fault == "404":
            self._send_json(404, _no_model_body(self.fake.model))
        elif reply.fault == "timeout":
            self._hold_without_answer()
        else:
            return False
        return True

    def _chat_json(self, reply: Reply, body: dict[str, Any]) -> None:
        text = "" if reply.fault == "empty" else reply.text
        reasoning = "" if reply.fault == "empty" else reply.reasoning
        # A non-streamed answer takes as long as the stream would have.
        chunks = 2 + len(tokens(reasoning)) + len(tokens(text))
        if reply.delay > 0:
            self._wait(reply.delay * chunks)
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if reasoning:
            message[reply.reasoning_field] = reasoning
        payload = {
            "id": self.fake._new_id(),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.fake.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": "stop" if reply.fault == "empty" else reply.finish_reason,
                }
            ],
            "usage": _usage(reply, body, reasoning, text),
        }
        if reply.fault == "malformed":
            self._send_raw(b'{"id": "chatcmpl-fake", "choices": [{not json')
        elif reply.fault == "disconnect":
            self._send_half_and_drop(json.dumps(payload).encode("utf-8"))
        else:
            self._send_json(200, payload)

    def _send_raw(self, data: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_half_and_drop(self, data: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data[: len(data) // 2])
        self._drop_connection()

    def _drop_connection(self) -> None:
        """Cut the connection mid-response so the client sees it end early."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # ----------------------------------------------------------------- embeddings

    def _embeddings(self) -> None:
        body = self._parse_request()
        if body is None:
            return
        if not self._key_ok():
            self._send_json(401, _bad_key_body())
            return
        if body.get("model") != self.fake.embedding_model:
            self._send_json(404, _no_model_body(body.get("model")))
            return
        inputs = body.get("input")
        if isinstance(inputs, str):
            inputs = [inputs]
        if not isinstance(inputs, list) or not all(isinstance(i, str) for i in inputs):
            self._send_json(
                400,
                _error_body(
                    "'input' must be a string or a list of strings", "invalid_request_error"
                ),
            )
            return
        fault = self.fake._next_embedding_fault()
        if fault is not None:
            name, retry_after = fault
            if name == "500":
                self._send_server_error()
            elif name == "429":
                self._send_rate_limited(retry_after)
            else:
                self._hold_without_answer()
            return
        as_base64 = body.get("encoding_format") == "base64"
        data = [
            {
                "object": "embedding",
                "index": i,
                "embedding": _encode_vector(
                    fake_embedding(text, self.fake.embedding_dim), as_base64
                ),
            }
            for i, text in enumerate(inputs)
        ]
        words = sum(_words(text) for text in inputs)
        self._send_json(
            200,
            {
                "object": "list",
                "data": data,
                "model": self.fake.embedding_model,
                "usage": {"prompt_tokens": words, "total_tokens": words},
            },
        )


def _encode_vector(vec: list[float], as_base64: bool) -> list[float] | str:
    # The official SDK asks for base64 (packed little-endian float32) by default.
    if not as_base64:
        return vec
    return base64.b64encode(struct.pack(f"<{len(vec)}f", *vec)).decode("ascii")


def _usage(reply: Reply, body: dict[str, Any], reasoning: str, text: str) -> dict[str, int]:
    prompt = reply.prompt_tokens
    if prompt is None:
        prompt = _prompt_words(body.get("messages"))
    completion = reply.completion_tokens
    if completion is None:
        completion = _words(reasoning) + _words(text)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


class _ChatStream:
    """One server-sent-events answer to a chat request with "stream": true."""

    def __init__(self, handler: _Handler, reply: Reply, body: dict[str, Any]) -> None:
        self.handler = handler
        self.reply = reply
        self.body = body
        self.id = handler.fake._new_id()
        self.created = int(time.time())
        options = body.get("stream_options")
        self.include_usage = isinstance(options, dict) and bool(options.get("include_usage"))

    def run(self) -> None:
        self._send_headers()
        # Real servers send SSE comments to keep proxies from timing out; clients must skip them.
        self._write(b": keep-alive\n\n")
        self._event(self._chunk({"role": "assistant", "content": ""}))
        fault = self.reply.fault
        if fault == "empty":
            self._finish("", "", "stop")
        elif fault == "malformed":
            self._malformed()
        elif fault == "disconnect":
            self._disconnect()
        else:
            self._content(self.reply.reasoning, self.reply.text)
            self._finish(self.reply.reasoning, self.reply.text, self.reply.finish_reason)

    # -- the shapes of stream

    def _content(self, reasoning: str, text: str) -> None:
        for tok in tokens(reasoning):
            self._event(self._chunk({self.reply.reasoning_field: tok}))
        for tok in tokens(text):
            self._event(self._chunk({"content": tok}))

    def _finish(self, reasoning: str, text: str, finish_reason: str) -> None:
        self._event(self._chunk({}, finish_reason))
        if self.include_usage:
            usage = _usage(self.reply, self.body, reasoning, text)
            self._event(self._base() | {"choices": [], "usage": usage})
        self._wait()
        self._write(b"data: [DONE]\n\n")
        self._end()

    def _malformed(self) -> None:
        for tok in tokens(self.reply.text)[:2]:
            self._event(self._chunk({"content": tok}))
        self._wait()
        self._write(b"data: {not json\n\n")
        self._wait()
        self._write(b"data: [DONE]\n\n")
        self._end()

    def _disconnect(self) -> None:
        text_tokens = tokens(self.reply.text)
        self._content(self.reply.reasoning, "".join(text_tokens[: len(text_tokens) // 2]))
        # No terminating chunk and no [DONE]: with chunked encoding the client sees an
        # incomplete body, without it a stream that just stops.
        self.handler._drop_connection()

    # -- chunk building

    def _base(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.handler.fake.model,
            "system_fingerprint": None,
        }

    def _chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        chunk = self._base() | {
            "choices": [
                {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            ]
        }
        if self.include_usage:
            chunk["usage"] = None  # as OpenAI: only the final chunk carries numbers
        return chunk

    # -- wire

    def _send_headers(self) -> None:
        h = self.handler
        h.close_connection = True
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Cache-Control", "no-cache")
        h.send_header("Connection", "close")
        if h.fake.chunked:
            h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()

    def _wait(self) -> None:
        self.handler._wait(self.reply.delay)

    def _event(self, payload: dict[str, Any]) -> None:
        self._wait()
        self._write(b"data: " + json.dumps(payload).encode("utf-8") + b"\n\n")

    def _write(self, data: bytes) -> None:
        h = self.handler
        if h.fake.chunked:
            data = f"{len(data):X}\r\n".encode("ascii") + data + b"\r\n"
        h.wfile.write(data)
        h.wfile.flush()

    def _end(self) -> None:
        if self.handler.fake.chunked:
            self.handler.wfile.write(b"0\r\n\r\n")
            self.handler.wfile.flush()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m tests.fakes.openai_server",
        description="Run the fake OpenAI-compatible model server in the foreground.",
    )
    parser.add_argument("--port", type=int, default=0, help="port to bind (default: any free)")
    parser.add_argument("--text", default=None, help="the text every chat reply streams")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds between chunks")
    parser.add_argument("--model", default="fake-model", help="chat model name to accept")
    parser.add_argument("--embedding-model", default="fake-embed", help="embedding model name")
    parser.add_argument("--api-key", default=None, help="require this bearer token")
    args = parser.parse_args(argv)

    fake = FakeModelServer(
        model=args.model,
        api_key=args.api_key,
        embedding_model=args.embedding_model,
        port=args.port,
    )
    if args.text is not None:
        fake.default_text = args.text
    fake.default_delay = args.delay
    with fake:
        print(fake.base_url, flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
