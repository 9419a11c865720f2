"""The request handler of the fake OpenAI server: routing, faults and streamed answers.

One :class:`_Handler` serves each connection of a
:class:`~tests.fakes.openai_server.FakeModelServer`; it takes the scripted replies from the
server and answers /v1/models, /v1/chat/completions (JSON or server-sent events, see
:class:`_ChatStream`) and /v1/embeddings, injecting the faults the replies ask for.
"""

from __future__ import annotations

import json
import math
import select
import socket
import time
from dataclasses import replace
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any

from tests.fakes.openai_replies import (
    Reply,
    _bad_key_body,
    _encode_vector,
    _error_body,
    _no_model_body,
    _usage,
    _words,
    fake_embedding,
    honour_logit_bias,
    logit_bias_error,
    tokens,
)

if TYPE_CHECKING:
    from tests.fakes.openai_server import FakeModelServer, _Server

# How long a "timeout" fault holds the request; long enough that any sane client gives up first.
TIMEOUT_FAULT_SECONDS = 60.0
# Granularity of every wait, so stop() and vanished clients are noticed quickly.
POLL_SECONDS = 0.05


class _ClientGone(Exception):
    """The client closed its side of the connection before the response ended."""


class _Stopping(Exception):
    """The fake server is shutting down; abandon the response."""


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

    def handle_one_request(self) -> None:
        # One connection may carry several requests (keep-alive): each recorded one is stamped
        # when its answer ended (or its client went), so that a trial can tell from its
        # ``_started`` and ``_ended`` which requests were in flight together.
        self._entry: dict[str, Any] | None = None
        try:
            super().handle_one_request()
        finally:
            if self._entry is not None:
                self._entry["_ended"] = time.monotonic()

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
        entry["_started"] = time.monotonic()
        self._entry = entry
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
        elif path == "/v1/moderations":
            self._moderations()
        else:
            self._read_body()  # drain it so the connection stays usable
            self._not_found()

    def _not_found(self) -> None:
        self._send_json(
            404, _error_body(f"Unknown request URL: {self.path}", "invalid_request_error")
        )

    def _admitted(self, body: dict[str, Any], *models: str) -> bool:
        """Answer a wrong key (401) or an unknown model (404) as OpenAI does; True if neither."""
        if not self._key_ok():
            self._send_json(401, _bad_key_body())
            return False
        if body.get("model") not in models:
            self._send_json(404, _no_model_body(body.get("model")))
            return False
        return True

    # ----------------------------------------------------------------- chat

    def _chat(self) -> None:
        body = self._parse_request()
        if body is None:
            return
        # Auth and model errors do not consume a scripted reply: the script is for requests
        # the server would otherwise have answered.
        if not self._admitted(body, self.fake.model, *self.fake.other_models):
            return
        refused = logit_bias_error(body.get("logit_bias"))
        if refused is not None:
            self._send_json(400, _error_body(refused, "invalid_request_error", "invalid_value"))
            return
        reply = self.fake._next_reply()
        if body.get("logit_bias"):
            # The fake model honours the bias: a word that is one banned token is not written.
            bias = body["logit_bias"]
            reply = replace(
                reply,
                text=honour_logit_bias(reply.text, bias),
                reasoning=honour_logit_bias(reply.reasoning, bias),
            )
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
        if reply.fault in ("stall", "endless"):
            # Without a stream, a reply that never ends is one that never arrives.
            self._hold_without_answer()
            return
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

    def _texts(self, body: dict[str, Any]) -> list[str] | None:
        """A request's ``input``: a string or a list of strings (else 400, None)."""
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
            return None
        return inputs

    def _failed(self, fault: tuple[str, float] | None) -> bool:
        """Answer a queued fault of a one-shot route (500, 429, or no answer); True if one."""
        if fault is None:
            return False
        name, retry_after = fault
        if name == "500":
            self._send_server_error()
        elif name == "429":
            self._send_rate_limited(retry_after)
        else:
            self._hold_without_answer()
        return True

    def _moderations(self) -> None:
        """OpenAI's Moderations: one result per input, flagged for the categories the test
        named words for (``FakeModelServer.moderation_flags``)."""
        body = self._parse_request()
        if body is None:
            return
        if not self._key_ok():
            self._send_json(401, _bad_key_body())
            return
        inputs = self._texts(body)
        if inputs is None:
            return
        self.fake._record({"_path": "/v1/moderations", "input": inputs})
        if self._failed(self.fake._next_moderation_fault()):
            return
        results = []
        for text in inputs:
            lowered = text.lower()
            hit = {
                category for word, category in self.fake.moderation_flags.items() if word in lowered
            }
            results.append(
                {
                    "flagged": bool(hit),
                    "categories": {category: True for category in hit},
                    "category_scores": {category: 0.99 for category in hit},
                }
            )
        self._send_json(
            200, {"id": "modr-fake", "model": body.get("model", ""), "results": results}
        )

    def _embeddings(self) -> None:
        body = self._parse_request()
        if body is None:
            return
        if not self._admitted(body, self.fake.embedding_model):
            return
        inputs = self._texts(body)
        if inputs is None:
            return
        if self._failed(self.fake._next_embedding_fault()):
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
        elif fault == "stall":
            self._stall()
        elif fault == "endless":
            self._endless()
        else:
            self._content(self.reply.reasoning, self.reply.text)
            self._finish(self.reply.reasoning, self.reply.text, self.reply.finish_reason)

    # -- the shapes of stream

    def _content(self, reasoning: str, text: str) -> None:
        for tok in tokens(reasoning):
            self._event(self._chunk({self.reply.reasoning_field: tok}))
            self.handler.fake._count_chunk()
        for tok in tokens(text):
            self._event(self._chunk({"content": tok}))
            self.handler.fake._count_chunk()

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

    def _stall(self) -> None:
        """Half the text, then silence on an open connection: the client's read timeout (not a
        dropped connection, not a slow start) is what must end the reply."""
        text_tokens = tokens(self.reply.text)
        self._content(self.reply.reasoning, "".join(text_tokens[: len(text_tokens) // 2]))
        self.handler._hold_without_answer()

    def _endless(self) -> None:
        """The text over and over, never a finish: only a client-side limit on the whole reply
        ends it (or the client hanging up, the server stopping, ``cut_endless_streams``)."""
        fake = self.handler.fake
        cut_at_start = fake._endless_cuts
        words = tokens(self.reply.text) or ["and on "]
        # Some pause per chunk even when the reply asks for none, or the loop floods the client.
        delay = max(self.reply.delay, POLL_SECONDS)
        while True:
            for word in words:
                if fake._endless_cuts != cut_at_start:
                    self.handler._drop_connection()
                    return
                self.handler._wait(delay)
                payload = json.dumps(self._chunk({"content": word})).encode("utf-8")
                self._write(b"data: " + payload + b"\n\n")
                fake._count_chunk()

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
