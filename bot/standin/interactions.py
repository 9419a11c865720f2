"""Drivers that play a user: slash commands, autocomplete, button presses, modal submits.

Each builds an INTERACTION_CREATE payload as Discord would and sends it over the gateway, so
the running client parses it with its own ``ConnectionState.parse_interaction_create`` and
routes it through its real ``CommandTree`` / view store. Command definitions (for typed
options) come from the client's tree, so no sync is needed.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .limits import UPLOAD_FILE_MAX
from .records import DM, InteractionRecord, MessageRecord, iter_components

if TYPE_CHECKING:
    import discord
    from discord import app_commands

    from .gateway import Gateway
    from .world import World

WAIT_S = 3.5

# Option types (Discord's numbers).
SUB_COMMAND, SUB_COMMAND_GROUP = 1, 2
STRING, INTEGER, BOOLEAN, USER, CHANNEL, ROLE, MENTIONABLE, NUMBER, ATTACHMENT = (
    3,
    4,
    5,
    6,
    7,
    8,
    9,
    10,
    11,
)


@dataclass(frozen=True)
class StandinFile:
    """A file a user attaches to a slash command's attachment option."""

    filename: str
    content: bytes
    content_type: str | None = None


class InteractionDriver:
    """Mixin for FakeDiscord: the user-side actions."""

    world: World
    gateway: Gateway
    client: discord.Client | None
    _command_ids: dict[tuple[str, int | None], int]

    clock: Callable[[], float]

    if TYPE_CHECKING:  # provided by FakeDiscord

        def register_interaction(self, record: InteractionRecord) -> None: ...

        async def flush(self, timeout: float = 2.0) -> None: ...  # noqa: ASYNC109

    # -- common -------------------------------------------------------------------------------

    def _base(
        self, itype: int, user_id: int, channel_id: int, name: str | None
    ) -> tuple[InteractionRecord, dict[str, Any]]:
        world = self.world
        if user_id not in world.users:
            raise LookupError(f"unknown user {user_id}")
        channel = world.channels[channel_id]
        guild_id = channel.guild_id
        if channel.type == DM and channel.recipient_id != user_id:
            raise ValueError("a user can only use the bot in their own DM channel")
        if guild_id is not None and user_id not in world.guilds[guild_id].members:
            raise ValueError(f"user {user_id} is not a member of guild {guild_id}")
        record = InteractionRecord(
            id=world.snowflake(),
            token=world.token(),
            type=itype,
            user_id=user_id,
            channel_id=channel_id,
            guild_id=guild_id,
            created=self.clock(),
            name=name,
        )
        payload: dict[str, Any] = {
            "id": str(record.id),
            "application_id": str(world.application_id),
            "type": itype,
            "token": record.token,
            "version": 1,
            "channel_id": str(channel_id),
            "channel": world.partial_channel_payload(channel_id, user_id),
            "locale": "en-US",
            "entitlements": [],
            "authorizing_integration_owners": world.integration_owners(guild_id),
            "context": 0 if guild_id is not None else 1,
            "attachment_size_limit": UPLOAD_FILE_MAX,
        }
        if guild_id is not None:
            payload["guild_id"] = str(guild_id)
            payload["guild_locale"] = "en-US"
            payload["guild"] = {"id": str(guild_id), "locale": "en-US", "features": []}
            payload["member"] = world.member_payload(guild_id, user_id, permissions_in=channel_id)
        else:
            payload["user"] = world.users[user_id].payload()
        # "Bitwise set of permissions the app has in the source location of the interaction"
        # (discord-api-docs, Receiving and Responding, Interaction Structure).
        payload["app_permissions"] = str(
            world.permissions_in(channel_id, world.bot_user.id, implicit=False)
        )
        return record, payload

    async def _send(
        self, record: InteractionRecord, payload: dict[str, Any], *, wait: bool = True
    ) -> InteractionRecord:
        await self.flush()
        record.payload = payload
        self.register_interaction(record)
        await self.gateway.dispatch("INTERACTION_CREATE", payload)
        if wait:
            try:
                await asyncio.wait_for(record.done.wait(), WAIT_S)
            except TimeoutError:
                pass
        return record

    # -- command definitions ------------------------------------------------------------------

    def _tree(self) -> app_commands.CommandTree[Any]:
        client = self.client
        if client is None:
            raise RuntimeError("no client attached to the stand-in")
        tree = getattr(client, "tree", None) or client._connection._command_tree
        if tree is None:
            raise RuntimeError("the client has no CommandTree")
        return tree

    def _definition(self, root: str, guild_id: int | None) -> tuple[dict[str, Any], int | None]:
        """The command's Discord definition, and the guild id if it is a guild command."""
        import discord

        tree = self._tree()
        command = None
        scope: int | None = None
        if guild_id is not None:
            command = tree.get_command(root, guild=discord.Object(guild_id))
            scope = guild_id if command is not None else None
        if command is None:
            command = tree.get_command(root)
        if command is None:
            raise LookupError(f"no app command named {root!r} in the client's tree")
        return command.to_dict(tree), scope

    def _command_id(self, root: str, scope: int | None) -> int:
        # A synced command keeps the id the stand-in gave it; otherwise a stable made-up one.
        for cmd in getattr(self, "commands", {}).get(scope, []):
            if cmd["name"] == root and cmd.get("type", 1) == 1:
                return int(cmd["id"])
        key = (root, scope)
        if key not in self._command_ids:
            self._command_ids[key] = self.world.snowflake()
        return self._command_ids[key]

    def _walk(
        self, command: str, guild_id: int | None
    ) -> tuple[dict[str, Any], int | None, list[dict[str, Any]], list[tuple[int, str]]]:
        """Resolve 'group sub' paths: returns (root definition, scope, leaf option defs,
        [(type, name)] for each subcommand level)."""
        parts = command.split()
        definition, scope = self._definition(parts[0], guild_id)
        defs = definition.get("options") or []
        path: list[tuple[int, str]] = []
        for part in parts[1:]:
            match = next(
                (
                    o
                    for o in defs
                    if o["name"] == part and o["type"] in (SUB_COMMAND, SUB_COMMAND_GROUP)
                ),
                None,
            )
            if match is None:
                raise LookupError(f"{command!r}: no subcommand {part!r}")
            path.append((match["type"], part))
            defs = match.get("options") or []
        if any(o["type"] in (SUB_COMMAND, SUB_COMMAND_GROUP) for o in defs):
            raise LookupError(f"{command!r} is a group; name a subcommand")
        return definition, scope, defs, path

    @staticmethod
    def _nest(path: list[tuple[int, str]], leaf: list[dict[str, Any]]) -> list[dict[str, Any]]:
        options = leaf
        for otype, name in reversed(path):
            options = [{"type": otype, "name": name, "options": options}]
        return options

    def _option(
        self,
        spec: dict[str, Any],
        value: Any,
        channel_id: int,
        guild_id: int | None,
        resolved: dict[str, dict[str, Any]],
        user_id: int,
    ) -> dict[str, Any]:
        otype = spec["type"]
        name = spec["name"]
        world = self.world
        if otype == STRING:
            out: Any = str(value)
        elif otype == INTEGER:
            out = int(value)
        elif otype == BOOLEAN:
            out = bool(value)
        elif otype == NUMBER:
            out = float(value)
        elif otype in (USER, MENTIONABLE) and int(value) in world.users:
            uid = int(value)
            resolved.setdefault("users", {})[str(uid)] = world.users[uid].payload()
            if guild_id is not None and uid in world.guilds[guild_id].members:
                member = world.member_payload(guild_id, uid, permissions_in=channel_id)
                member.pop("user")
                resolved.setdefault("members", {})[str(uid)] = member
            out = str(uid)
        elif otype in (ROLE, MENTIONABLE):
            rid = int(value)
            role = world.guilds[guild_id].roles[rid] if guild_id is not None else None
            if role is None:
                raise LookupError(f"no role {rid}")
            resolved.setdefault("roles", {})[str(rid)] = role.payload()
            out = str(rid)
        elif otype == CHANNEL:
            cid = int(value)
            data = world.partial_channel_payload(cid, user_id)
            resolved.setdefault("channels", {})[str(cid)] = data
            out = str(cid)
        elif otype == ATTACHMENT:
            if not isinstance(value, StandinFile):
                raise TypeError(f"option {name!r} takes a StandinFile")
            record = world.add_attachment(
                channel_id, value.filename, value.content, content_type=value.content_type
            )
            resolved.setdefault("attachments", {})[str(record.id)] = record.payload()
            out = str(record.id)
        else:
            raise TypeError(f"option {name!r}: unsupported type {otype}")
        if spec.get("choices") and out not in [c["value"] for c in spec["choices"]]:
            raise ValueError(f"option {name!r}: {out!r} is not one of its choices")
        return {"type": otype, "name": name, "value": out}

    # -- user actions -------------------------------------------------------------------------

    async def slash(
        self, user_id: int, channel_id: int, command: str, /, **options: Any
    ) -> InteractionRecord:
        """Run ``/command`` (``"group sub"`` for subcommands) with typed options."""
        record, payload = self._slash(user_id, channel_id, command, options)
        return await self._send(record, payload)

    def _slash(
        self, user_id: int, channel_id: int, command: str, options: dict[str, Any]
    ) -> tuple[InteractionRecord, dict[str, Any]]:
        guild_id = self.world.channels[channel_id].guild_id
        definition, scope, defs, path = self._walk(command, guild_id)
        by_name = {o["name"]: o for o in defs}
        resolved: dict[str, dict[str, Any]] = {}
        leaf = []
        for name, value in options.items():
            if name not in by_name:
                raise LookupError(f"/{command} has no option {name!r}")
            leaf.append(self._option(by_name[name], value, channel_id, guild_id, resolved, user_id))
        missing = [o["name"] for o in defs if o.get("required") and o["name"] not in options]
        if missing:
            raise ValueError(f"/{command}: required options missing: {missing}")
        record, payload = self._base(2, user_id, channel_id, command)
        root = command.split()[0]
        data: dict[str, Any] = {
            "id": str(self._command_id(root, scope)),
            "name": root,
            "type": 1,
            "options": self._nest(path, leaf),
        }
        if resolved:
            data["resolved"] = resolved
        if scope is not None:
            data["guild_id"] = str(scope)
        payload["data"] = data
        return record, payload

    async def redeliver(self, record: InteractionRecord, /, **options: Any) -> InteractionRecord:
        """Deliver an interaction again, as Discord's gateway may (a replay after a resume, one
        event reaching two processes): the same id, token and payload. Discord takes one
        initial response per interaction (a second gets 40060), so the bot can answer this
        delivery only through the token's followups and ``@original`` edits.

        With ``options`` (a slash command's), the payload differs under the same id, which
        Discord never sends: for testing that the bot refuses it. Returns without waiting for
        an acknowledgement (the first delivery's stands); ``idle`` waits for the handling.
        """
        if record.payload is None:
            raise ValueError(f"interaction {record.id} was never delivered")
        payload = copy.deepcopy(record.payload)
        if options:
            if record.type != 2 or record.name is None:
                raise ValueError("only a slash command's options can be changed")
            _, changed = self._slash(record.user_id, record.channel_id, record.name, options)
            payload["data"] = changed["data"]
        await self.flush()
        await self.gateway.dispatch("INTERACTION_CREATE", payload)
        return record

    async def autocomplete(
        self,
        user_id: int,
        channel_id: int,
        command: str,
        /,
        *,
        focused: str,
        value: Any = "",
        **options: Any,
    ) -> list[dict[str, Any]]:
        """Type into option ``focused``; returns the choices the bot answered with."""
        guild_id = self.world.channels[channel_id].guild_id
        definition, scope, defs, path = self._walk(command, guild_id)
        by_name = {o["name"]: o for o in defs}
        if focused not in by_name:
            raise LookupError(f"/{command} has no option {focused!r}")
        leaf = []
        for name, val in options.items():
            if name not in by_name:
                raise LookupError(f"/{command} has no option {name!r}")
            # Autocomplete carries raw values and no resolved data (a Discord limitation).
            raw = (
                str(val)
                if by_name[name]["type"] in (USER, CHANNEL, ROLE, MENTIONABLE, ATTACHMENT)
                else val
            )
            leaf.append({"type": by_name[name]["type"], "name": name, "value": raw})
        leaf.append(
            {"type": by_name[focused]["type"], "name": focused, "value": value, "focused": True}
        )
        record, payload = self._base(4, user_id, channel_id, command)
        root = command.split()[0]
        data: dict[str, Any] = {
            "id": str(self._command_id(root, scope)),
            "name": root,
            "type": 1,
            "options": self._nest(path, leaf),
        }
        if scope is not None:
            data["guild_id"] = str(scope)
        payload["data"] = data
        await self._send(record, payload)
        return list(record.choices or [])

    def _find_button(
        self, msg: MessageRecord, custom_id: str | None, label: str | None, index: int | None
    ) -> dict[str, Any]:
        buttons = msg.button_components()
        found: dict[str, Any] | None = None
        if custom_id is not None:
            found = next((b for b in buttons if b.get("custom_id") == custom_id), None)
        elif label is not None:
            found = next((b for b in buttons if b.get("label") == label), None)
        elif index is not None:
            found = buttons[index - 1] if 1 <= index <= len(buttons) else None
        else:
            raise ValueError("name the button by custom_id, label or index")
        if found is None:
            have = [(b.get("label"), b.get("custom_id")) for b in buttons]
            raise LookupError(f"message {msg.id} has no such button; it has {have}")
        if found.get("disabled"):
            raise ValueError(f"button {found.get('label') or found.get('custom_id')!r} is disabled")
        if not found.get("custom_id"):
            raise ValueError("link and premium buttons do not send interactions")
        return found

    async def press(
        self,
        user_id: int,
        message_id: int,
        custom_id: str | None = None,
        *,
        label: str | None = None,
        index: int | None = None,
    ) -> InteractionRecord:
        """Press a button on a recorded message (by custom_id, label, or 1-based index)."""
        msg = self.world.messages_by_id[message_id]
        if msg.deleted:
            raise LookupError(f"message {message_id} was deleted")
        if msg.visible_to not in (None, user_id):
            raise ValueError(f"message {message_id} is ephemeral for another user")
        button = self._find_button(msg, custom_id, label, index)
        record, payload = self._base(3, user_id, msg.channel_id, button["custom_id"])
        record.source_message_id = msg.id
        data: dict[str, Any] = {"custom_id": button["custom_id"], "component_type": 2}
        if "id" in button:
            data["id"] = button["id"]
        payload["data"] = data
        payload["message"] = self.world.message_payload(msg)
        return await self._send(record, payload)

    async def select(
        self, user_id: int, message_id: int, custom_id: str, values: list[str]
    ) -> InteractionRecord:
        """Choose options in a string select menu on a recorded message."""
        msg = self.world.messages_by_id[message_id]
        comp = next(
            (
                c
                for c in iter_components(msg.components)
                if c.get("custom_id") == custom_id and c.get("type") == 3
            ),
            None,
        )
        if comp is None:
            raise LookupError(f"message {message_id} has no select {custom_id!r}")
        if comp.get("disabled"):
            raise ValueError(f"select {custom_id!r} is disabled")
        allowed = {o["value"] for o in comp.get("options") or []}
        if not set(values) <= allowed:
            raise ValueError(f"select {custom_id!r}: {values} not among {sorted(allowed)}")
        record, payload = self._base(3, user_id, msg.channel_id, custom_id)
        record.source_message_id = msg.id
        payload["data"] = {"custom_id": custom_id, "component_type": 3, "values": values}
        payload["message"] = self.world.message_payload(msg)
        return await self._send(record, payload)

    def _modal_record(self, which: InteractionRecord | str) -> InteractionRecord:
        if isinstance(which, InteractionRecord):
            if which.modal is None:
                raise LookupError(f"interaction {which.id} did not open a modal")
            return which
        for rec in reversed(list(self.world.interactions.values())):
            if rec.modal is not None and rec.modal.get("custom_id") == which:
                return rec
        raise LookupError(f"no modal with custom_id {which!r} was opened")

    def _modal_leaf(
        self,
        comp: dict[str, Any],
        values: dict[str, Any],
        used: set[str],
        channel_id: int,
        resolved: dict[str, dict[str, Any]],
    ) -> dict[str, Any]:
        """The submitted form of one modal component, shaped as each ui item reads it."""
        cid = comp.get("custom_id")
        ctype = comp["type"]
        out: dict[str, Any] = {"type": ctype}
        if "id" in comp:
            out["id"] = comp["id"]
        if cid is None:
            return out
        out["custom_id"] = cid
        given = cid in values
        if given:
            used.add(cid)
        if ctype == 4:  # text input
            value = values.get(cid, comp.get("value") or "")
            if not isinstance(value, str):
                raise TypeError(f"text input {cid!r} takes a str")
            if comp.get("required", True) and not value:
                raise ValueError(f"text input {cid!r} is required")
            if len(value) > int(comp.get("max_length") or 4000):
                raise ValueError(f"text input {cid!r}: longer than its max_length")
            if value and len(value) < int(comp.get("min_length") or 0):
                raise ValueError(f"text input {cid!r}: shorter than its min_length")
            out["value"] = value
        elif ctype == 21:  # radio group
            out["value"] = values.get(cid)
        elif ctype == 23:  # checkbox
            out["value"] = bool(values.get(cid, False))
        elif ctype == 19:  # file upload: StandinFiles become resolved attachments
            ids = []
            for f in values.get(cid, []):
                record = self.world.add_attachment(
                    channel_id, f.filename, f.content, content_type=f.content_type
                )
                resolved.setdefault("attachments", {})[str(record.id)] = record.payload()
                ids.append(str(record.id))
            out["values"] = ids
        else:  # selects and checkbox groups
            chosen = values.get(cid, [])
            out["values"] = [chosen] if isinstance(chosen, str) else [str(v) for v in chosen]
        return out

    async def submit_modal(
        self, user_id: int, which: InteractionRecord | str, values: dict[str, Any]
    ) -> InteractionRecord:
        """Fill in and submit a modal the bot opened (given its record or custom_id)."""
        origin = self._modal_record(which)
        if origin.user_id != user_id:
            raise ValueError("only the user the modal was shown to can submit it")
        modal = origin.modal or {}
        used: set[str] = set()
        resolved: dict[str, dict[str, Any]] = {}
        components: list[dict[str, Any]] = []
        cid = origin.channel_id
        for top in modal.get("components") or []:
            if top.get("type") == 1:
                components.append(
                    {
                        "type": 1,
                        "components": [
                            self._modal_leaf(c, values, used, cid, resolved)
                            for c in top.get("components") or []
                        ],
                    }
                )
            elif top.get("type") == 18 and isinstance(top.get("component"), dict):
                label: dict[str, Any] = {
                    "type": 18,
                    "component": self._modal_leaf(top["component"], values, used, cid, resolved),
                }
                if "id" in top:
                    label["id"] = top["id"]
                components.append(label)
        unknown = set(values) - used
        if unknown:
            raise LookupError(f"modal {modal.get('custom_id')!r} has no inputs {sorted(unknown)}")
        record, payload = self._base(5, user_id, origin.channel_id, modal.get("custom_id"))
        payload["data"] = {"custom_id": modal.get("custom_id"), "components": components}
        if resolved:
            payload["data"]["resolved"] = resolved
        if origin.source_message_id is not None:
            record.source_message_id = origin.source_message_id
            payload["message"] = self.world.message_payload(
                self.world.messages_by_id[origin.source_message_id]
            )
        return await self._send(record, payload)

    async def user_message(self, user_id: int, channel_id: int, content: str) -> MessageRecord:
        """A user posts in a channel (MESSAGE_CREATE)."""
        msg = MessageRecord(
            id=self.world.snowflake(),
            channel_id=channel_id,
            author_id=user_id,
            content=content,
            created=self.clock(),
        )
        self.world.add_message(msg)
        await self.flush()
        await self.gateway.dispatch("MESSAGE_CREATE", self.world.message_payload(msg))
        return msg
