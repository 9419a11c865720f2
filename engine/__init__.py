"""Campfire's engine: everything that is not Discord. Never imports discord."""
