"""The console: play Campfire in a terminal."""

from bot.console.legacy import Console, run_console

__all__ = ["Console", "run_console"]
