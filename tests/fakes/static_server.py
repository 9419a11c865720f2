"""A plain HTTP server that answers every POST with one fixed response.

For replies the fake model server has no script for: an HTML page where a model should be,
hand-made event streams, odd JSON shapes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@contextmanager
def static_server(
    status: int, content_type: str, body: bytes, headers: dict[str, str] | None = None
) -> Iterator[str]:
    """Serve on 127.0.0.1; yields the base URL (``http://127.0.0.1:PORT``). ``headers`` go
    with every answer (a ``Location`` for a redirect)."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
            pass

    with _serving(Handler) as url:
        yield url


@contextmanager
def endless_server(
    status: int, content_type: str, head: bytes, filler: bytes, *, most: int = 512 * 1024 * 1024
) -> Iterator[tuple[str, list[int]]]:
    """Answer every POST with ``head`` and then ``filler`` again and again, until the client
    goes away (or ``most`` bytes, so a test that fails does not run for ever). Yields the base
    URL and a list that gets, per answer, how many bytes were sent before the client left."""
    sent: list[int] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.end_headers()  # no length: the body ends when the connection does
            total = 0
            try:
                self.wfile.write(head)
                total += len(head)
                while total < most:
                    self.wfile.write(filler)
                    total += len(filler)
            except OSError:
                pass  # the client stopped reading and closed
            finally:
                sent.append(total)
            self.close_connection = True

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
            pass

    with _serving(Handler) as url:
        yield url, sent


@contextmanager
def _serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """``handler`` served on 127.0.0.1 in a thread; yields the base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01})
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=2)
