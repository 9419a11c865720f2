"""The TLS contexts this process's HTTP clients share.

Making a context loads a store of certificate authorities, about a tenth of a second of CPU
(certifi's bundle, or the system's), and every httpx client made its own: each provider, each
embedding and moderation client, each player's endpoint. A context is never changed after it
is made here, and Python's ``ssl`` lets any number of connections and threads use one
(docs.python.org, ssl: "SSL contexts"), so one of each kind serves the whole process.
"""

from __future__ import annotations

import ssl
from functools import cache

import httpx


@cache
def default_tls() -> ssl.SSLContext:
    """What an httpx client verifies with by default: certifi's authorities, or the file or
    folder ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` name (read once, when first asked)."""
    return httpx.create_ssl_context()


@cache
def system_tls() -> ssl.SSLContext:
    """The system's trust store, verification always on: for players' endpoints
    (``endpoint_policy.GuardedTransport``), whose server cannot turn it off."""
    return ssl.create_default_context()
