"""Streaming narration into Discord messages by editing them as the text grows.

Discord allows about 5 message edits/sends per 5 seconds in one channel (a sliding window, shared
by every message in the channel) and 50 requests per second per bot. discord.py's
``await message.edit()`` silently sleeps when a bucket is empty, so awaiting one edit per token
stalls the whole turn. Instead:

* :class:`RatePacer` (``cogs.ui.pacing``) keeps the windows itself: one per channel, shared by
  every stream there, plus one process-wide budget under Discord's global limit. Every request
  first waits for a slot, so discord.py's limiter (and a 429) is rarely met. Waiting requests
  are served final ones first, then the rest, then intermediate streaming ones, round-robin
  across channels.
* The pacing adapts to load: work in progress reserves the requests it will need to end (an
  open stream its final edit, a turn being shown the buttons it moves), and intermediate
  requests go out only while the budget has room beyond those. With a few narrations at once
  they stream as fast as their channels allow; with many, their streaming is skipped and each
  goes out whole, in one request per message, as soon as it ends. A stream that once found the
  budget saturated streams no more, even if room comes back before it ends: the tail of a
  burst would otherwise spend a late edit or two each on text that is nearly final.
* :class:`StreamingMessage` owns one editor task per narration. :meth:`~StreamingMessage.update`
  only stores the newest text and wakes the task; the task sends or edits with whatever text is
  newest when its turn comes, so tokens that arrive while it waits are coalesced, never queued.
  At most one request per stream is in flight, unchanged text is never sent again, and
  intermediate edits are spaced so that a single stream leaves one slot of the channel's window
  free (the final edit then rarely waits).
* When the text outgrows a message (2000 characters), the message is frozen at a good boundary
  (:func:`cogs.ui.text_split.take_piece`) with its final text and the narration continues in a new
  message. Because ``take_piece`` is stable under extension, the final split is exactly the one
  made while streaming, and frozen messages are not edited again (unless the final text is not an
  extension of the streamed one, e.g. a state block stripped at the end: then every message is
  brought to the final split, and messages left over are deleted).
* :meth:`~StreamingMessage.finish` waits for the request in flight, then brings every message to
  its final piece (no marker) and puts the view on the last one; these requests wait for the
  pacer as long as needed and are retried on transient failures, never dropped. A 403 (the bot
  lost the right to post or edit there) is the exception: no request could land, so the
  narration stays as it stands (the turn is stored all the same).

Works with any :class:`discord.abc.Messageable` that has an ``id`` (``TextChannel``, ``Thread``,
``DMChannel``, ``VoiceChannel``…: discord.py's ``MessageableChannel``) and the
:class:`discord.Message` objects its ``send`` returns.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import aiohttp
import discord

from cogs.ui.bot_permissions import is_final_refusal
from cogs.ui.narration_routes import ChannelRoute
from cogs.ui.pacing import Priority, RatePacer
from cogs.ui.text_split import DISCORD_LIMIT, display_pieces, take_piece

if TYPE_CHECKING:
    # discord.py names its channels that have an id and a send() only for type checkers.
    from discord.abc import MessageableChannel

log = logging.getLogger(__name__)

#: Shown (as the only content) when a narration finishes with no text at all.
EMPTY_TEXT = "…"

_NO_MENTIONS = discord.AllowedMentions.none()
_UNSET: Any = object()  # "leave the message's view alone" (discord.py's MISSING, but ours)
_TRANSPORT_ERRORS = (aiohttp.ClientError, OSError, TimeoutError)


def _transient(exc: BaseException) -> bool:
    """Whether retrying the same request may help (server errors, broken connections). Not a
    429: discord.py sleeps and retries those itself, and one that reaches us is one it would not
    retry (no ``Via`` header: Cloudflare's ban, during which every request, ours too, only adds
    to the invalid-request count; discord-api-docs, Rate Limits)."""
    if isinstance(exc, discord.HTTPException):
        return exc.status >= 500
    return isinstance(exc, _TRANSPORT_ERRORS)


@dataclass
class _Slot:
    message: discord.Message
    shown: str  # the content we last set (what the message shows)
    view: Any = None


class StreamingMessage:
    """Streams one narration into one or more channel messages.

    Call :meth:`update` with the whole text so far as often as you like (it never blocks), then
    :meth:`finish` with the final text, or :meth:`fail` with a note. ``messages`` lists the
    messages in use, in channel order.

    ``marker`` is appended while the text is still coming. ``first_edit_delay`` holds the first
    send back a moment so it shows more than one word (0: send as soon as there is any non-blank
    text). ``min_interval`` spaces this stream's intermediate edits (default: the pacer's
    :attr:`~RatePacer.steady_interval`); sends of new messages and the final requests are not
    spaced (they only wait for the pacer).
    ``reserve``: while it streams, the stream reserves room in the pacer for its final request
    (see :class:`RatePacer`); False when its caller has reserved for it.
    ``final_retry_delays`` are the pauses between attempts of a final request that failed
    transiently (5xx, 429, connection error); other errors are raised at once, except a 403:
    Discord refusing the bot the channel ends the narration where it stands.
    """

    def __init__(
        self,
        channel: MessageableChannel,
        pacer: RatePacer,
        *,
        marker: str = " ▌",
        limit: int = DISCORD_LIMIT,
        first_edit_delay: float = 0.0,
        min_interval: float | None = None,
        final_retry_delays: Sequence[float] = (0.5, 1.0, 2.0),
        reserve: bool = True,
        route: ChannelRoute | None = None,
    ) -> None:
        if limit <= len(marker.strip()):
            raise ValueError("limit must leave room for text")
        self.channel = channel
        # How its requests reach Discord (``cogs.ui.narration_routes``): the channel's
        # messages, or the follow-ups of the interaction that asked for the turn.
        self.route = route if route is not None else ChannelRoute(channel)
        self.pacer = pacer
        self.marker = marker
        self.limit = limit
        self.first_edit_delay = first_edit_delay
        self.min_interval = pacer.steady_interval if min_interval is None else min_interval
        self.final_retry_delays = tuple(final_retry_delays)
        self._channel_id = channel.id
        self._text = ""
        self._frozen: list[str] = []  # settled pieces, in order (raw, with their whitespace)
        self._frozen_len = 0
        self._slots: list[_Slot] = []
        self._nonce: str | None = None  # for the next send, kept until one succeeds
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._busy = False  # a request is in flight
        self._closing = False
        self._last_request: float | None = None
        self._finish_lock = asyncio.Lock()
        self._forbidden: discord.HTTPException | None = None  # Discord refused us here: stop
        self._reserve = reserve
        self._reserving = False  # the pacer keeps room for our final request

    @property
    def messages(self) -> list[discord.Message]:
        return [slot.message for slot in self._slots]

    @property
    def refused(self) -> discord.HTTPException | None:
        """Discord's refusal that ended the narration, if one did (403: 50001, 50013, 50007;
        the place deleted or closed: 10003, 50083; ``bot_permissions.is_final_refusal``): the
        bot may not post or edit here any more, so neither should its caller."""
        return self._forbidden

    @property
    def text(self) -> str:
        """The newest text given to :meth:`update` (or :meth:`finish`)."""
        return self._text

    # -- streaming ------------------------------------------------------------------------

    def update(self, text: str) -> None:
        """Set the whole text so far. Never blocks; the newest text wins. Ignored once closed."""
        if self._closing:
            return
        self._text = text
        self._wake.set()
        if self._task is None:
            if self._reserve:
                self._reserving = True
                self.pacer.reserve()
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"stream editor for channel {self._channel_id}"
            )

    def _settle_frozen(self, text: str) -> str:
        """Freeze every piece the text has outgrown; return the live tail."""
        if text[: self._frozen_len] != "".join(self._frozen):
            # Not an extension of what was frozen (the text was rewritten): start over.
            self._frozen.clear()
            self._frozen_len = 0
        tail = text[self._frozen_len :]
        while len(tail) > self.limit:
            piece, tail = take_piece(tail, self.limit)
            self._frozen.append(piece)
            self._frozen_len += len(piece)
        return tail

    def _streaming_contents(self) -> list[str]:
        """What each message should show right now."""
        tail = self._settle_frozen(self._text)
        contents = [shown for piece in self._frozen if (shown := piece.strip())]
        live = tail.strip()
        if live:
            with_marker = live + self.marker
            contents.append(with_marker if len(with_marker) <= self.limit else live)
        return contents

    def _next_step(self) -> tuple[int, str] | None:
        for index, content in enumerate(self._streaming_contents()):
            if index >= len(self._slots) or self._slots[index].shown != content:
                return index, content
        return None

    async def _run(self) -> None:
        waited_first = False
        while not self._closing:
            await self._wake.wait()
            self._wake.clear()
            if not waited_first and self.first_edit_delay > 0 and not self._slots:
                waited_first = True
                await self.pacer.sleep(self.first_edit_delay)
            while not self._closing and (step := self._next_step()) is not None:
                # Edits are spaced; a new message (the first, or a continuation right after
                # its predecessor was frozen) goes out as soon as the pacer allows.
                if step[0] < len(self._slots) and self._last_request is not None:
                    gap = self._last_request + self.min_interval - self.pacer.clock()
                    if gap > 0:
                        await self.pacer.sleep(gap)
                        continue
                if self.route.global_budget and self.pacer.saturated:
                    # Held back by the load: this narration goes out whole at its finish, even
                    # if room comes back before then (a late edit or two would show little
                    # and cost the busy budget a request each).
                    return
                # Optional: while the budget is short this waits, and the finish may send the
                # final text instead (newest text wins: nothing stale is queued).
                await self.route.acquire(self.pacer, priority=Priority.STREAM)
                step = self._next_step()
                if self._closing or step is None:
                    break
                try:
                    await self._request(*step)
                except discord.HTTPException as exc:
                    if is_final_refusal(exc):
                        self._refused(exc)
                        return
                    # The next request carries the newest text anyway; wait for more of it.
                    log.warning("streaming edit in channel %s failed: %s", self._channel_id, exc)
                    break
                except _TRANSPORT_ERRORS as exc:
                    # The next request carries the newest text anyway; wait for more of it.
                    log.warning("streaming edit in channel %s failed: %s", self._channel_id, exc)
                    break
                except Exception:
                    log.exception("streaming edit in channel %s failed", self._channel_id)
                    break

    async def _request(self, index: int, content: str, *, view: Any = _UNSET) -> bool:
        """Send message ``index`` (if it is the next new one) or edit it to ``content``.

        Returns False when the message turned out to be deleted: it is dropped from the list and
        the messages after it move up one place.
        """
        self._busy = True
        try:
            kwargs: dict[str, Any] = {"allowed_mentions": _NO_MENTIONS}
            if index == len(self._slots):
                if view is not _UNSET and view is not None:
                    kwargs["view"] = view
                # The same nonce until a send succeeds: if one landed but its answer was lost,
                # Discord answers the next with that message instead of posting a duplicate.
                if self._nonce is None:
                    self._nonce = str(secrets.randbits(63))
                message = await self.route.send(content, self._nonce, **kwargs)
                self._nonce = None
                # An earlier attempt may have landed with other content: then edit it next.
                shown = getattr(message, "content", content)
                self._slots.append(_Slot(message, shown, None if view is _UNSET else view))
                return True
            slot = self._slots[index]
            if view is not _UNSET:
                kwargs["view"] = view
            try:
                edited = await self.route.edit(slot.message, content=content, **kwargs)
            except discord.NotFound:
                log.info("a narration message in channel %s was deleted", self._channel_id)
                if slot in self._slots:
                    self._slots.remove(slot)
                return False
            if edited is not None:
                slot.message = edited  # discord.py returns a fresh Message with the new content
            slot.shown = content
            if view is not _UNSET:
                slot.view = view
            return True
        finally:
            self._busy = False
            self._last_request = self.pacer.clock()

    # -- ending ---------------------------------------------------------------------------

    async def _stop_editor(self) -> None:
        """Stop the editor task, letting a request in flight complete first."""
        task = self._task
        if task is None or task.done():
            return
        self._wake.set()
        if not self._busy:
            task.cancel()  # it is waiting (for text, the pacer or its spacing): safe to stop
        await asyncio.wait([task])
        if not task.cancelled() and task.exception() is not None:
            log.error("stream editor crashed", exc_info=task.exception())

    def _final_contents(self, text: str, suffix: str | None) -> list[str]:
        pieces = display_pieces(text, self.limit)
        tail = (suffix or "").rstrip()
        if tail.strip():
            if pieces and len(pieces[-1]) + len(tail) <= self.limit:
                pieces[-1] += tail
            else:
                pieces.extend(display_pieces(tail, self.limit))
        return pieces or [EMPTY_TEXT]

    async def _final_request(self, index: int, content: str, view: Any) -> bool:
        delays = self.final_retry_delays
        for attempt in range(len(delays) + 1):
            await self.route.acquire(self.pacer, urgent=True)
            try:
                return await self._request(index, content, view=view)
            except Exception as exc:
                if not _transient(exc) or attempt == len(delays):
                    raise
                log.warning(
                    "final edit in channel %s failed (%s); retrying in %.1f s",
                    self._channel_id,
                    exc,
                    delays[attempt],
                )
                await self.pacer.sleep(delays[attempt])
        raise AssertionError("unreachable")

    async def _settle(self, contents: list[str], view: Any) -> None:
        index = 0
        while index < len(contents):
            content = contents[index]
            last = index == len(contents) - 1
            wanted_view = view if last else None
            if index < len(self._slots):
                slot = self._slots[index]
                view_arg = _UNSET if slot.view is wanted_view else wanted_view
                if slot.shown == content and view_arg is _UNSET:
                    index += 1
                    continue
            else:
                view_arg = _UNSET if wanted_view is None else wanted_view
            if not await self._final_request(index, content, view_arg):
                continue  # deleted under us: the next message (or a new one) takes its place
            index += 1
        while len(self._slots) > len(contents):
            extra = self._slots.pop()
            try:
                await self.route.acquire(self.pacer)
                await self.route.delete(extra.message)
            except (discord.HTTPException, *_TRANSPORT_ERRORS) as exc:
                log.warning("could not delete a surplus narration message: %s", exc)

    async def finish(
        self,
        text: str,
        *,
        view: discord.ui.View | None = None,
        suffix: str | None = None,
    ) -> list[discord.Message]:
        """Stop streaming and make the messages show ``text`` (plus ``suffix``), no marker.

        Waits for the request in flight, then edits/sends until every message shows exactly its
        final piece, with ``view`` on the last message only. ``suffix`` is appended to the last
        piece verbatim (bring your own separator, e.g. ``"\\n-# hp 55/100"``) or, if it does not
        fit there, goes into a message of its own. ``text`` need not extend the streamed text.
        Requests wait for the pacer as long as needed; transient failures are retried with
        backoff, then raised. A refusal for lack of permission (403) ends the narration where it
        stands instead, logged as a warning. May be called again (e.g. to change the view).
        Returns the messages, in order.
        """
        async with self._finish_lock:
            self._closing = True
            self._text = text
            try:
                await self._stop_editor()
                if self._forbidden is None:
                    await self._settle(self._final_contents(text, suffix), view)
            except discord.HTTPException as exc:
                if not is_final_refusal(exc):
                    raise
                self._refused(exc)
            finally:
                self._release()
            return self.messages

    def _release(self) -> None:
        if self._reserving:
            self._reserving = False
            self.pacer.release()

    def _refused(self, exc: discord.HTTPException) -> None:
        """Discord refused a request for good (403, e.g. 50013 Missing Permissions; or the
        thread was deleted, locked or archived: the bot may no longer post or edit there).
        Every further request would be refused the same way, so the narration ends where it
        stands; the turn itself is stored whatever Discord shows."""
        self._forbidden = exc
        log.warning("narration in channel %s stopped: %s", self._channel_id, exc)

    async def fail(self, note: str, *, view: discord.ui.View | None = None) -> None:
        """Stop streaming; the final edit shows the text so far followed by ``note``.

        Never raises for Discord errors (it runs on a path that is already handling one); they
        are logged.
        """
        text = self._text
        suffix = f"\n\n{note}" if text.strip() else note
        try:
            await self.finish(text, view=view, suffix=suffix)
        except (discord.HTTPException, *_TRANSPORT_ERRORS):
            log.exception("could not show the failure note in channel %s", self._channel_id)

    async def aclose(self) -> None:
        """Stop streaming without a final edit (messages keep what they show)."""
        self._closing = True
        try:
            await self._stop_editor()
        finally:
            self._release()
