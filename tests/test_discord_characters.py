"""Characters and the party through Discord (the stand-in): /character set|show, /party, and
actions written with the players' names in a group adventure, "> You" in a DM."""

from __future__ import annotations

from sqlalchemy import select
from sqlmodel import col

from engine.errors import NotAllowed
from engine.people.access.rules import Actor
from engine.prompt.narrator import GROUP_VOICE_LINE
from engine.storage.models import Role, StoryNode
from engine.storage.party_models import Character
from tests.discord_env import DiscordEnv, answered
from tests.fakes.openai_server import Reply


async def said(env: DiscordEnv, record) -> tuple[str, str]:
    """What the player was answered (checked to be for them alone): its text and its embed's
    title and description."""
    await env.done()
    message = await answered(env, record)
    assert message.ephemeral or message.visible_to == record.user_id, message.content
    embed = message.embeds[0] if message.embeds else {}
    return message.content, f"{embed.get('title', '')}\n{embed.get('description', '')}"


def action_line(env: DiscordEnv, record) -> str:
    """The line an action command answered with: the action as the story writes it."""
    assert record.original_message_id is not None, "not acknowledged"
    return env.fake.message(record.original_message_id).content


async def player_nodes(env: DiscordEnv) -> list[tuple[int | None, str]]:
    async with env.bot.services.db.session() as session:
        rows = await session.execute(
            select(col(StoryNode.author_id), col(StoryNode.text))
            .where(col(StoryNode.role) == Role.PLAYER)
            .order_by(col(StoryNode.id))
        )
        return [(author, text) for author, text in rows]


async def test_two_players_with_characters_act_under_their_names(env: DiscordEnv, fake_model):
    thread = await env.start_thread()
    content, _ = await said(
        env,
        await env.fake.slash(
            env.alice, thread, "character set", name="Ann", about="A ranger from the north."
        ),
    )
    assert "You play Ann" in content
    # Anyone in the adventure's place sets their own: bob manages nothing here.
    await said(env, await env.fake.slash(env.bob, thread, "character set", name="Bram"))

    fake_model.queue("Steel rings in the dark.", "Nobody answers Bram.")
    drawn = await env.fake.slash(env.alice, thread, "do", action="draw her sword")
    await env.done()
    asked = await env.fake.slash(env.bob, thread, "say", words="who goes there?")
    await env.done()
    assert action_line(env, drawn) == "> Ann draws her sword."
    assert action_line(env, asked) == '> Bram says "Who goes there?"'
    assert await player_nodes(env) == [
        (env.alice, "> Ann draws her sword."),
        (env.bob, '> Bram says "Who goes there?"'),
    ]
    # The prompt of the second turn: the party and the rule in the system message, both
    # actions in the story under the characters' names.
    system, user = (m["content"] for m in fake_model.requests[-1]["messages"])
    assert "Party:\nAnn: A ranger from the north.\nBram" in system
    assert GROUP_VOICE_LINE in system and "second person" not in system
    assert user.index("> Ann draws her sword.") < user.index('> Bram says "Who goes there?"')
    # The first turn's system message already had the same party: its prefix stays stable.
    first_system = fake_model.requests[-2]["messages"][0]["content"]
    assert first_system == system


async def test_a_player_without_a_character_acts_under_their_display_name(env, fake_model):
    thread = await env.start_thread()
    fake_model.queue("The door creaks.")
    record = await env.fake.slash(env.bob, thread, "do", action="I open the door")
    await env.done()
    assert action_line(env, record) == "> bob opens the door."
    assert await player_nodes(env) == [(env.bob, "> bob opens the door.")]
    system, user = (m["content"] for m in fake_model.requests[-1]["messages"])
    assert "> bob opens the door." in user
    assert "Party:\n" not in system  # nobody has a character yet
    assert GROUP_VOICE_LINE in system


