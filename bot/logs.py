"""Where the process's log goes, and how loud each library may be in it.

One warning a library repeats on a timer says nothing new after its first line: discord.py's
gateway keep-alive thread warns "Can't keep up, shard ID 0 websocket is 41.3s behind" at
every heartbeat (41.25 s) while the event loop or the machine's cores are busy, and the
embedded model keeps every core busy for as long as it writes. ``RepeatsOnce`` lets the first
line of each such warning through and holds its repeats for a while, then says how many it held
with the next one, so a long run neither hides the condition nor fills the log with it."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from bot.config import Settings
from engine.platform.redaction import redact_logs, template_of
from engine.storage.private_files import private_file

#: Libraries whose INFO lines are routine (APScheduler logs each run of every job: the sweeps
#: run every 30 s).
QUIET_LOGGERS = ("httpx", "httpcore", "discord.gateway", "apscheduler")

#: How long a repeated warning of discord.py's gateway is held after its last shown line.
REPEAT_WINDOW_SECONDS = 600.0


class RepeatsOnce(logging.Filter):
    """A record whose format string (``template_of``, before its arguments: "websocket is
    %.1fs behind" is one warning whatever the figure) was let through less than ``window``
    seconds ago is held; the next one let through says how many were held. Per process (each
    has its own log). A logger's filters run without a lock, in whichever thread logs (the
    keep-alive thread, the loop): each dict update is atomic, and two threads racing at most
    miscount a held line."""

    def __init__(
        self, window: float = REPEAT_WINDOW_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        self.window = window
        self.clock = clock
        self._shown_at: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        key = template_of(record)
        now = self.clock()
        shown = self._shown_at.get(key)
        if shown is not None and now - shown < self.window:
            self._held[key] = self._held.get(key, 0) + 1
            return False
        self._shown_at[key] = now
        held = self._held.pop(key, 0)
        if held and shown is not None:
            record.msg = (
                f"{record.getMessage()} ({held} more like it were not logged "
                f"in the last {now - shown:.0f} s)"
            )
            record.args = None
        return True


def configure_logging(settings: Settings, *, to_file: bool) -> None:
    """The root handler (a file in the data folder for the console, whose terminal is for the
    story; standard error otherwise), credentials redacted from every record, the quiet
    libraries at WARNING or above, and discord.py's gateway warnings said once a while."""
    # Before the first record: no credential reaches a log, from Campfire or a library.
    redact_logs(settings.secret_values)
    level = settings.log_level.upper()
    form = "%(asctime)s %(levelname)s %(name)s: %(message)s"
    if to_file:
        path = private_file(settings.ensure_data_dir() / "campfire.log")
        logging.basicConfig(filename=path, level=level, format=form)
    else:
        logging.basicConfig(level=level, format=form)
    for noisy in QUIET_LOGGERS:
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLevelName(level)))
    gateway = logging.getLogger("discord.gateway")
    if not any(isinstance(f, RepeatsOnce) for f in gateway.filters):
        gateway.addFilter(RepeatsOnce())
