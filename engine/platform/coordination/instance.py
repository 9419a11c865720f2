"""Who this process is in lease rows: a name that outlives a restart, and the start it is in.

A lease row names its holder, and a restarted process must recognise the leases it held before
it died: otherwise every turn it was writing stays locked until the lease expires (30 s of
"the narrator is still writing" after a crash, though nothing runs). So a process has

* an **instance name**, the same after a restart: the operator's ``CAMPFIRE_INSTANCE_NAME``, or
  a name made up once and kept in the data folder;
* an **incarnation**, new at every start.

Its holder name in lease rows is ``<instance>/<incarnation>``. A lease held by the same instance
under another incarnation was held by this instance before it restarted: that process is dead,
so its leases are taken back at once (``engine.platform.coordination.leases``,
``engine.platform.coordination.jobs``).

That is only safe if two live processes never share an instance name. The data folder's name
file is locked (an exclusive ``flock``) for as long as the process lives, and the operating
system drops the lock when the process dies, kill -9 included. A second process on the same
data folder finds the lock taken and uses the next name file (``instance-1.lock`` …), so it is
another instance; a restarted process finds its old file free again and is the same instance.
An operator's ``CAMPFIRE_INSTANCE_NAME`` gets its own lock file, and a second live process with
that name on the same folder is refused. Processes on other machines have other data folders,
and so other names (a name made up here starts with the host's name and a random part); two
machines given one ``CAMPFIRE_INSTANCE_NAME`` by their operator are the one thing this cannot
notice.

``this_process`` is the one place that names a process.
"""

from __future__ import annotations

import os
import re
import secrets
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from sqlalchemy import ColumnElement, false

#: Between the instance name and the incarnation in a holder name; never in either.
SEPARATOR = "/"

#: What an instance name may hold: letters, digits and ``. _ : -``.
NAME_PATTERN = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")

#: Name files are tried in order; past this many live processes on one data folder, something
#: is wrong (a loop starting processes), and start-up says so.
MAX_SLOTS = 64


class InstanceTaken(Exception):
    """Another live process on this data folder is this instance already."""


@dataclass(frozen=True, slots=True)
class Instance:
    """This process in lease rows. Keep it for the process's life; ``close`` lets the name go."""

    name: str
    #: This start of the instance.
    incarnation: str
    #: The locked name file; the lock lasts as long as this handle is open.
    _lock: IO[str] | None = field(default=None, repr=False, compare=False)

    @property
    def holder(self) -> str:
        return f"{self.name}{SEPARATOR}{self.incarnation}"

    def close(self) -> None:
        """Let another process be this instance (the operating system does it at exit too)."""
        if self._lock is not None and not self._lock.closed:
            self._lock.close()


def this_process(data_dir: Path | None = None, *, name: str | None = None) -> Instance:
    """This process's identity: the instance ``name`` (or the one kept in ``data_dir``), locked
    for this process, in a new incarnation.

    Without a data folder or a name, a name nobody else has and no restart will share: nothing
    it holds is ever reclaimed early (its leases expire).
    """
    incarnation = secrets.token_hex(4)
    if data_dir is None:
        if name is not None:
            raise ValueError("an instance name needs a data folder for its lock")
        return Instance(f"{_host()}:{os.getpid()}:{secrets.token_hex(3)}", incarnation)
    data_dir.mkdir(parents=True, exist_ok=True)
    if name is not None:
        if not NAME_PATTERN.match(name):
            raise ValueError(f"an instance name is 1 to 64 of A-Z a-z 0-9 . _ : - (got {name!r})")
        handle = _open_locked(data_dir / f"instance-{name}.lock")
        if handle is None:
            raise InstanceTaken(
                f"another running Campfire process on {data_dir} is instance {name!r}; give "
                "each process its own instance name."
            )
        return Instance(name, incarnation, handle)
    for slot in range(MAX_SLOTS):
        handle = _open_locked(data_dir / f"instance-{slot}.lock")
        if handle is None:
            continue  # a live process is this one
        kept = handle.read().strip()
        if NAME_PATTERN.match(kept):
            return Instance(kept, incarnation, handle)
        made = f"{_host()}-{secrets.token_hex(4)}"
        handle.seek(0)
        handle.truncate()
        handle.write(made + "\n")
        handle.flush()
        return Instance(made, incarnation, handle)
    raise InstanceTaken(f"{MAX_SLOTS} Campfire processes already run on {data_dir}.")


def earlier_incarnation(column: Any, holder: str) -> ColumnElement[bool]:
    """SQL: ``column`` names the instance of ``holder`` in an earlier incarnation (a process
    that held this instance's lock before, so is dead now). A holder without an incarnation
    (a test's plain name) has none."""
    instance, separator, _ = holder.rpartition(SEPARATOR)
    if not separator:
        return false()
    return column.startswith(instance + SEPARATOR, autoescape=True) & (column != holder)


def _host() -> str:
    """The host's name as a name part: what NAME_PATTERN allows, shortened."""
    return re.sub(r"[^A-Za-z0-9.-]", "-", socket.gethostname())[:40] or "host"


def _open_locked(path: Path) -> IO[str] | None:
    """The file, opened and exclusively locked for this process; None if a live process has
    it locked. Created owner-only (0600) the first time."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    handle = os.fdopen(fd, "r+", encoding="utf-8")
    try:
        _lock(handle)
    except OSError:
        handle.close()
        return None
    return handle


def _lock(handle: IO[str]) -> None:
    """An exclusive lock that fails at once when held: ``flock`` (per open file, so two opens
    in one process conflict too, and the kernel drops it with the process)."""
    try:
        import fcntl
    except ImportError:  # Windows: a byte-range lock, dropped with the process too
        import msvcrt

        msvcrt.locking(handle.fileno(), msvcrt.LK_NBLCK, 1)  # type: ignore[attr-defined]
        return
    fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