async def test_a_dm_story_stays_in_the_second_person(env: DiscordEnv, fake_model):
    dm = env.fake.dm_channel(env.alice)
    await env.fake.slash(env.alice, dm, "start", scenario="lantern")
    await env.done()
    await said(env, await env.fake.slash(env.alice, dm, "character set", name="Ann"))
    fake_model.queue("The lantern glows.")
    record = await env.fake.slash(env.alice, dm, "do", action="raise the lantern")
    await env.done()
    assert action_line(env, record) == "> You raise the lantern."
    system, user = (m["content"] for m in fake_model.requests[-1]["messages"])
    assert "> You raise the lantern." in user
    assert GROUP_VOICE_LINE not in system and "Write in second person" in system


async def test_a_bad_character_is_refused_privately_and_nothing_is_kept(env: DiscordEnv):
    thread = await env.start_thread()
    for name, reason in [
        ("<@1234>", "letters, digits, spaces and ' - . only"),
        ("You", "give your character a name of its own"),
        ("42", "at least one letter"),
    ]:
        record = await env.fake.slash(env.bob, thread, "character set", name=name)
        content, _ = await said(env, record)
        assert content.startswith("⚠") and reason in content, content
    await said(env, await env.fake.slash(env.alice, thread, "character set", name="Ann"))
    content, _ = await said(env, await env.fake.slash(env.bob, thread, "character set", name="ann"))
    assert "already called Ann" in content
    # Where no adventure runs there is nothing to be a character in.
    content, _ = await said(
        env, await env.fake.slash(env.bob, env.channel, "character set", name="Bram")
    )
    assert "no adventure running here" in content
    async with env.bot.services.db.session() as session:
        kept = (await session.scalars(select(Character))).all()
    assert [(c.user_id, c.name) for c in kept] == [(env.alice, "Ann")]


async def test_nobody_sets_another_players_character(env: DiscordEnv):
    thread = await env.start_thread()
    # alice hosts and manages the server; still, bob's character is bob's. The command has no
    # option for it; the engine refuses it all the same.
    host = Actor(user_id=env.alice, user_name="alice", server_id=env.guild, manages_server=True)
    characters = env.bot.services.characters
    try:
        await characters.set(host, thread, "Puppet", player_id=env.bob)
    except NotAllowed as refused:
        assert "only they can set it" in refused.message
    else:
        raise AssertionError("the host set another player's character")
    assert await characters.show(thread, env.bob) is None


async def test_character_show_yours_and_another_players(env: DiscordEnv):
    thread = await env.start_thread()
    content, _ = await said(env, await env.fake.slash(env.bob, thread, "character show"))
    assert "no character here yet" in content
    await said(
        env,
        await env.fake.slash(
            env.alice, thread, "character set", name="Ann", about="Keeps **secrets**."
        ),
    )
    _, embed = await said(
        env, await env.fake.slash(env.bob, thread, "character show", player=env.alice)
    )
    assert embed.startswith("Ann\n") and "Keeps \\*\\*secrets\\*\\*." in embed
    # Renamed without about: the description stays.
    await said(env, await env.fake.slash(env.alice, thread, "character set", name="Annika"))
    _, embed = await said(env, await env.fake.slash(env.alice, thread, "character show"))
    assert embed.startswith("Annika\n") and "secrets" in embed
    content, _ = await said(
        env, await env.fake.slash(env.alice, thread, "character show", player=env.bob)
    )
    assert "bob has no character in this adventure" in content


async def test_party_lists_the_host_the_characters_and_who_acted_last(env, fake_model):
    thread = await env.start_thread()
    _, shown = await said(env, await env.fake.slash(env.bob, thread, "party"))
    # Only the host so far, who has not acted.
    assert "👑 **alice** — no character" in shown and "bob" not in shown
    await said(
        env, await env.fake.slash(env.bob, thread, "character set", name="Bram", about="A smith.")
    )
    fake_model.queue(Reply(text="Sparks fly."), Reply(text="The forge cools."))
    await env.fake.slash(env.alice, thread, "do", action="knock")
    await env.done()
    await env.fake.slash(env.bob, thread, "do", action="hammer the blade")
    await env.done()
    _, shown = await said(env, await env.fake.slash(env.alice, thread, "party"))
    host_line, bram_line = shown.split("\n", 1)[1].split("\n\n")
    assert host_line == "👑 **alice** — no character (acts as their name) · host"
    assert bram_line == "**Bram** (bob) · acted last\nA smith."
    assert shown.startswith("The party · The Lantern Road")
