"""Where the console types, and as whom.

Alone (the default) the console is one user in a DM with the bot. With ``--server`` it sits in
a text channel of a stand-in server that its user owns; ``/as NAME`` switches which member
types next (created on first use, a plain member), and after an adventure opens a thread the
console follows it there, as a player clicks into it.

Every id here is fixed, below the range of the stand-in's time-based ids so they never collide,
and a member's id comes from their name: the adventures in the data folder, with their hosts and
turn authors, are found again on the next run.
"""

from __future__ import annotations

import hashlib
import re

from bot.standin import FakeDiscord

CONSOLE_USER_ID = 100_000_000_000_000_001
CONSOLE_DM_ID = 100_000_000_000_000_002
CONSOLE_GUILD_ID = 100_000_000_000_000_003
CONSOLE_CHANNEL_ID = 100_000_000_000_000_004
#: Members made by /as: this plus a number drawn from their name (fewer than 10^15 of them).
MEMBER_ID_BASE = 200_000_000_000_000_000

CONSOLE_USER_NAME = "Player"
GUILD_NAME = "Campfire console"
CHANNEL_NAME = "adventures"
# Discord's usernames: 2 to 32 of these (the console also takes capitals, as typed).
NEEDS_SERVER = "/as needs a server: start the console with --server."
_MEMBER_NAME = re.compile(r"[A-Za-z0-9_.]{2,32}")


class PlaceError(Exception):
    """The console cannot type there or as that member; the message says why."""


def member_id(name: str) -> int:
    digest = hashlib.sha256(name.casefold().encode()).digest()
    return MEMBER_ID_BASE + int.from_bytes(digest[:8]) % 10**15


class Place:
    """The channel the console types in and the user typing, over the stand-in's world."""

    def __init__(self, fake: FakeDiscord, *, server: bool) -> None:
        self.fake = fake
        self.server = server
        self.user_id = CONSOLE_USER_ID
        self.channel_id = CONSOLE_CHANNEL_ID if server else CONSOLE_DM_ID

    def build(self) -> None:
        """Before the bot connects: the console's user, and its DM or its server and channel."""
        fake = self.fake
        fake.add_user(CONSOLE_USER_NAME, user_id=CONSOLE_USER_ID)
        if not self.server:
            fake.dm_channel(CONSOLE_USER_ID, channel_id=CONSOLE_DM_ID)
            return
        fake.world.add_guild(GUILD_NAME, CONSOLE_USER_ID, guild_id=CONSOLE_GUILD_ID)
        fake.world.add_channel(CONSOLE_GUILD_ID, CHANNEL_NAME, channel_id=CONSOLE_CHANNEL_ID)

    async def reopen_thread(self, thread_id: int, name: str) -> None:
        """Type in the thread of an adventure from an earlier run: the stand-in starts empty
        each run, so the thread is made again under the id the database knows."""
        self.fake.add_thread(CONSOLE_CHANNEL_ID, name, CONSOLE_USER_ID, thread_id=thread_id)
        await self.fake.flush()
        self.channel_id = thread_id

    @property
    def user_name(self) -> str:
        return self.fake.world.users[self.user_id].name

    def name_of(self, user_id: int) -> str:
        user = self.fake.world.users.get(user_id)
        return user.name if user is not None else str(user_id)

    def channel_name(self, channel_id: int) -> str | None:
        channel = self.fake.world.channels.get(channel_id)
        return channel.name if channel is not None and channel.name else None

    def person_named(self, name: str) -> int | None:
        """Whom ``name`` names here: a member of the server (the bot included), or in a DM the
        console's own user; None when nobody."""
        world = self.fake.world
        if not self.server:
            user = world.users[CONSOLE_USER_ID]
            return CONSOLE_USER_ID if user.name.casefold() == name.casefold() else None
        guild = world.guilds[CONSOLE_GUILD_ID]
        return next(
            (uid for uid in guild.members if world.users[uid].name.casefold() == name.casefold()),
            None,
        )

    def members(self) -> list[str]:
        """The server's people in the order they joined, the bot left out."""
        if not self.server:
            raise PlaceError(NEEDS_SERVER)
        guild = self.fake.world.guilds[CONSOLE_GUILD_ID]
        return [self.name_of(uid) for uid in guild.members if not self.fake.world.users[uid].bot]

    async def switch(self, name: str) -> bool:
        """Type as ``name`` from now on; True when that member was new to the server."""
        if not self.server:
            raise PlaceError(NEEDS_SERVER)
        if not _MEMBER_NAME.fullmatch(name):
            raise PlaceError("A member's name is 2 to 32 letters, digits, _ or . (no spaces).")
        world = self.fake.world
        known = self.person_named(name)
        if known is not None:
            if world.users[known].bot:
                raise PlaceError(f"{name} is the bot; pick another name.")
            self.user_id = known
            return False
        # A plain member: no Manage Server, no Manage Messages (the owner has every right).
        self.user_id = self.fake.add_user(
            name, member_of=[CONSOLE_GUILD_ID], user_id=member_id(name)
        )
        await self.fake.flush()
        return True

    def threads_here(self) -> set[int]:
        """The threads of the server channel (none where the console is not in it)."""
        if self.channel_id != CONSOLE_CHANNEL_ID:
            return set()
        return set(self.fake.threads(CONSOLE_CHANNEL_ID))

    def follow_new_thread(self, before: set[int]) -> int | None:
        """Move into the newest thread opened in the channel since ``before``, if one was."""
        new = [t for t in self.fake.threads(CONSOLE_CHANNEL_ID) if t not in before]
        if self.channel_id != CONSOLE_CHANNEL_ID or not new:
            return None
        self.channel_id = new[-1]
        return self.channel_id
