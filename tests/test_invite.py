"""``python -m bot invite``: the link asks for exactly the permissions the bot needs, each
named with why, and works without connecting to Discord."""

from __future__ import annotations

import base64
import os
from urllib.parse import parse_qs, urlsplit

import pytest

from bot.__main__ import main
from bot.standin.permissions import BOT_ROLE_PERMISSIONS
from cogs.ui import bot_permissions

# discord-api-docs, Permissions, "Bitwise Permission Flags": View Channel, Send Messages, Embed
# Links, Attach Files, Create Public Threads, Send Messages in Threads.
REQUIRED = (1 << 10) | (1 << 11) | (1 << 14) | (1 << 15) | (1 << 35) | (1 << 38)
MANAGE_THREADS = 1 << 34
APP_ID = 1234567890123456789


@pytest.fixture
def no_settings(monkeypatch, tmp_path):
    for name in list(os.environ):
        if name.startswith("CAMPFIRE_") or name == "DISCORD_TOKEN":
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def invite(capsys, *args: str) -> tuple[str, dict[str, list[str]]]:
    assert main(["invite", *args]) == 0
    out = capsys.readouterr().out
    (url,) = [line for line in out.splitlines() if line.startswith("https://")]
    parts = urlsplit(url)
    assert (parts.netloc, parts.path) == ("discord.com", "/oauth2/authorize")
    return out, parse_qs(parts.query)


def test_the_invite_asks_for_exactly_what_the_bot_needs(no_settings, capsys):
    out, query = invite(capsys, "--client-id", str(APP_ID))
    assert query["client_id"] == [str(APP_ID)]
    assert query["scope"] == ["bot applications.commands"]
    assert int(query["permissions"][0]) == REQUIRED
    required, optional = out.split("Optional")
    for name in (
        "View Channel",
        "Send Messages",
        "Send Messages in Threads",
        "Create Public Threads",
        "Embed Links",
        "Attach Files",
    ):
        assert f"  {name}: " in required
    # Manage Threads is offered, not asked for.
    assert "  Manage Threads: " in optional and "Manage Threads" not in required
    assert not int(query["permissions"][0]) & MANAGE_THREADS


def test_the_client_id_comes_from_the_token(no_settings, monkeypatch, capsys):
    first = base64.b64encode(str(APP_ID).encode()).decode().rstrip("=")
    monkeypatch.setenv("DISCORD_TOKEN", f"{first}.GhIjKl.{'x' * 38}")
    _, query = invite(capsys)
    assert query["client_id"] == [str(APP_ID)]


def test_without_a_token_or_an_id_it_says_what_to_give(no_settings, capsys):
    assert main(["invite"]) == 2
    assert "--client-id" in capsys.readouterr().err


def test_the_stand_ins_bot_role_is_what_the_invite_asks_for():
    """The stand-in's bot role holds exactly the invite's permissions: a test passing there
    passes on a server the invite of docs/operations.md set up (Manage Threads and Read Message
    History, which the invite does not ask for, are the bot's only where an admin grants them)."""
    assert BOT_ROLE_PERMISSIONS == bot_permissions.invite_permissions()
