"""A local Discord stand-in: a fake Discord REST API and Gateway on 127.0.0.1.

A real ``discord.Client`` / ``commands.Bot`` logs in and connects to it as to Discord; users are
played by ``FakeDiscord.slash`` / ``press`` / ``submit_modal`` (and ``redeliver`` sends one of
their interactions again, as a gateway replay does); everything the bot does is recorded, and
Discord's limits (``limits.py``; command definitions in ``command_schema.py``) and rate limits
answer with Discord's own errors. Channels have permission overwrites
(``FakeDiscord.set_permissions``; ``World.permissions_in`` resolves them by Discord's rules in
``permissions.py``, for interaction payloads and for every route, which refuse with 50001 or
50013), and a user may close their DMs to the bot (``close_dms``: 50007). ``FakeDiscord.faults``
injects Discord's server and permission errors on request (``faults.py``). Its gateway shards
as Discord's does and sends only the events of the intents asked for (``gateway.py``).
"""

from .faults import (
    INTERNAL_SERVER_ERROR,
    MISSING_PERMISSIONS,
    SERVICE_UNAVAILABLE,
    DiscordError,
    Faults,
)
from .harness import StandIn
from .interactions import StandinFile
from .records import AttachmentRecord, InteractionRecord, MessageRecord
from .server import FakeDiscord, RequestRecord

__all__ = [
    "INTERNAL_SERVER_ERROR",
    "MISSING_PERMISSIONS",
    "SERVICE_UNAVAILABLE",
    "AttachmentRecord",
    "DiscordError",
    "FakeDiscord",
    "Faults",
    "InteractionRecord",
    "MessageRecord",
    "RequestRecord",
    "StandIn",
    "StandinFile",
]
