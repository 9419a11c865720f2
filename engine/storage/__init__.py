"""Storage: tables and the database they live in."""

from engine.storage.database import Database

__all__ = ["Database"]
