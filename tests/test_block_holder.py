"""The stream never shows a state block, however the model's tokens split its fence."""

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.story.world.apply import BlockHolder

PROSE = "Gwen draws her bow. `Quiet`, she mouths."
BLOCK = '```state\n{"player": {"hp": -5}}\n```'


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=len(PROSE + BLOCK) + 2), max_size=12))
def test_prose_streams_and_the_block_never_does(cuts):
    text = f"{PROSE}\n\n{BLOCK}"
    points = sorted({c for c in cuts if c < len(text)})
    pieces = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    holder = BlockHolder()
    shown = "".join(holder.feed(piece) for piece in pieces)
    assert "```" not in shown
    assert shown.rstrip() == PROSE


def test_text_without_a_block_streams_whole():
    holder = BlockHolder()
    assert (
        "".join(holder.feed(p) for p in ["The ", "road ", "winds `on`."]) == "The road winds `on`."
    )
