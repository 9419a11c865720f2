"""Keeping credentials out of everything Campfire shows or writes down.

An endpoint's address may carry a password (``http://user:password@host/v1``, a database URL)
or a key in its query string (``?api_key=…``), and the operator's API keys and Discord token
must never reach a player, a log file or a config error. One set of rules covers them all:

* ``redact_url``: an address as it may be logged (``user:password@`` and query secrets masked);
* ``host_of``: only the host (and port) of an address, which is all a player is shown;
* ``Redactor``: free text with every address in it redacted and the known secret values masked;
* ``redact_logs``: the same for every log record the process makes, whichever handler writes it.
"""

from __future__ import annotations

import logging
import re
import traceback
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import unquote, urlsplit

MASK = "***"

#: Shorter values are not masked wherever they appear: a three-letter "secret" would blank out
#: ordinary words in every log line, and is no secret worth the name anyway.
MIN_SECRET_LENGTH = 4

# ``scheme://user:password@`` up to the last "@" before the path: a password with a raw "@" in
# it is still removed whole.
_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^/?#\s]*@")
# ``user:password@host`` without a scheme, as in a label ("model at user:pw@host:11434").
_BARE_USERINFO = re.compile(r"(?<![\w.+-])[^\s/@:'\"(]+:[^\s/@'\"]+@(?=[\w\[])")
# Query parameters (and ``key=value`` pairs in free text) that carry credentials.
_QUERY_SECRET = re.compile(
    r"(?P<name>(?<![\w-])(?:api[-_]?key|key|token|access[-_]?token|auth|secret|password|passwd"
    r"|pwd|sig|signature)=)[^&#\s'\"]+",
    re.IGNORECASE,
)
_BEARER = re.compile(r"(?P<name>\b(?:Bearer|Basic)\s+)[A-Za-z0-9._~+/=-]+")
# A slash-command option that carries a secret (``/model set key:``), as a raw interaction
# payload shows it in a library's debug log (discord.py logs every gateway event at DEBUG,
# before Campfire sees it): a flat option object, in JSON or a Python dict's repr, naming it.
SECRET_OPTIONS = ("key",)
_SECRET_OPTION = re.compile(
    r"""\{[^{}]*?["']name["']\s*:\s*["'](?:""" + "|".join(SECRET_OPTIONS) + r""")["'][^{}]*\}"""
)
_OPTION_VALUE = re.compile(
    r"""(?P<name>["']value["']\s*:\s*)(?P<q>["'])(?:\\.|(?!(?P=q)).)*(?P=q)"""
)


def redact_url(url: str) -> str:
    """``url`` with its ``user:password@`` and its secret query parameters masked."""
    return _redact_addresses(url)


def host_of(url: str) -> str:
    """The host and port of ``url``, never its credentials; the whole text when it has none."""
    try:
        netloc = urlsplit(url).netloc
    except ValueError:
        netloc = ""
    if not netloc:
        return _redact_addresses(url)
    # The userinfo ends at the last "@" (a raw "@" in a password is not a host).
    return netloc.rpartition("@")[2]


def _redact_addresses(text: str) -> str:
    text = _USERINFO.sub(rf"\g<scheme>{MASK}@", text)
    text = _BARE_USERINFO.sub(f"{MASK}@", text)
    text = _QUERY_SECRET.sub(rf"\g<name>{MASK}", text)
    text = _SECRET_OPTION.sub(
        lambda found: _OPTION_VALUE.sub(rf"\g<name>\g<q>{MASK}\g<q>", found.group(0)), text
    )
    return _BEARER.sub(rf"\g<name>{MASK}", text)


def url_secrets(url: str | None) -> tuple[str, ...]:
    """The password (and its decoded form) in ``url``'s userinfo, to mask wherever it appears."""
    if not url:
        return ()
    try:
        password = urlsplit(url).password
    except ValueError:
        return ()
    if not password:
        return ()
    return tuple({password, unquote(password)})


class Redactor:
    """Redacts addresses in free text and masks the secret values it was given."""

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        values = {value for value in secrets if value and len(value) >= MIN_SECRET_LENGTH}
        # Longest first, so a secret that contains another is masked whole.
        self.secrets = tuple(sorted(values, key=len, reverse=True))

    def __call__(self, text: str) -> str:
        text = _redact_addresses(text)
        for secret in self.secrets:
            text = text.replace(secret, MASK)
        return text


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with addresses redacted and ``secrets`` masked."""
    return Redactor(secrets)(text)


# --- logs ----------------------------------------------------------------------------------------

_log_redactor = Redactor()
_factory_installed = False


def redact_logs(secrets: Iterable[str | None] = ()) -> None:
    """From now on, every log record this process makes is redacted: its message, its arguments
    and its traceback, with ``secrets`` masked too (the latest call's set).

    The redaction happens where records are made (the log record factory), not in one handler:
    a record reaches every handler, the file, the terminal and whatever a library or a test
    adds, already clean. Records below a logger's level are never made, so this costs nothing
    for the debug lines that are off.
    """
    global _log_redactor, _factory_installed
    _log_redactor = Redactor(secrets)
    if not _factory_installed:
        logging.setLogRecordFactory(_redacting_factory(logging.getLogRecordFactory()))
        _factory_installed = True


def _redacting_factory(make: Callable[..., logging.LogRecord]) -> Callable[..., logging.LogRecord]:
    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make(*args, **kwargs)
        _redact_record(record, _log_redactor)
        return record

    return factory


#: The attribute a redacted record keeps its format string in (redacted too): the message is
#: formatted where the record is made, and a filter that tells one warning from another by its
#: format ("websocket is %.1fs behind", whatever the figure) reads it here.
TEMPLATE = "campfire_template"


def template_of(record: logging.LogRecord) -> str:
    """The record's format string, before its arguments were put in."""
    return getattr(record, TEMPLATE, None) or str(record.msg)


def _redact_record(record: logging.LogRecord, redactor: Redactor) -> None:
    if not hasattr(record, TEMPLATE):
        setattr(record, TEMPLATE, redactor(str(record.msg)))
    try:
        message = record.getMessage()
    except Exception:
        # Arguments that do not fit the format: logging reports that when the record is
        # written; what can be redacted here is the format itself.
        record.msg = redactor(str(record.msg))
    else:
        record.msg, record.args = redactor(message), None
    if record.exc_info and not record.exc_text:
        # Formatters use the cached text when there is one.
        record.exc_text = redactor("".join(traceback.format_exception(*record.exc_info)).rstrip())
    if record.stack_info:
        record.stack_info = redactor(record.stack_info)


def mask_in_logs(*secrets: str | None) -> None:
    """Add secrets learned while running (a server's or player's API key, decrypted to be
    used) to those every log record masks from now on."""
    redact_logs((*_log_redactor.secrets, *secrets))
