"""Storage: tables and the database they live in."""

from engine.storage import play_models as _play_models  # noqa: F401  (registers its tables)
from engine.storage.database import Database

__all__ = ["Database"]
