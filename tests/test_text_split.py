"""Splitting narration into Discord-sized pieces: exactness, sizes, boundary choice, stability."""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cogs.ui.text_split import display_pieces, split_message, take_piece

# Small alphabets and small limits, so that every kind of boundary (and none) turns up often.
ALPHABET = st.sampled_from(list("abcdé  ..!?…\"”'\n\n\t") + ["\u0301", "\u200d", "🙂"])
TEXTS = st.text(ALPHABET, max_size=300)
LIMITS = st.integers(min_value=1, max_value=60)

BLANK_LINE = re.compile(r"\n[^\S\n]*\n")
SENTENCE_BEFORE_SPACE = re.compile(r"[.!?…]+[\"'”’»)\]*_~|]*\s\Z")


def _no_space(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _window_runs(window: str) -> list[re.Match[str]]:
    """Whitespace runs in the window with something other than whitespace before them."""
    return [m for m in re.finditer(r"\s+", window) if m.start() > 0]


@settings(max_examples=400)
@given(TEXTS, LIMITS)
@example("Hello there.\n\nGeneral Kenobi!", 20)
@example("   \n\n  ", 3)
def test_pieces_rejoin_exactly_fit_and_are_never_empty(text: str, limit: int) -> None:
    pieces = split_message(text, limit)
    assert "".join(pieces) == text
    assert all(0 < len(p) <= limit for p in pieces)
    assert (pieces == []) == (text == "")


@settings(max_examples=400)
@given(TEXTS, LIMITS)
def test_display_pieces_lose_only_whitespace(text: str, limit: int) -> None:
    shown = display_pieces(text, limit)
    assert shown == [p.strip() for p in split_message(text, limit) if p.strip()]
    assert all(p and p == p.strip() and len(p) <= limit for p in shown)
    assert _no_space("\n\n".join(shown)) == _no_space(text)
    assert _no_space(" ".join(shown)) == _no_space(text)


@settings(max_examples=600)
@given(TEXTS, LIMITS)
def test_the_cut_takes_the_best_kind_of_boundary_in_the_window(text: str, limit: int) -> None:
    piece, rest = take_piece(text, limit)
    assert piece + rest == text
    if len(text) <= limit:
        assert (piece, rest) == (text, "")
        return
    window = text[: limit + 1]
    runs = _window_runs(window)
    # The whitespace around the cut, seen through the same window.
    start = len(piece.rstrip())
    cut_run = next((m for m in runs if m.start() == start), None)
    if any(BLANK_LINE.search(m.group()) for m in runs):
        assert cut_run is not None and BLANK_LINE.search(cut_run.group()), (piece, rest)
    elif any("\n" in m.group() for m in runs):
        assert cut_run is not None and "\n" in cut_run.group(), (piece, rest)
    elif any(SENTENCE_BEFORE_SPACE.search(window[: m.start() + 1][-13:]) for m in runs):
        assert cut_run is not None
        assert SENTENCE_BEFORE_SPACE.search(window[: start + 1][-13:]), (piece, rest)
    elif runs:
        assert cut_run is not None, (piece, rest)
    else:
        assert len(piece) <= limit  # a hard cut


@settings(max_examples=400)
@given(TEXTS, TEXTS, LIMITS)
def test_settled_pieces_never_change_as_the_text_grows(text: str, more: str, limit: int) -> None:
    before = split_message(text, limit)
    after = split_message(text + more, limit)
    settled = before[:-1]
    assert after[: len(settled)] == settled


def test_prefers_the_last_paragraph_break_in_the_window() -> None:
    text = "One.\n\nTwo two.\n\nThree three three. Four four four four four four"
    piece, rest = take_piece(text, 40)
    assert piece == "One.\n\nTwo two.\n\n"
    assert rest.startswith("Three")


def test_prefers_a_line_break_to_a_sentence_end() -> None:
    piece, _ = take_piece("Line one. Still one\nline two. More words here", 30)
    assert piece == "Line one. Still one\n"


def test_sentence_end_with_a_closing_quote() -> None:
    text = 'He said, "Go now." Then he left without another word'
    piece, rest = take_piece(text, 30)
    assert piece == 'He said, "Go now." '
    assert rest == "Then he left without another word"
    piece, _ = take_piece("It ended… And then more words came along", 20)
    assert piece == "It ended… "
    piece, _ = take_piece("Really?! Yes, yes it is true", 20)
    assert piece == "Really?! "


def test_falls_back_to_a_space_then_a_hard_cut() -> None:
    assert take_piece("alpha beta gamma delta", 12) == ("alpha beta ", "gamma delta")
    assert take_piece("abcdefghij", 4) == ("abcd", "efghij")


def test_hard_cut_keeps_combining_marks_with_their_letter() -> None:
    text = "abcde\u0301fgh"  # é as e + combining acute at index 5
    piece, rest = take_piece(text, 5)
    assert piece == "abcd" and rest == "e\u0301fgh"


def test_leading_whitespace_is_not_a_boundary() -> None:
    piece, rest = take_piece("\n\nabcdefgh ij", 11)
    assert piece == "\n\nabcdefgh "
    assert rest == "ij"
    # Only leading whitespace: a hard cut, not an empty-looking piece.
    assert take_piece("\n\nabcdefghij", 6) == ("\n\nabcd", "efghij")


def test_boundary_right_after_the_window_counts() -> None:
    # The space after "end." is the character just past the limit: cutting before it is fine.
    piece, rest = take_piece("word word end. Next", 14)
    assert piece == "word word end."
    assert rest == " Next"


def test_a_discord_sized_split() -> None:
    paragraph = "The lantern swings as the road bends toward the river. " * 6
    text = "\n\n".join(paragraph.strip() for _ in range(14))
    pieces = split_message(text)
    assert len(pieces) >= 3
    assert "".join(pieces) == text
    assert all(len(p) <= 2000 for p in pieces)
    assert all(p.endswith("\n\n") for p in pieces[:-1])


def test_limit_must_be_positive() -> None:
    with pytest.raises(ValueError):
        take_piece("abc", 0)
