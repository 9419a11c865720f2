"""The lines that name a player for their own moves (continue, retry, undo, redo, edit, a
round's notice) name them as the story does: "You" in a DM, their character's name in a group
adventure, their display name without one. Real discord.py over the local stand-in, the fake
model server behind the bot."""

from __future__ import annotations

from cogs.ui.round_panels import round_notice
from engine.story.rounds import RoundPlayer, RoundState, TurnMode
from tests.discord_env import DiscordEnv, answered


async def answer_of(env: DiscordEnv, user: int, place: int, command: str, **options: str) -> str:
    record = await env.fake.slash(user, place, command, **options)
    await env.done()
    message = await answered(env, record)
    assert message.visible_to is None, "a move is told to everyone here"
    return message.content


async def test_in_a_dm_the_players_own_moves_read_in_the_second_person(env, fake_model):
    dm = env.fake.dm_channel(env.alice)
    await env.fake.slash(env.alice, dm, "start", scenario="lantern")
    await env.done()
    fake_model.queue("The lantern glows.", "The road bends.", "The road bends east.")
    assert await answer_of(env, env.alice, dm, "do", action="raise the lantern") == (
        "> You raise the lantern."
    )
    assert await answer_of(env, env.alice, dm, "continue") == "⏩ *You let the story go on.*"
    assert await answer_of(env, env.alice, dm, "retry") == (
        "🔁 *You ask for another take of the newest turn.*"
    )
    assert await answer_of(env, env.alice, dm, "undo") == "↩️ *You undid the last turn.*"
    assert await answer_of(env, env.alice, dm, "redo") == "↪️ *You brought the turn back.*"
    # A character set in a DM changes none of it: the DM's player is "You".
    await env.fake.slash(env.alice, dm, "character set", name="Ann Corran")
    await env.done()
    assert await answer_of(env, env.alice, dm, "undo") == "↩️ *You undid the last turn.*"


async def test_in_a_server_a_player_is_named_by_their_character(env, fake_model):
    thread = await env.start_thread()
    await env.fake.slash(env.alice, thread, "character set", name="Ann Corran")
    await env.done()
    fake_model.queue("The road bends.", "Again it bends.", "The reeds part.")
    assert await answer_of(env, env.alice, thread, "continue") == (
        "⏩ *Ann Corran lets the story go on.*"
    )
    assert await answer_of(env, env.alice, thread, "retry") == (
        "🔁 *Ann Corran asks for another take of the newest turn.*"
    )
    assert await answer_of(env, env.alice, thread, "undo") == (
        "↩️ *Ann Corran undid the last turn.*"
    )
    assert await answer_of(env, env.alice, thread, "redo") == (
        "↪️ *Ann Corran brought the turn back.*"
    )
    # A player without a character keeps their display name.
    assert await answer_of(env, env.bob, thread, "continue") == "⏩ *bob lets the story go on.*"


async def test_the_round_notice_names_the_player_as_the_panel_does(env, fake_model):
    thread = await env.start_thread()
    await env.fake.slash(env.alice, thread, "character set", name="Ann Corran")
    await env.done()
    await env.fake.slash(env.bob, thread, "character set", name="Bram")
    await env.done()
    await env.fake.slash(env.alice, thread, "host mode", mode="rounds")
    await env.done()
    fake_model.queue("Both are answered.")
    assert await answer_of(env, env.alice, thread, "do", action="light a torch") == (
        "✋ *Ann Corran has acted for this round (1/2).*"
    )
    assert await answer_of(env, env.alice, thread, "do", action="draw her knife") == (
        "✋ *Ann Corran changed their action for this round (1/2).*"
    )
    panel = [m for m in env.fake.messages(thread) if m.content.startswith("🎲 **Round")][-1]
    assert "✅ Ann Corran" in panel.content and "⏳ Bram" in panel.content


def test_the_round_notice_speaks_to_a_dms_player_and_falls_back_to_the_display_name():
    you = RoundState(1, TurnMode.ROUNDS, (RoundPlayer(7, "You", True),), None)
    assert round_notice(you, 7, "alice", replaced=False) == (
        "✋ *You have acted for this round (1/1).*"
    )
    assert round_notice(you, 7, "alice", replaced=True) == (
        "✋ *You changed your action for this round (1/1).*"
    )
    # Not listed (left meanwhile): the display name, its markup shown as typed.
    assert round_notice(you, 8, "b_o_b", replaced=False) == (
        "✋ *b\\_o\\_b has acted for this round (1/1).*"
    )
