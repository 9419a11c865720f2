"""The console: play Campfire in a terminal through the local Discord stand-in."""

from bot.console.app import Console, run_console

__all__ = ["Console", "run_console"]
