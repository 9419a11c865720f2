"""The one sanitiser: what it drops, what it mends, what it keeps, and the echo's cut."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.platform.sanitise import (
    ROW_ID_MAX,
    echo,
    row_id,
    sanitise,
    sanitise_code,
    sanitise_json,
)


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("open\x00 the door", "open the door"),
        ("bell\x07 and escape\x1b[31m", "bell and escape[31m"),
        ("one\r\ntwo\rthree\nfour", "one\ntwo\nthree\nfour"),
        ("tab\tstays", "tab\tstays"),
        ("del\x7f and c1\x85\x9b", "del and c1"),
        ("lone \ud800 high", "lone \ufffd high"),
        ("lone \udc00 low", "lone \ufffd low"),
        ("\ud83d\ude00 a pair split in two", "😀 a pair split in two"),
    ],
)
def test_what_is_dropped_and_mended(raw, clean):
    assert sanitise(raw) == clean
    clean.encode("utf-8")  # storable and sendable


@pytest.mark.parametrize(
    "text",
    [
        "👩‍👩‍👧 family, 👍🏽 thumbs, 🇫🇷 flag",  # joiners, modifiers, regional indicators
        "e\u0301 and a\u0308 and Z̷̢a̸l̶g̵o",  # combining marks
        "שלום world مرحبا, 日本語, Ελληνικά, हिन्दी",
        "\u200fright-to-left mark, \u202bembedding\u202c, \u2067isolate\u2069, \u200dzwj",
        "non\u00a0breaking and \u200bzero width space",
        "",
    ],
)
def test_real_text_is_kept(text):
    assert sanitise(text) == text


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(categories=["Cs", "Cc", "Cf", "L", "M", "So", "Zs"])))
def test_whatever_comes_in_goes_out_storable(text):
    clean = sanitise(text)
    clean.encode("utf-8")
    assert "\x00" not in clean and "\r" not in clean
    assert sanitise(clean) == clean


def test_code_loses_only_nul():
    code = "const s = 'a\x07b';\r\nlog(s)\x00\t"
    assert sanitise_code(code) == "const s = 'a\x07b';\r\nlog(s)\t"


def test_every_string_of_parsed_json():
    raw = {"ti\x00tle": ["a\x00", {"b": "c\ud800"}], "n": 5, "f": None}
    assert sanitise_json(raw) == {"title": ["a", {"b": "c\ufffd"}], "n": 5, "f": None}
    assert sanitise_json({"code": "x\x07\x00"}, sanitise_code) == {"code": "x\x07"}


def test_echo_cuts_to_the_limit_with_an_ellipsis():
    assert echo("short", 2000) == "short"
    cut = echo("word " * 1200, 2000)
    assert len(cut) <= 2000 and cut.endswith("…")
    assert echo("a\x00b" * 10, 5) == "abab…"
    assert len(echo("x" * 10, 1)) == 1


@pytest.mark.parametrize(
    ("typed", "found"),
    [
        ("42", 42),
        (" 7 ", 7),
        (str(ROW_ID_MAX), ROW_ID_MAX),
        (str(ROW_ID_MAX + 1), None),
        ("9" * 5000, None),
        ("0", None),
        ("-3", None),
        ("²", None),  # a digit to str.isdigit, not to int
        ("٣", None),  # an Arabic-Indic digit: no id is written so
        ("4a", None),
        ("", None),
    ],
)
def test_row_id(typed, found):
    assert row_id(typed) == found
