"""/narrative through real discord.py over the stand-in: the host turns tracking on and corrects
the state, anyone reads it with what changed at the last turn, others are refused privately."""

from __future__ import annotations

import json

from sqlalchemy import select

from engine.storage.models import Adventure
from tests.discord_env import answered
from tests.fakes.openai_server import Reply

PROSE = "Mira takes the lantern down to the harbor, where the ferry waits."
EVENTS = [
    {"type": "add_entity", "id": "mira", "name": "Mira", "kind": "person"},
    {"type": "add_entity", "id": "harbor", "name": "The Harbor", "kind": "place"},
    {"type": "add_entity", "id": "inn", "name": "The Inn", "kind": "place"},
    {"type": "set_location", "entity": "mira", "place": "harbor"},
    {"type": "open_thread", "id": "ferry", "text": "Where is the ferry bound?"},
    {"type": "set_location", "entity": "nobody_known", "place": "harbor"},
]
BLOCK = "```state\n" + json.dumps({"story": EVENTS}) + "\n```"


async def test_narrative_commands_in_discord(env, fake_model):
    await env.fake.slash(env.alice, env.channel, "start", scenario="lantern")
    await env.done()
    (thread,) = env.fake.threads(env.channel)

    # Only the host turns tracking on; the refusal is bob's alone.
    refused = await env.fake.slash(env.bob, thread, "narrative track", on=True)
    answer = await answered(env, refused)
    assert answer.ephemeral and "host" in answer.content
    turned = await env.fake.slash(env.alice, thread, "narrative track", on=True)
    answer = await answered(env, turned)
    assert not answer.ephemeral and "tracking is on" in answer.content

    fake_model.queue(Reply(text=f"{PROSE}\n\n{BLOCK}", delay=0.005))
    await env.fake.slash(env.alice, thread, "do", action="follow Mira")
    await env.done()
    narration = env.narration(thread)[-1]
    assert narration.startswith(PROSE) and "```" not in narration and "story" not in narration

    # Anyone reads it, privately: who is where, the open threads, what the turn changed and
    # what it was refused.
    shown = await env.fake.slash(env.bob, thread, "narrative state")
    answer = await answered(env, shown)
    assert answer.ephemeral
    text = answer.embeds[0]["description"]
    assert "Mira (person): at The Harbor" in text
    assert "Where is the ferry bound?" in text
    assert "What changed at turn 1**" in text and "location Mira: none → The Harbor" in text
    assert "refused: entity 'nobody_known' is no known entity" in text

    # The host corrects it; bob may not.
    refused = await env.fake.slash(
        env.bob, thread, "narrative correct", what="location", subject="Mira", value="The Inn"
    )
    answer = await answered(env, refused)
    assert answer.ephemeral and "host" in answer.content
    fixed = await env.fake.slash(
        env.alice, thread, "narrative correct", what="location", subject="Mira", value="The Inn"
    )
    answer = await answered(env, fixed)
    assert not answer.ephemeral and "location Mira: The Harbor → The Inn" in answer.content
    # A correction that cannot resolve its reference is refused with the reason, privately.
    bad = await env.fake.slash(
        env.alice, thread, "narrative correct", what="location", subject="Mira", value="Moon"
    )
    answer = await answered(env, bad)
    assert answer.ephemeral and "no known entity" in answer.content

    async with env.bot.services.db.session() as session:
        adventure = (
            await session.scalars(select(Adventure).where(Adventure.channel_id == thread))
        ).one()
    assert adventure.story_tracking and adventure.story_state["locations"] == {"mira": "inn"}
