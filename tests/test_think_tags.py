"""Property and example tests of ``ThinkTagSplitter``.

The splitter's contract, stated against a small reference parser of the whole reply:

    reply == W0 + "<think>" + R1 + "</think>" + W1 + ... + "<think>" + Rn ["</think>" + Wn] + T

where every ``Wi`` is whitespace only (possibly empty), no ``Ri`` contains "</think>" and
``T`` is empty or starts with a non-whitespace character and not with "<think>". The reasoning
the splitter yields is ``R1 + ... + Rn`` and the text is ``T``: only the tags and the
whitespace before the story are removed, whichever way the reply was cut into pieces.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.llm.providers.base import ThinkTagSplitter
from engine.platform.events import ReasoningDelta, TextDelta

OPEN, CLOSE = ThinkTagSplitter.OPEN, ThinkTagSplitter.CLOSE

# Fragments that make tags, near-tags and tag pieces common in generated replies.
FRAGMENTS = [
    OPEN,
    CLOSE,
    "<",
    "</",
    "<th",
    "<think",
    "</thi",
    "think",
    ">",
    "<thinking>",
    "<<think>",
    " ",
    "\n",
    "\t",
    "a",
    "Story.",
    "é",
    "🔥",
]

replies = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=4)), max_size=14).map(
    "".join
)

PROPERTY_SETTINGS = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def split(pieces: list[str]) -> tuple[str, str, list[TextDelta | ReasoningDelta]]:
    """Feed the pieces, then flush; the joined reasoning, the joined text and all deltas."""
    splitter = ThinkTagSplitter()
    deltas: list[TextDelta | ReasoningDelta] = []
    for piece in pieces:
        deltas.extend(splitter.feed(piece))
    deltas.extend(splitter.flush())
    reasoning = "".join(d.text for d in deltas if isinstance(d, ReasoningDelta))
    text = "".join(d.text for d in deltas if isinstance(d, TextDelta))
    return reasoning, text, deltas


def reference(reply: str) -> list[tuple[str, str]]:
    """The reply cut into labelled segments: "ws", "tag", "reasoning" and "text"."""
    segments: list[tuple[str, str]] = []
    i = 0
    while True:
        start = i
        while i < len(reply) and reply[i].isspace():
            i += 1
        segments.append(("ws", reply[start:i]))
        if not reply.startswith(OPEN, i):
            segments.append(("text", reply[i:]))
            return segments
        segments.append(("tag", OPEN))
        i += len(OPEN)
        end = reply.find(CLOSE, i)
        if end < 0:  # never closed: the rest is reasoning
            segments.append(("reasoning", reply[i:]))
            return segments
        segments.append(("reasoning", reply[i:end]))
        segments.append(("tag", CLOSE))
        i = end + len(CLOSE)


def joined(segments: list[tuple[str, str]], kind: str) -> str:
    return "".join(s for k, s in segments if k == kind)


@st.composite
def cut_reply(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A reply and the same reply cut at arbitrary points (empty pieces included)."""
    reply = draw(replies)
    cuts = sorted(draw(st.lists(st.integers(0, len(reply)), max_size=8)))
    bounds = [0, *cuts, len(reply)]
    return reply, [reply[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


# --------------------------------------------------------------------------- properties


@PROPERTY_SETTINGS
@given(cut_reply())
def test_pieces_give_the_same_result_as_the_whole_reply(case: tuple[str, list[str]]) -> None:
    reply, pieces = case
    assert "".join(pieces) == reply
    reasoning, text, deltas = split(pieces)
    assert (reasoning, text) == split([reply])[:2]
    assert all(d.text for d in deltas), "no empty deltas"


@PROPERTY_SETTINGS
@given(cut_reply())
def test_only_tags_and_leading_whitespace_are_removed(case: tuple[str, list[str]]) -> None:
    reply, pieces = case
    segments = reference(reply)
    # The reference really is a partition of the reply, and drops only tags and whitespace.
    assert "".join(s for _, s in segments) == reply
    assert all(s in (OPEN, CLOSE) for k, s in segments if k == "tag")
    assert all(not s.strip() for k, s in segments if k == "ws")
    reasoning, text, _ = split(pieces)
    assert reasoning == joined(segments, "reasoning")
    assert text == joined(segments, "text")
    assert reply.endswith(text)


@PROPERTY_SETTINGS
@given(st.text(min_size=1, max_size=6), replies)
def test_a_think_tag_after_story_text_stays_in_the_story(story: str, rest: str) -> None:
    reply = story + OPEN + rest
    if not reply.lstrip() or reply.lstrip().startswith(OPEN):
        return  # no story before the tag
    cuts = [len(story) // 2, len(story), len(story) + 3, len(story) + len(OPEN) + 1]
    bounds = [0, *cuts, len(reply)]
    pieces = [reply[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    reasoning, text, _ = split(pieces)
    assert reasoning == ""
    assert text == reply.lstrip()
    assert split([reply])[:2] == ("", reply.lstrip())


# --------------------------------------------------------------------------- examples


def test_a_think_block_then_story() -> None:
    reasoning, text, deltas = split(["<think>plan the cave</think>\n\nThe cave is dark."])
    assert reasoning == "plan the cave"
    assert text == "The cave is dark."
    assert isinstance(deltas[0], ReasoningDelta)
    assert isinstance(deltas[-1], TextDelta)


def test_tags_split_character_by_character() -> None:
    reply = "<think>a plan</think> Story goes on."
    assert split(list(reply))[:2] == ("a plan", "Story goes on.")


def test_no_tags_is_all_text() -> None:
    assert split(["Once ", "upon ", "a time."])[:2] == ("", "Once upon a time.")


def test_an_unclosed_think_block_is_all_reasoning() -> None:
    assert split(["<think>still thinking", " about it</thi"])[:2] == (
        "still thinking about it</thi",
        "",
    )


def test_a_think_tag_mid_story_is_story_text_in_one_piece_or_many() -> None:
    reply = 'She whispered "<think>" and</think> laughed.'
    assert split([reply])[:2] == ("", reply)
    assert split(["She whispered ", '"<think>" and</think> laughed.'])[:2] == ("", reply)
    assert split(["She whispered <thi", "nk> twice"])[:2] == ("", "She whispered <think> twice")


def test_a_partial_tag_that_never_completes_is_text() -> None:
    assert split(["<thi", "s is a story"])[:2] == ("", "<this is a story")
    assert split(["<thin"])[:2] == ("", "<thin")


def test_two_leading_think_blocks_are_both_reasoning() -> None:
    assert split(["<think>a</think>\n<think>b</think>Go."])[:2] == ("ab", "Go.")


def test_whitespace_only_reply_yields_nothing() -> None:
    assert split(["  ", "\n"]) == ("", "", [])
    assert split([]) == ("", "", [])
