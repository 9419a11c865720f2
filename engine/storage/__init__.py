"""Storage: tables and the database they live in. ``tables`` names every table module."""

from engine.storage.database import Database

__all__ = ["Database"]
