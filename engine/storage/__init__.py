"""Storage: tables and the database they live in."""

from engine.storage import play_models as _play_models  # noqa: F401  (registers its tables)
from engine.storage.database import Database

# Tables kept in modules of their own register on the metadata with the rest.
import engine.storage.story_state_models  # noqa: E402, F401  isort: skip

__all__ = ["Database"]
