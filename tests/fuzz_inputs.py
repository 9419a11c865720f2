"""Inputs the import fuzz tests share: the fixture files, and JSON values built from the field
names the readers look for (so random files reach deep into the readers, not only the
format detection)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import strategies as st

DATA = Path(__file__).parent / "data"

FIXTURES = [path.read_bytes() for path in sorted(DATA.glob("*.json"))]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(
            st.sampled_from(
                [
                    "title",
                    "prompt",
                    "memory",
                    "authorsNote",
                    "storyCards",
                    "worldInfo",
                    "keys",
                    "value",
                    "entry",
                    "options",
                    "gameCode",
                    "entries",
                    "data",
                    "spec",
                    "content",
                    "key",
                    "text",
                    "story_cards",
                    "scripts",
                    "stat_schema",
                    "campfire",
                    "version",
                    "details",
                    "instructions",
                    "character_book",
                    "lorebookVersion",
                    "tags",
                ]
            )
            | st.text(max_size=8),
            children,
            max_size=6,
        )
    ),
    max_leaves=30,
)
