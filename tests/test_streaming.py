"""The streaming editor, against a recording stand-in for a Discord channel.

The stand-in (tests/streaming_doubles.py) enforces Discord's per-channel window itself, counts
requests in flight per stream, and can fail chosen requests, so these tests show that the editor
stays inside the limits rather than assume it. They run in real time with a fast window (5 per
0.5 s) to stay quick; the pacer's own tests, on a fake clock, are in tests/test_pacer.py.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import discord
import pytest

from cogs.ui.streaming import EMPTY_TEXT, StreamingMessage
from cogs.ui.text_split import display_pieces
from tests.streaming_doubles import (
    MARKER,
    PER_CHANNEL,
    PER_SECONDS,
    FakeChannel,
    FakeMessage,
    Recorder,
    assert_window_kept,
    fast_pacer,
    http_error,
    narration,
    no_space,
    stream_in_chunks,
    wait_for,
)

# --------------------------------------------------------------------------------------------
# StreamingMessage in real time


async def test_first_words_appear_fast_with_the_marker_which_goes_at_the_end() -> None:
    recorder = Recorder()
    channel = FakeChannel(recorder)
    stream = StreamingMessage(channel, fast_pacer())
    stream.update("   ")  # nothing to show yet
    await asyncio.sleep(0.02)
    assert recorder.ops == []
    started = time.monotonic()
    stream.update("Once upon")
    await wait_for(lambda: channel.messages)  # the send has been answered
    assert time.monotonic() - started < 0.05
    assert channel.messages[0].content == "Once upon" + MARKER
    messages = await stream.finish("Once upon a time.")
    assert [m.content for m in messages] == ["Once upon a time."]
    assert_window_kept(recorder)


async def test_long_narration_splits_into_ordered_messages_that_rejoin() -> None:
    recorder = Recorder()
    channel = FakeChannel(recorder)
    stream = StreamingMessage(channel, fast_pacer())
    text = narration(4500)
    assert 4500 <= len(text) < 5000
    await stream_in_chunks(stream, text)
    messages = await stream.finish(text)

    assert len(messages) >= 3
    assert messages == channel.messages  # in the order they were sent
    contents = [m.content for m in messages]
    assert contents == display_pieces(text)
    assert all(len(c) <= 2000 and MARKER.strip() not in c for c in contents)
    assert no_space("".join(contents)) == no_space(text)
    assert all(p.endswith(tuple('.!?…"')) for p in contents[:-1])  # cut at boundaries
    # While streaming the marker was there; frozen messages were not touched after freezing.
    assert any(h.endswith(MARKER) for m in messages for h in m.history)
    for message in messages[:-1]:
        assert message.history.index(message.content) == len(message.history) - 1
    assert_window_kept(recorder)
    assert channel.max_in_flight == 1


async def test_a_burst_of_text_then_finish_lands_every_piece_in_order() -> None:
    recorder = Recorder()
    channel = FakeChannel(recorder)
    stream = StreamingMessage(channel, fast_pacer())
    text = narration(5000, seed=3)
    stream.update(text)
    messages = await stream.finish(text)
    assert [m.content for m in messages] == display_pieces(text)
    assert len(messages) >= 3
    assert_window_kept(recorder)


async def test_three_streams_in_one_channel_share_the_window() -> None:
    recorder = Recorder()
    pacer = fast_pacer()
    channels = [FakeChannel(recorder, channel_id=7) for _ in range(3)]
    # No spacing of their own: the shared pacer alone must keep them inside the window.
    streams = [StreamingMessage(c, pacer, min_interval=0) for c in channels]
    texts = [narration(1500, seed=s) for s in (11, 12, 13)]

    async def run(stream: StreamingMessage, text: str) -> list[Any]:
        await stream_in_chunks(stream, text, chunk=10, pause=0.003)
        return await stream.finish(text)

    results = await asyncio.gather(*(run(s, t) for s, t in zip(streams, texts, strict=True)))
    for messages, text in zip(results, texts, strict=True):
        assert [m.content for m in messages] == display_pieces(text)
    assert_window_kept(recorder)
    assert all(c.max_in_flight == 1 for c in channels)
    assert len(recorder.of("send")) + len(recorder.of("edit")) > 2 * PER_CHANNEL  # it was busy
    assert max(o.t for o in recorder.ops) - min(o.t for o in recorder.ops) > PER_SECONDS


async def test_a_saturated_budget_skips_the_streaming_and_sends_only_final_pieces() -> None:
    recorder = Recorder()
    channel = FakeChannel(recorder)
    pacer = fast_pacer()
    pacer.reserve(1000)  # other work in progress has claimed the whole budget for its ends
    stream = StreamingMessage(channel, pacer)
    text = narration(4500, seed=8)
    await stream_in_chunks(stream, text, chunk=40)
    assert recorder.ops == []  # nothing intermediate went out
    messages = await stream.finish(text)
    pieces = display_pieces(text)
    assert [m.content for m in messages] == pieces
    assert [(o.op, o.content) for o in recorder.ops] == [("send", piece) for piece in pieces]
    assert pacer.reserved == 1000  # the stream's own reservation ended with it


async def test_a_stream_held_back_by_the_load_ends_whole_even_when_room_comes_back() -> None:
    recorder = Recorder()
    channel = FakeChannel(recorder)
    pacer = fast_pacer()
    stream = StreamingMessage(channel, pacer)
    stream.update("One")
    await wait_for(lambda: stream.messages)
    pacer.reserve(1000)  # the process gets busy
    for text in ("One two", "One two three"):
        stream.update(text)
        await asyncio.sleep(0.2)  # longer than the stream's spacing: it would have edited
    assert [o.content for o in recorder.ops] == ["One" + MARKER]
    pacer.release(1000)  # room again, before the narration ends
    stream.update("One two three four")
    await asyncio.sleep(0.2)
    # No late intermediate edit: the text that waited, and the newest, go out as the final.
    assert [o.content for o in recorder.ops] == ["One" + MARKER]
    await stream.finish("One two three four.")
    assert [o.content for o in recorder.ops] == ["One" + MARKER, "One two three four."]
    assert pacer.reserved == 0


async def test_a_stream_never_held_back_is_not_stopped_by_an_earlier_busy_spell() -> None:
    recorder = Recorder()
    channel = FakeChannel(recorder)
    pacer = fast_pacer()
    pacer.reserve(1000)
    pacer.release(1000)  # busy once, not now
    stream = StreamingMessage(channel, pacer)
    stream.update("One")
    await wait_for(lambda: stream.messages)
    stream.update("One two")
    await wait_for(lambda: len(recorder.ops) == 2)
    await stream.finish("One two.")
    assert [o.content for o in recorder.ops] == ["One" + MARKER, "One two" + MARKER, "One two."]


async def test_never_more_than_one_request_in_flight_per_stream() -> None:
    recorder = Recorder(latency=(0.01, 0.03))
    channel = FakeChannel(recorder)
    stream = StreamingMessage(channel, fast_pacer(), min_interval=0)
    text = narration(2500, seed=5)
    await stream_in_chunks(stream, text, chunk=25, pause=0.001)
    await stream.finish(text)
    assert channel.max_in_flight == 1
    assert len(recorder.ops) > 3


async def test_unchanged_text_is_not_sent_again() -> None:
    recorder = Recorder()
    channel = FakeChannel(recorder)
    stream = StreamingMessage(channel, fast_pacer(), min_interval=0)
    stream.update("Hello")
    await wait_for(lambda: stream.messages)
    for variant in ("Hello", "Hello ", "Hello\n\n", "  Hello", "Hello"):
        stream.update(variant)
        await asyncio.sleep(0.02)
    assert [o.op for o in recorder.ops] == ["send"]
    await stream.finish("Hello")
    assert [(o.op, o.content) for o in recorder.ops] == [
        ("send", "Hello" + MARKER),
        ("edit", "Hello"),
    ]
    await stream.finish("Hello")  # a second finish with nothing new does nothing
    assert len(recorder.ops) == 2


async def test_finish_puts_the_view_on_the_last_message_only() -> None:
    recorder = Recorder()
    channel = FakeChannel(recorder)
    stream = StreamingMessage(channel, fast_pacer())
    text = narration(3000, seed=8)
    await stream_in_chunks(stream, text, chunk=40)
    view = discord.ui.View(timeout=None)
    messages = await stream.finish(text, view=view)
    assert len(messages) >= 2
    assert messages[-1].view is view
    assert all(m.view is None for m in messages[:-1])
    assert [o.view for o in recorder.ops if o.view not in (None, discord.utils.MISSING)] == [view]
    # Every request asked Discord not to ping anyone the model happened to name.
    assert all(
        o.allowed_mentions is not None and o.allowed_mentions.to_dict()["parse"] == []
        for o in recorder.ops
    )


async def test_finish_with_a_suffix_keeps_it_on_the_last_message() -> None:
    recorder = Recorder()
    channel = FakeChannel(recorder)
    stream = StreamingMessage(channel, fast_pacer())
    stream.update("The gate opens.")
    messages = await stream.finish("The gate opens.", suffix="\n-# hp 55/100")
    assert [m.content for m in messages] == ["The gate opens.\n-# hp 55/100"]


async def test_fail_leaves_the_partial_text_and_the_note() -> None:
    recorder = Recorder()
    channel = FakeChannel(recorder)
    stream = StreamingMessage(channel, fast_pacer())
    stream.update("The door creaks open and")
    await wait_for(lambda: stream.messages)
    stream.update("The door creaks open and a cold")
    await stream.fail("⚠ *The narration stopped here.*")
    assert [m.content for m in stream.messages] == [
        "The door creaks open and a cold\n\n⚠ *The narration stopped here.*"
    ]
    stream.update("ignored after the end")
    await asyncio.sleep(0.02)
    assert stream.messages[0].content.endswith("stopped here.*")

    empty = StreamingMessage(FakeChannel(recorder), fast_pacer())
    await empty.fail("⚠ Nothing came.")
    assert [m.content for m in empty.messages] == ["⚠ Nothing came."]


async def test_an_intermediate_error_does_not_stop_the_stream(caplog) -> None:
    recorder = Recorder()
    channel = FakeChannel(recorder)
    stream = StreamingMessage(channel, fast_pacer(), min_interval=0.01)
    stream.update("First words")
    await wait_for(lambda: stream.messages)
    recorder.failures = [http_error(500, message="Server Error")]
    caplog.set_level(logging.WARNING, logger="cogs.ui.streaming")
    stream.update("First words and then")
    await asyncio.sleep(0.05)
    stream.update("First words and then some more")
    await wait_for(lambda: channel.messages[0].content == "First words and then some more" + MARKER)
    assert "failed" in caplog.text
    messages = await stream.finish("First words and then some more.")
    assert [m.content for m in messages] == ["First words and then some more."]


async def test_a_deleted_message_is_replaced_by_a_new_one() -> None:
    recorder = Recorder()
    channel = FakeChannel(recorder)
    stream = StreamingMessage(channel, fast_pacer(), min_interval=0.01)
    stream.update("A story begins")
    await wait_for(lambda: stream.messages)
    channel.messages[0].deleted = True  # a moderator removed it
    stream.update("A story begins, and goes on")
    await wait_for(lambda: len(channel.messages) == 2)
    messages = await stream.finish("A story begins, and goes on.")
    assert messages == [channel.messages[1]]
    assert messages[0].content == "A story begins, and goes on."


async def test_a_message_deleted_before_the_final_edit_is_replaced_in_order() -> None:
    recorder = Recorder()
    channel = FakeChannel(recorder)
    stream = StreamingMessage(channel, fast_pacer(), limit=60)
    text = "First paragraph is here.\n\nSecond paragraph is here.\n\nThird paragraph."
    stream.update(text)
    await wait_for(lambda: len(channel.messages) == 2)
    await asyncio.sleep(0.05)
    channel.messages[0].deleted = True
    final = text.replace("First", "The first") + " The end."  # the first piece must change
    messages = await stream.finish(final)
    assert [m.content for m in messages] == display_pieces(final, 60)
    assert not any(m.deleted for m in messages)
    assert messages[0] is channel.messages[1]  # the survivor moved up; a new one follows it


async def test_final_edit_retries_transient_errors_then_lands() -> None:
    recorder = Recorder()
    channel = FakeChannel(recorder)
    stream = StreamingMessage(channel, fast_pacer(), final_retry_delays=(0.01, 0.01, 0.01))
    stream.update("Almost")
    await wait_for(lambda: stream.messages)
    await asyncio.sleep(0.01)
    recorder.failures = [http_error(503), OSError("connection reset")]
    messages = await stream.finish("Almost done.")
    assert [m.content for m in messages] == ["Almost done."]


async def test_final_edit_gives_up_after_its_retries_and_on_client_errors() -> None:
    recorder = Recorder()
    channel = FakeChannel(recorder)
    stream = StreamingMessage(channel, fast_pacer(), final_retry_delays=(0.01, 0.01))
    stream.update("Almost")
    await wait_for(lambda: stream.messages)
    await asyncio.sleep(0.01)
    recorder.failures = [http_error(500)] * 3
    with pytest.raises(discord.DiscordServerError):
        await stream.finish("Almost done.")
    recorder.failures = [http_error(400, 50035, "Invalid Form Body"), None]
    with pytest.raises(discord.HTTPException):
        await stream.finish("Almost done.")  # not retried
    assert recorder.failures == [None]
    # A 403 (the bot may no longer edit there) is not retried either, and ends the narration
    # where it stands: nothing more is asked of Discord for it.
    recorder.failures = [http_error(403, 50013, "Missing Permissions"), None]
    assert await stream.finish("Almost done.") == stream.messages
    assert recorder.failures == [None]
    await stream.finish("Almost done, again.")
    assert recorder.failures == [None]


async def test_a_lost_send_answer_is_not_duplicated_on_retry() -> None:
    recorder = Recorder()
    channel = FakeChannel(recorder)
    real_send = channel.send
    calls = 0

    async def flaky_send(*args: Any, **kwargs: Any) -> FakeMessage:
        nonlocal calls
        calls += 1
        message = await real_send(*args, **kwargs)
        if calls == 1:
            raise OSError("the answer was lost")  # it landed, but we never heard back
        return message

    channel.send = flaky_send  # type: ignore[method-assign]
    stream = StreamingMessage(channel, fast_pacer(), final_retry_delays=(0.01,))
    messages = await stream.finish("Hello there.")
    assert len(channel.messages) == 1
    assert [m.content for m in messages] == ["Hello there."]


async def test_the_final_edit_waits_for_a_full_window_and_lands() -> None:
    recorder = Recorder()
    channel = FakeChannel(recorder)
    pacer = fast_pacer()
    stream = StreamingMessage(channel, pacer)
    stream.update("Waiting")
    await wait_for(lambda: stream.messages)
    while pacer.would_wait(channel.id) == 0:
        await pacer.acquire(channel.id)  # someone else uses up the window
    started = time.monotonic()
    messages = await stream.finish("Waiting is over.")
    assert time.monotonic() - started >= PER_SECONDS * 0.8
    assert [m.content for m in messages] == ["Waiting is over."]
    assert_window_kept(recorder)


async def test_a_final_text_that_is_not_an_extension_reflows_and_drops_extras() -> None:
    recorder = Recorder()
    channel = FakeChannel(recorder)
    stream = StreamingMessage(channel, fast_pacer(), limit=120)
    prose = "The river is wide. The ferryman waits.\n\nHe asks for a coin."
    block = '\n\n```state\n{"hp": -5, "gold": -1, "flags": {"crossed_river": true}, "x": 1}\n```'
    await stream_in_chunks(stream, prose + block, chunk=7)
    await wait_for(lambda: len(channel.messages) == 2)
    messages = await stream.finish(prose)
    assert [m.content for m in messages] == [prose]
    assert channel.messages[1].deleted
    assert messages == [channel.messages[0]]


async def test_finishing_without_any_text_shows_a_placeholder() -> None:
    recorder = Recorder()
    stream = StreamingMessage(FakeChannel(recorder), fast_pacer())
    messages = await stream.finish("  ")
    assert [m.content for m in messages] == [EMPTY_TEXT]


async def test_first_edit_delay_gathers_more_words() -> None:
    recorder = Recorder()
    channel = FakeChannel(recorder)
    stream = StreamingMessage(channel, fast_pacer(), first_edit_delay=0.05)
    stream.update("One")
    await asyncio.sleep(0.01)
    stream.update("One two three")
    await wait_for(lambda: stream.messages)
    assert recorder.ops[0].content == "One two three" + MARKER
    await stream.finish("One two three.")


async def test_aclose_stops_without_a_final_edit() -> None:
    recorder = Recorder()
    channel = FakeChannel(recorder)
    stream = StreamingMessage(channel, fast_pacer())
    stream.update("Half a")
    await wait_for(lambda: stream.messages)
    await stream.aclose()
    stream.update("Half a sentence")
    await asyncio.sleep(0.02)
    assert [o.content for o in recorder.ops] == ["Half a" + MARKER]
