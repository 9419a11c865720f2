"""Interaction routes: the callback that acknowledges an interaction, the webhook followup and
``@original`` message routes, and the 3 s acknowledgement / 15 min token rules."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from aiohttp import web

from . import limits
from .records import FLAG_EPHEMERAL, FLAG_LOADING, InteractionRecord, MessageRecord
from .rest import error_response, json_response, read_body
from .starvation import StarvedClock

if TYPE_CHECKING:
    from .host import StandinHost
    from .routes_messages import MessageRoutes

ACK_DEADLINE_S = 3.0
TOKEN_LIFETIME_S = 15 * 60
#: How often the deadline is watched.
WATCH_EVERY_S = 0.05


class InteractionRoutes:
    def __init__(self, fake: StandinHost, messages: MessageRoutes) -> None:
        self.fake = fake
        self.world = fake.world
        self.messages = messages
        self.pending_ack: set[int] = set()
        self.tokens: dict[str, InteractionRecord] = {}
        self.starved = StarvedClock()
        #: ``starved.total`` when each interaction pending acknowledgement was created.
        self._starved_at: dict[int, float] = {}

    def channel_of_token(self, token: str) -> int | None:
        """The channel of the interaction whose token this is, if it is one."""
        rec = self.tokens.get(token)
        return None if rec is None else rec.channel_id

    # -- acknowledgement deadline -------------------------------------------------------------

    def register(self, record: InteractionRecord) -> None:
        self.world.interactions[record.id] = record
        self.tokens[record.token] = record
        self.pending_ack.add(record.id)
        self.starved.tick()
        self._starved_at[record.id] = self.starved.total

    def _past_deadline(self, record: InteractionRecord) -> bool:
        starved = self.starved.total - self._starved_at.get(record.id, self.starved.total)
        return self.fake.clock() - record.created - starved > ACK_DEADLINE_S

    def fail(self, record: InteractionRecord, reason: str) -> None:
        if record.failed is None and record.acknowledged is None:
            record.failed = reason
            self.fake.failures.append(
                f"interaction {record.name or record.type} ({record.id}): {reason}"
            )
            record.done.set()
        self.pending_ack.discard(record.id)
        self._starved_at.pop(record.id, None)

    async def watch_acks(self) -> None:
        """Marks interactions the bot did not answer within 3 s as failed, as the user sees."""
        while True:
            if self.pending_ack:
                self.starved.tick()
            for iid in list(self.pending_ack):
                rec = self.world.interactions[iid]
                if rec.acknowledged is not None:
                    self.pending_ack.discard(iid)
                    self._starved_at.pop(iid, None)
                elif self._past_deadline(rec):
                    self.fail(rec, "not acknowledged within 3 s (This interaction failed)")
            await asyncio.sleep(WATCH_EVERY_S)

    # -- the callback -------------------------------------------------------------------------

    async def callback(self, request: web.Request) -> web.Response:
        try:
            rec = self.world.interactions.get(int(request.match_info["iid"]))
        except ValueError:
            rec = None
        if rec is None or rec.token != request.match_info["token"]:
            return error_response(404, 10062, "Unknown interaction")
        if rec.acknowledged is not None:
            return error_response(400, 40060, "Interaction has already been acknowledged.")
        self.starved.tick()
        if rec.failed is not None or self._past_deadline(rec):
            self.fail(rec, "acknowledged after the 3 s deadline")
            return error_response(404, 10062, "Unknown interaction")
        body, files = await read_body(request)
        rtype = int(body.get("type", 0))
        data = body.get("data") or {}
        if rtype != 8 and self.world.thread_archived(rec.channel_id):
            # "Users cannot ... use application commands ... in archived threads" (discord-
            # api-docs, Threads); an answer there is refused (discord-api-docs issue 5517).
            # Autocomplete choices post nothing, and are left alone.
            return error_response(400, 50083, "Thread is archived")
        message: MessageRecord | None = None
        if rtype == 1:
            pass
        elif rtype == 4:
            problem = limits.check_message(data, files)
            if problem is not None:
                return json_response(problem[1], status=problem[0])
            ephemeral = bool(int(data.get("flags") or 0) & FLAG_EPHEMERAL)
            if not ephemeral and self.world.thread_locked_to_bot(rec.channel_id):
                return error_response(400, 50083, "Thread is archived")
            message = self.messages.new_message(
                rec.channel_id,
                self.world.bot_user.id,
                data,
                files,
                flags=int(data.get("flags") or 0),
                visible_to=rec.user_id if ephemeral else None,
                interaction_id=rec.id,
                webhook=True,
            )
            rec.original_message_id = message.id
        elif rtype == 5:
            ephemeral = bool(int(data.get("flags") or 0) & FLAG_EPHEMERAL)
            if not ephemeral and self.world.thread_locked_to_bot(rec.channel_id):
                return error_response(400, 50083, "Thread is archived")
            message = self.messages.new_message(
                rec.channel_id,
                self.world.bot_user.id,
                {},
                [],
                flags=FLAG_LOADING | (FLAG_EPHEMERAL if ephemeral else 0),
                visible_to=rec.user_id if ephemeral else None,
                interaction_id=rec.id,
                webhook=True,
            )
            rec.original_message_id = message.id
        elif rtype in (6, 7):
            if rec.source_message_id is None:
                return error_response(400, 50035, "Invalid Form Body")
            rec.original_message_id = rec.source_message_id
            message = self.world.messages_by_id[rec.source_message_id]
            if rtype == 7:
                error = self.messages.apply_edit(message, data, files)
                if error is not None:
                    return error
        elif rtype == 8:
            if rec.type != 4:
                return error_response(400, 50035, "Invalid Form Body")
            problem = limits.check_autocomplete(data)
            if problem is not None:
                return json_response(problem[1], status=problem[0])
            rec.choices = list(data.get("choices") or [])
        elif rtype == 9:
            if rec.type == 5:
                return error_response(400, 50035, "Invalid Form Body")
            problem = limits.check_modal(data)
            if problem is not None:
                return json_response(problem[1], status=problem[0])
            rec.modal = data
        else:
            return error_response(400, 50035, "Invalid Form Body")
        rec.acknowledged = self.fake.clock()
        rec.response_type = rtype
        rec.response_data = data
        self.pending_ack.discard(rec.id)
        rec.done.set()
        if request.query.get("with_response") not in ("1", "true", "True"):
            return web.Response(status=204)
        interaction: dict[str, Any] = {"id": str(rec.id), "type": rec.type}
        resource: dict[str, Any] = {"type": rtype}
        if message is not None:
            interaction["response_message_id"] = str(message.id)
            interaction["response_message_loading"] = rtype == 5
            interaction["response_message_ephemeral"] = message.ephemeral
            if rtype in (4, 5, 7):
                resource["message"] = self.world.message_payload(message)
        return json_response({"interaction": interaction, "resource": resource})

    # -- webhook: followups and @original -----------------------------------------------------

    def _webhook_interaction(self, request: web.Request) -> InteractionRecord | web.Response:
        """The acknowledged interaction a ``/webhooks/{app}/{token}`` route names, or the error
        Discord answers."""
        rec = self.tokens.get(request.match_info["token"])
        if rec is None or request.match_info["app"] != str(self.world.application_id):
            return error_response(404, 10015, "Unknown Webhook")
        if self.fake.clock() - rec.created > TOKEN_LIFETIME_S:
            return error_response(401, 50027, "Invalid Webhook Token")
        if rec.acknowledged is None:
            return error_response(404, 10015, "Unknown Webhook")
        return rec

    def _webhook_target(self, rec: InteractionRecord, mid: str) -> MessageRecord | None:
        if mid == "@original":
            target = rec.original_message_id
        else:
            try:
                target = int(mid)
            except ValueError:
                return None
            if target not in rec.followups and target != rec.original_message_id:
                return None
        msg = self.world.messages_by_id.get(target) if target is not None else None
        return None if msg is None or msg.deleted else msg

    def _webhook_message(self, request: web.Request) -> MessageRecord | web.Response:
        """The message a ``/webhooks/{app}/{token}/messages/{mid}`` route names (the original
        response or one of its followups), or the error Discord answers."""
        rec = self._webhook_interaction(request)
        if isinstance(rec, web.Response):
            return rec
        msg = self._webhook_target(rec, request.match_info["mid"])
        if msg is None:
            return error_response(404, 10008, "Unknown Message")
        return msg

    async def webhook_execute(self, request: web.Request) -> web.Response:
        rec = self._webhook_interaction(request)
        if isinstance(rec, web.Response):
            return rec
        payload, files = await read_body(request)
        problem = limits.check_message(payload, files)
        if problem is not None:
            return json_response(problem[1], status=problem[0])
        if self.world.thread_archived(rec.channel_id):
            return error_response(400, 50083, "Thread is archived")
        if not int(payload.get("flags") or 0) & FLAG_EPHEMERAL and self.world.thread_locked_to_bot(
            rec.channel_id
        ):
            return error_response(400, 50083, "Thread is archived")
        original = (
            self.world.messages_by_id.get(rec.original_message_id)
            if rec.original_message_id is not None
            else None
        )
        if (
            original is not None
            and not original.deleted
            and rec.response_type == 5
            and original.flags & FLAG_LOADING
        ):
            # "When using this endpoint directly after responding to an interaction with
            # DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE, this endpoint will function as Edit Original
            # Interaction Response [...] The ephemeral flag will be ignored, and the value you
            # provided in the initial defer response will be preserved" (discord-api-docs,
            # Receiving and Responding, Create Followup Message). Once the loading message is
            # deleted there is nothing to edit, and a followup is a message of its own with its
            # own flags (the docs do not say; the stand-in takes the reading that lets a bot
            # answer privately after a public defer).
            error = self.messages.apply_edit(original, payload, files)
            if error is not None:
                return error
            original.edits.clear()
            original.edited_timestamp = None
            msg = original
        else:
            flags = int(payload.get("flags") or 0)
            ephemeral = bool(flags & FLAG_EPHEMERAL)
            msg = self.messages.new_message(
                rec.channel_id,
                self.world.bot_user.id,
                payload,
                files,
                flags=flags,
                visible_to=rec.user_id if ephemeral else None,
                interaction_id=rec.id,
                webhook=True,
            )
            msg.followup = True
        rec.followups.append(msg.id)
        if request.query.get("wait") in ("1", "true", "True"):
            return json_response(self.world.message_payload(msg))
        return web.Response(status=204)

    async def webhook_get(self, request: web.Request) -> web.Response:
        msg = self._webhook_message(request)
        if isinstance(msg, web.Response):
            return msg
        return json_response(self.world.message_payload(msg))

    async def webhook_edit(self, request: web.Request) -> web.Response:
        msg = self._webhook_message(request)
        if isinstance(msg, web.Response):
            return msg
        payload, files = await read_body(request)
        error = self.messages.old_message_refusal(request, msg) or self.messages.apply_edit(
            msg, payload, files
        )
        if error is not None:
            return error
        return json_response(self.world.message_payload(msg))

    async def webhook_delete(self, request: web.Request) -> web.Response:
        msg = self._webhook_message(request)
        if isinstance(msg, web.Response):
            return msg
        msg.deleted = True
        self.messages.announce("MESSAGE_DELETE", msg)
        return web.Response(status=204)
