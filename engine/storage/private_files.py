"""Campfire's own files, readable by its user alone: the data folder, the database, the log and
the secret key.

The database holds every story and the encrypted API keys, the secret key decrypts them, and
the log names players and servers: none of it is for the machine's other users. New ones are
created owner-only from the start (not created, then narrowed). Files an earlier version left
readable are narrowed at start-up, where they are this user's; a folder that already exists is
the operator's arrangement (a shared mount, a container volume) and keeps its mode.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

FOLDER_MODE = 0o700
FILE_MODE = 0o600


def private_folder(path: Path) -> Path:
    """``path``, created (with its parents) as a folder only its owner may enter if missing."""
    path.mkdir(parents=True, exist_ok=True, mode=FOLDER_MODE)
    return path


def private_file(path: Path) -> Path:
    """``path`` as a file only its owner may read, created empty if missing."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))
    except FileExistsError:
        _narrow(path, FILE_MODE)
    return path


def private_sqlite_database(path: Path) -> None:
    """An SQLite database file (an empty one is a valid empty database) and the write-ahead log
    and shared-memory files beside it. SQLite creates those two with the database file's mode,
    so narrowing the database first is enough for new ones; older ones are narrowed here."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=FOLDER_MODE)
    private_file(path)
    for suffix in ("-wal", "-shm", "-journal"):
        sidecar = path.with_name(path.name + suffix)
        if sidecar.exists():
            _narrow(sidecar, FILE_MODE)


def _narrow(path: Path, mode: int) -> None:
    """Take away the group's and others' rights, where the file is this user's to change."""
    if os.name != "posix":
        return
    try:
        info = path.stat()
        if info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) & 0o077:
            path.chmod(stat.S_IMODE(info.st_mode) & mode)
    except OSError:
        pass  # not ours to change, or gone: the operator's arrangement stands
