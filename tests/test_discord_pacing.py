"""Pacing many narrations at once: real discord.py over the stand-in, a real model server.

With room in the budget, narrations stream as they are written; when the budget is saturated,
their intermediate edits are skipped and each one's final text goes out in as few requests as
can be. Either way every narration ends showing exactly ``display_pieces`` of the stored text,
no message ever goes back to an older text, and Discord never answers 429 (the env checks that
when each test ends).
"""

from __future__ import annotations

import asyncio
import re

from sqlalchemy import select
from sqlmodel import col

from bot.standin import MessageRecord
from cogs.ui.narration_routes import InteractionRoute
from cogs.ui.pacing import RatePacer
from cogs.ui.text_split import display_pieces
from engine.storage.models import Role, StoryNode
from tests.discord_env import DiscordEnv
from tests.fakes.openai_server import Reply

MARKER = " ▌"  # what a narration still coming ends with

# A narration longer than two messages, to be split.
LONG_TEXT = "\n\n".join(
    f"Verse {n}: " + " ".join(f"reed{n}-{i}" for i in range(70)) + "." for n in range(8)
)


def use_pacer(env: DiscordEnv, pacer: RatePacer) -> None:
    """The bot paces its requests with ``pacer`` from now on."""
    env.bot.narrator.pacer = pacer
    env.bot.narrator.earlier.pacer = pacer


async def stored_narration(env: DiscordEnv, thread: int) -> str:
    adventure = await env.bot.services.play.adventure_in(thread)
    assert adventure is not None
    async with env.bot.services.db.session() as session:
        nodes = await session.execute(
            select(col(StoryNode.text))
            .where(
                col(StoryNode.adventure_id) == adventure.adventure_id,
                col(StoryNode.role) == Role.NARRATOR,
            )
            .order_by(col(StoryNode.index).desc(), col(StoryNode.id).desc())
            .limit(1)
        )
    return nodes.scalar_one()


def channel_requests(env: DiscordEnv, thread: int, since: int) -> list[str]:
    """The message creates and edits in ``thread`` since request number ``since``."""
    route = re.compile(rf"/channels/{thread}/messages(/\d+)?$")
    return [
        f"{r.method} {r.path}"
        for r in env.fake.requests[since:]
        if r.method in ("POST", "PATCH") and route.search(r.path) and r.status != 429
    ]


async def play_at_once(
    env: DiscordEnv, fake_model, texts: list[str], *, delay: float
) -> tuple[dict[int, list[MessageRecord]], int]:
    """One thread per text, then ``/do`` in all of them at once, each narrated by one of the
    texts (streamed a token every ``delay`` s). Returns each thread's new narration messages,
    and the number of requests the stand-in had seen before the turns."""
    threads = [await env.start_thread() for _ in texts]
    before = {thread: {m.id for m in env.fake.messages(thread)} for thread in threads}
    since = len(env.fake.requests)
    fake_model.queue(*(Reply(text=text, delay=delay) for text in texts))
    records = await asyncio.gather(
        *(env.fake.slash(env.alice, thread, "do", action="wade in") for thread in threads)
    )
    await env.done()
    assert all(record.failed is None for record in records)
    shown = {
        thread: [
            m
            for m in env.fake.messages(thread)
            if m.id not in before[thread] and not m.is_response and not m.ephemeral
        ]
        for thread in threads
    }
    return shown, since


async def assert_exact(env: DiscordEnv, shown: dict[int, list[MessageRecord]]) -> None:
    """Each thread's new messages show exactly the stored narration, split as it is split,
    with the buttons on the last one only."""
    for thread, messages in shown.items():
        stored = await stored_narration(env, thread)
        assert [m.content for m in messages] == display_pieces(stored)
        assert [m.buttons != [] for m in messages] == [False] * (len(messages) - 1) + [True]


