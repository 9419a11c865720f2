"""A trial's bot in a process of its own, driven over its standard input and output with one
JSON object a line, so that the trial can kill it for real (SIGKILL) and start it again.

The program (``tests.trials.bot_process``, ``tests.trials.cluster_process``) takes its
argument as JSON, writes one line when it is ready (``{"ready": pid, …}``), answers each order
with one line, and on ``{"quit": true}`` closes the bot, writes a last line and ends. Its logs
go to the trial's log file.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[2]


class ChildProcess:
    """One run of a child program at a time; ``start`` again after a kill."""

    def __init__(
        self,
        module: str,
        argument: dict[str, Any],
        log: IO[bytes],
        *,
        start_seconds: float,
        order_seconds: float,
    ) -> None:
        self.module = module
        #: The program's argument; change it before starting it again.
        self.argument = argument
        self.log = log
        self.start_seconds = start_seconds
        self.order_seconds = order_seconds
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> dict[str, Any]:
        """Start it; its ready line."""
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            self.module,
            json.dumps(self.argument),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=self.log,
            # An order for a thousand players is answered in one line.
            limit=64 * 1024 * 1024,
            cwd=ROOT,
        )
        ready = await self._read(self.start_seconds)
        if ready is None or "ready" not in ready:
            raise RuntimeError(f"{self.module} did not start: {ready!r}")
        return ready

    async def order(self, order: dict[str, Any]) -> dict[str, Any] | None:
        """Send one order; its answer, or None when the process died first."""
        assert self.process is not None and self.process.stdin is not None
        try:
            self.process.stdin.write((json.dumps(order) + "\n").encode())
            await self.process.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            return None
        return await self._read(self.order_seconds)

    async def _read(self, seconds: float) -> dict[str, Any] | None:
        assert self.process is not None and self.process.stdout is not None
        line = await asyncio.wait_for(self.process.stdout.readline(), seconds)
        return json.loads(line) if line else None

    async def kill(self) -> None:
        assert self.process is not None
        self.process.kill()  # SIGKILL: no cleanup of any kind
        await self.process.wait()

    async def close(self) -> dict[str, Any] | None:
        """Stop it as a shutdown would; its last line, if it wrote one."""
        if self.process is None or self.process.returncode is not None:
            return None
        last = None
        with contextlib.suppress(BrokenPipeError, ConnectionResetError, TimeoutError):
            last = await self.order({"quit": True})
        try:
            await asyncio.wait_for(self.process.wait(), 30)
        except TimeoutError:
            await self.kill()
        return last
