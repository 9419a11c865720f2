"""Discord's markup as the console shows it on a terminal, and timestamps as dates."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.console.markup import styled, timestamps, visible

BOLD, UNBOLD, ITALIC, UNITALIC, DIM = "\x1b[1m", "\x1b[22m", "\x1b[3m", "\x1b[23m", "\x1b[2m"


def test_marks_become_styles_and_take_no_room():
    shown = styled("⏩ *alice lets the story go on.*\n**Host controls** · it's __yours__")
    assert shown == (
        f"⏩ {ITALIC}alice lets the story go on.{UNITALIC}\n"
        f"{BOLD}Host controls{UNBOLD} · it's \x1b[4myours\x1b[24m"
    )
    assert visible(shown) == "⏩ alice lets the story go on.\nHost controls · it's yours"


def test_subtext_headings_code_and_fences():
    shown = styled("# The Lantern Road\n-# hp 100 → 85\n```js\ntext = `hi`\n```")
    assert visible(shown) == "The Lantern Road\nhp 100 → 85\n\ntext = hi\n"
    assert shown.startswith(f"{BOLD}The Lantern Road{UNBOLD}\n{DIM}hp 100 → 85{UNBOLD}")


def test_a_lone_star_or_underscore_is_left_alone():
    for text in ("5 * 3 = 15", "snake_case_name", "a * b * c", "*"):
        assert styled(text) == text


def test_timestamps_read_as_dates_in_each_style():
    moment = datetime(2026, 3, 14, 15, 9, 26, tzinfo=UTC)
    seconds = int(moment.timestamp())
    local = moment.astimezone()
    assert timestamps(f"<t:{seconds}:D>") == local.strftime("%d %B %Y")
    assert timestamps(f"ends <t:{seconds}:t>") == f"ends {local.strftime('%H:%M')}"
    assert timestamps(f"<t:{seconds}>") == local.strftime("%d %B %Y %H:%M")
    later = moment + timedelta(hours=3)
    assert timestamps(f"<t:{int(later.timestamp())}:R>", now=moment) == "in 3 hours"
    assert timestamps(f"<t:{seconds}:R>", now=later) == "3 hours ago"
    assert timestamps("<t:99999999999999999999:D>") == "<t:99999999999999999999:D>"


def test_in_a_pipe_the_marks_are_taken_off_and_no_text_can_drive_the_terminal():
    from bot.console.markup import plain

    assert plain("⏩ *You let the story go on.*\n-# subtext **bold** `code`") == (
        "⏩ You let the story go on.\nsubtext bold code"
    )
    # A model's or a player's escape codes are dropped, not drawn or obeyed.
    assert plain("the lamp\x1b[2J\x1b[31m glows\x07") == "the lamp[2J[31m glows"


def test_button_keys_come_from_labels_and_stay_when_numbers_move():
    from bot.console.commands import button_keys

    turn = ["Continue", "Retry", "Undo", "Insights", "Do", "Say", "Story"]
    assert button_keys(turn) == ["continue", "retry", "undo", "insights", "do", "say", "story"]
    paged = [*turn[:4], "‹", "2/2", "›", *turn[4:]]
    keys = button_keys(paged)
    assert keys[4:7] == ["prev", "page", "next"] and keys[7] == "do"
    assert button_keys(["Keep playing", "Keep playing", None]) == [
        "keep-playing",
        "keep-playing-2",
        "button",
    ]
