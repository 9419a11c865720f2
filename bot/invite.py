"""``python -m bot invite``: the link that adds Campfire to a server, asking for exactly the
permissions the bot needs (``cogs.ui.bot_permissions``), and why each.

Works without connecting to Discord: the application's client id is given (``--client-id``,
the Developer Portal's General Information → Application ID) or read from the bot token, whose
first part is the bot user's id in base64; the bot user of an application made since 2016
has the application's id.
"""

from __future__ import annotations

import base64
import binascii
from urllib.parse import urlencode

from bot.config import ConfigError
from cogs.ui import bot_permissions

#: "bot" adds the bot user, "applications.commands" its slash commands (discord-api-docs,
#: OAuth2, "Bot Authorization Flow").
SCOPES = ("bot", "applications.commands")
AUTHORIZE_URL = "https://discord.com/oauth2/authorize"


def client_id_from_token(token: str) -> int:
    """The bot user's id, from the first part of its token (no request to Discord)."""
    first = token.split(".", 1)[0]
    try:
        decoded = base64.b64decode(first + "=" * (-len(first) % 4), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        decoded = ""
    if not decoded.isdigit():
        raise ConfigError(
            "DISCORD_TOKEN does not look like a bot token; give the application's id instead: "
            "python -m bot invite --client-id ID (Developer Portal → General Information)."
        )
    return int(decoded)


def invite_url(client_id: int) -> str:
    query = urlencode(
        {
            "client_id": client_id,
            "scope": " ".join(SCOPES),
            "permissions": bot_permissions.invite_permissions(),
        }
    )
    return f"{AUTHORIZE_URL}?{query}"


def invite_text(client_id: int) -> str:
    """The link, then each permission it asks for with why, then the optional ones."""
    lines = [
        "Add Campfire to a server (someone with Manage Server there opens this link):",
        "",
        invite_url(client_id),
        "",
        "It asks for these permissions:",
    ]
    lines += [f"  {p.name}: {p.why}" for p in bot_permissions.REQUIRED]
    lines += ["", "Optional (a server admin may grant them to the bot's role later):"]
    lines += [f"  {p.name}: {p.why.removeprefix('optional: ')}" for p in bot_permissions.OPTIONAL]
    lines += [
        "",
        "A channel's own permissions can take any of them away; where the bot lacks one, the",
        "player is told which, privately.",
    ]
    return "\n".join(lines)
