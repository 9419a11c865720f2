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

or with a reply scripted for each request in turn (a JSON list of texts; then ``--text``)::

    python -m tests.fakes.openai_server --replies replies.json
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import sys
import threading
import time
from collections import deque
from http.server import ThreadingHTTPServer
from typing import Any

# The handler and the reply helpers live in their own modules; the names are re-exported here
# so that tests keep importing everything from tests.fakes.openai_server.
from tests.fakes.openai_handler import (
    POLL_SECONDS,
    TIMEOUT_FAULT_SECONDS,
    _ChatStream,
    _ClientGone,
    _Handler,
    _Stopping,
)
from tests.fakes.openai_replies import (
    EMBEDDING_FAULTS,
    FAULTS,
    Reply,
    fake_embedding,
    tokens,
)

__all__ = [
    "ACCEPT_POLL_SECONDS",
    "EMBEDDING_FAULTS",
    "FAULTS",
    "POLL_SECONDS",
    "TIMEOUT_FAULT_SECONDS",
    "FakeModelServer",
    "Reply",
    "_ChatStream",
    "_ClientGone",
    "_Handler",
    "_Server",
    "_Stopping",
    "fake_embedding",
    "main",
    "tokens",
]

# serve_forever() only notices shutdown() between polls, so this bounds what stop() costs each
# test; a hundred idle wake-ups a second are cheap.
ACCEPT_POLL_SECONDS = 0.01


class FakeModelServer:
    """An OpenAI-compatible HTTP server with scripted replies and injectable faults."""

    def __init__(
        self,
        *,
        model: str = "fake-model",
        other_models: tuple[str, ...] = (),
        api_key: str | None = None,
        embedding_dim: int = 8,
        embedding_model: str = "fake-embed",
        port: int = 0,
        chunked: bool = True,
    ) -> None:
        self.model = model
        #: More chat models this server serves (an operator's whitelist).
        self.other_models = other_models
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
        #: Reasoning and content chunks streamed so far, all replies together.
        self.content_chunks = 0
        # Unexpected exceptions raised inside handlers: the server logs nothing, so tests can
        # assert this stays empty instead.
        self.errors: list[BaseException] = []

        self._lock = threading.Lock()
        self._disconnected = threading.Condition(self._lock)
        self._streamed = threading.Condition(self._lock)
        # Bumped by cut_endless_streams(); each endless stream drops when it changes.
        self._endless_cuts = 0
        self._replies: deque[Reply] = deque()
        self._embedding_faults: deque[tuple[str, float]] = deque()
        self._moderation_faults: deque[tuple[str, float]] = deque()
        #: /moderations flags a text holding one of these words for its category.
        self.moderation_flags: dict[str, str] = {}
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

    def queue_moderation_fault(self, fault: str, *, retry_after: float = 2.0) -> None:
        """Make the next /moderations request fail (500, 429) or never answer (timeout)."""
        if fault not in EMBEDDING_FAULTS:
            raise ValueError(f"unknown moderation fault {fault!r}; expected {EMBEDDING_FAULTS}")
        with self._lock:
            self._moderation_faults.append((fault, retry_after))

    @property
    def queued(self) -> int:
        """How many scripted chat replies have not been consumed yet."""
        with self._lock:
            return len(self._replies)

    def wait_for_disconnect(self, timeout: float = 5, count: int = 1) -> bool:
        """Wait until at least `count` clients have gone away mid-response."""
        with self._disconnected:
            return self._disconnected.wait_for(lambda: self.disconnects >= count, timeout)

    def wait_for_chunks(self, count: int, timeout: float = 5) -> bool:
        """Wait until ``content_chunks`` reaches ``count`` (a reply is that far along)."""
        with self._streamed:
            return self._streamed.wait_for(lambda: self.content_chunks >= count, timeout)

    def cut_endless_streams(self) -> None:
        """Drop the connection of every "endless" stream running now, as a dying server would."""
        with self._lock:
            self._endless_cuts += 1

    # ----------------------------------------------------------------- used by the handler

    def _next_reply(self) -> Reply:
        with self._lock:
            if self._replies:
                return self._replies.popleft()
        return Reply(text=self.default_text, delay=self.default_delay)

    def _next_embedding_fault(self) -> tuple[str, float] | None:
        with self._lock:
            return self._embedding_faults.popleft() if self._embedding_faults else None

    def _next_moderation_fault(self) -> tuple[str, float] | None:
        with self._lock:
            return self._moderation_faults.popleft() if self._moderation_faults else None

    def _record(self, entry: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append(entry)

    def _count_chunk(self) -> None:
        with self._streamed:
            self.content_chunks += 1
            self._streamed.notify_all()

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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m tests.fakes.openai_server",
        description=(
            "Run the fake OpenAI-compatible model server in the foreground. It prints its base "
            "URL; point Campfire at it with CAMPFIRE_MODEL_URL=<that URL> and "
            "CAMPFIRE_MODEL_NAME=fake-model (or --model's name). Every chat reply streams the "
            'same text: --text\'s, else "The story goes on."'
        ),
    )
    parser.add_argument("--port", type=int, default=0, help="port to bind (default: any free)")
    parser.add_argument(
        "--text",
        default=None,
        help='the text every chat reply streams (default: "The story goes on.")',
    )
    parser.add_argument("--delay", type=float, default=0.0, help="seconds between chunks")
    parser.add_argument(
        "--replies",
        default=None,
        help="a JSON file holding a list of texts: the chat replies, one a request, in order "
        "(then --text's)",
    )
    parser.add_argument(
        "--model", default="fake-model", help="chat model name to accept (default: fake-model)"
    )
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
    if args.replies is not None:
        with open(args.replies, encoding="utf-8") as file:
            scripted = json.load(file)
        if not isinstance(scripted, list) or not all(isinstance(t, str) for t in scripted):
            parser.error("--replies: expected a JSON list of texts")
        fake.queue(*(Reply(text=text, delay=args.delay) for text in scripted))
    # Ctrl-C stops it even when started from a shell's background job, which hands its
    # children SIGINT ignored (Python then installs no KeyboardInterrupt handler of its own).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with fake:
        # The address is printed inside the try: whoever reads it may press Ctrl-C at once,
        # before this thread has run another line.
        try:
            print(fake.base_url, flush=True)
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