def assert_never_older(messages: list[MessageRecord]) -> None:
    """The newest text wins: until a message shows its final text, each edit extends the text
    the one before it showed (an edit waiting for its turn is never sent after a newer one),
    and once it shows its final text (its part of the narration, frozen when the text
    outgrew it), it never changes again."""
    for message in messages:
        texts = [content for _, content in message.edits]
        if message.content not in texts:
            continue  # sent with its final text, never edited
        final_at = texts.index(message.content)
        assert set(texts[final_at:]) == {message.content}
        streamed = [text.removesuffix(MARKER) for text in texts[:final_at]]
        for older, newer in zip(streamed, streamed[1:], strict=False):
            assert newer.startswith(older), (older, newer)


async def test_a_saturated_budget_skips_intermediate_edits_and_ends_every_narration_exact(
    env: DiscordEnv, fake_model, monkeypatch
):
    # Narrations by channel messages (tokens too old to start one with), which spend the
    # bot's global budget.
    monkeypatch.setattr(InteractionRoute, "fresh", staticmethod(lambda interaction: False))
    # A budget so small that one turn in progress fills it: with two requests reserved for
    # each turn's end, nothing is left over for streaming.
    use_pacer(env, RatePacer(global_per_second=4, final_horizon=0.5))
    texts = [
        "The water is cold. Something brushes your ankle, then is gone.",
        LONG_TEXT,
        "A lantern bobs on the far bank. Nobody holds it.",
        "Mud sucks at your boots; the humming stops as you step in.",
    ]
    shown, first_turn = await play_at_once(env, fake_model, texts, delay=0.005)
    await assert_exact(env, shown)
    assert sorted(len(messages) for messages in shown.values()) == [1, 1, 1, 3]
    for thread, messages in shown.items():
        # No intermediate text: each message was sent once, with its final text...
        assert [m.edits for m in messages] == [[]] * len(messages)
        # ...and the turn asked the channel for one request per message, plus the one taking
        # the buttons off the opening.
        requests = channel_requests(env, thread, first_turn)
        assert len(requests) == len(messages) + 1, requests


async def test_a_saturated_global_budget_holds_back_no_narration_through_an_interaction(
    env: DiscordEnv, fake_model
):
    # The same budget, filled by one turn's reservations: narrations that follow their
    # interactions' responses spend none of it ("Interaction endpoints are not bound to the
    # bot's Global Rate Limit", discord-api-docs, Rate Limits), so they still stream.
    use_pacer(env, RatePacer(global_per_second=4, final_horizon=0.5))
    texts = [
        "The water is cold. Something brushes your ankle, then is gone, and the reeds lean "
        "away from you as if a wind had passed that you did not feel.",
        LONG_TEXT,
    ]
    shown, first_turn = await play_at_once(env, fake_model, texts, delay=0.01)
    await assert_exact(env, shown)
    for thread, messages in shown.items():
        assert all(m.followup for m in messages), "follow-ups of the interaction"
        assert any(m.edits for m in messages), "streamed by edits, not sent whole"
        assert_never_older(messages)
        # The turn's one request on the global budget: the buttons taken off the opening.
        assert len(channel_requests(env, thread, first_turn)) == 1
    assert env.bot.narrator.pacer.interaction_requests > 0


async def test_with_room_narrations_at_once_still_stream_and_never_go_back(
    env: DiscordEnv, fake_model
):
    texts = [
        "The water is cold. Something brushes your ankle, then is gone, and the reeds lean "
        "away from you as if a wind had passed that you did not feel.",
        LONG_TEXT,
        "A lantern bobs on the far bank. Nobody holds it, and yet it moves against the current, "
        "slowly, towards the ford where you stand.",
    ]
    shown, _ = await play_at_once(env, fake_model, texts, delay=0.01)
    await assert_exact(env, shown)
    for messages in shown.values():
        assert any(m.edits for m in messages), "streamed by edits, not sent whole"
        assert_never_older(messages)
