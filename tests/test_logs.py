"""The process's log: discord.py's gateway warnings that repeat on a timer are said once a
while, with a count of those held (issue: "Can't keep up … 41.3s behind" every 41 s while the
embedded model worked)."""

from __future__ import annotations

import logging

from bot.logs import RepeatsOnce
from engine.platform.redaction import _redacting_factory


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _shown(records: list[logging.LogRecord]) -> list[str]:
    return [r.getMessage() for r in records]


def test_a_warning_repeated_on_a_timer_is_said_once_then_counted():
    clock = _Clock()
    seen: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    log = logging.getLogger("tests.logs.gateway")
    log.propagate = False
    log.setLevel(logging.DEBUG)
    handler = Keep()
    log.addHandler(handler)
    log.addFilter(RepeatsOnce(window=600, clock=clock))
    # As the process makes records: formatted and redacted where they are made (bot.logs sets
    # redaction up before the first record), so the filter must know a warning by its format.
    made = logging.getLogRecordFactory()
    logging.setLogRecordFactory(_redacting_factory(made))
    try:
        behind = "Can't keep up, shard ID %s websocket is %.1fs behind."
        log.warning(behind, 0, 41.3)
        for _ in range(13):  # every heartbeat for about nine minutes
            clock.now += 41.25
            log.warning(behind, 0, 41.3)
        log.warning("Shard ID %s has stopped responding to the gateway.", 0)  # another warning
        log.info("Shard ID %s has connected to Gateway", 0)  # under WARNING: never held
        log.info("Shard ID %s has connected to Gateway", 0)
        assert _shown(seen) == [
            "Can't keep up, shard ID 0 websocket is 41.3s behind.",
            "Shard ID 0 has stopped responding to the gateway.",
            "Shard ID 0 has connected to Gateway",
            "Shard ID 0 has connected to Gateway",
        ]
        clock.now += 100  # past the window since the first line: said again, with the count
        log.warning(behind, 0, 12.0)
        assert _shown(seen)[-1] == (
            "Can't keep up, shard ID 0 websocket is 12.0s behind. "
            "(13 more like it were not logged in the last 636 s)"
        )
    finally:
        logging.setLogRecordFactory(made)
        log.removeHandler(handler)
        log.filters.clear()
