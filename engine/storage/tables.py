"""Every table module, imported once: with this module loaded, SQLModel's metadata holds all of
Campfire's tables (what the migrations compare the database with, ``engine/migrations/env.py``,
and ``tests/test_storage.py``). A new table module is named here.

Code that reads or writes a table imports its class from the module that defines it; nothing
else needs this list.
"""

from engine.storage import (  # noqa: F401  (each registers its tables)
    card_proposal_models,
    chapter_models,
    coordination_models,
    knowledge_models,
    limit_models,
    memory_models,
    models,
    party_models,
    play_models,
    report_models,
    story_state_models,
)
