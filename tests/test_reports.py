"""Reporting a turn to the server's moderators, through the stand-in: the reports channel a
server's managers choose, 🚩 Report under a turn's Insights with its form, the report posted
there with the turn's text and a link, and its Undo for the host and moderators only; a DM, a
server without a reports channel, a second report, a flood and a forged button refused."""

from __future__ import annotations

from sqlalchemy import select
from sqlmodel import col

from bot.standin.records import InteractionRecord, MessageRecord, iter_components
from engine.play.reports import REPORTS_PER_HOUR
from engine.storage.report_models import TurnReport
from tests.discord_env import DiscordEnv

VIEW_CHANNEL = 1 << 10
EMBED_LINKS = 1 << 14


async def play_turns(env: DiscordEnv, fake_model, *texts: str) -> int:
    thread = await env.start_thread()
    for text in texts:
        fake_model.queue(text)
        record = await env.fake.slash(env.bob, thread, "do", action="look around")
        await env.done()
        assert record.failed is None
    return thread


async def set_reports(env: DiscordEnv, **options) -> InteractionRecord:
    record = await env.fake.slash(env.alice, env.channel, "server reports", **options)
    await env.done()
    assert record.failed is None
    return record


def answer(env: DiscordEnv, record: InteractionRecord) -> str:
    assert record.original_message_id is not None
    return env.fake.message(record.original_message_id).content or ""


def labels(message: MessageRecord) -> list[str | None]:
    return [label for label, _, _ in message.buttons]


async def open_report(env: DiscordEnv, user: int, thread: int) -> InteractionRecord:
    """Insights on the newest turn, then 🚩 Report under it: the form's opening press."""
    narration = [m for m in env.fake.messages(thread) if "Insights" in labels(m)][-1]
    insights = await env.fake.press(user, narration.id, label="Insights")
    await env.done()
    assert insights.original_message_id is not None
    shown = env.fake.message(insights.original_message_id)
    return await env.fake.press(user, shown.id, label="Report")


async def report(env: DiscordEnv, user: int, thread: int, reason: str = "") -> str:
    opened = await open_report(env, user, thread)
    await env.done()
    submitted = await env.fake.submit_modal(user, opened, {"reason": reason})
    await env.done()
    assert submitted.failed is None and submitted.ephemeral
    return answer(env, submitted)


async def test_a_reported_turn_reaches_the_moderators_with_its_text_and_an_undo(
    env: DiscordEnv, fake_model
):
    mods = env.fake.add_channel(env.guild, "mods")
    await env.done()
    said = answer(env, await set_reports(env, channel=mods))
    assert f"<#{mods}>" in said
    thread = await play_turns(env, fake_model, "A calm night.", "The goblin sneers at you.")

    thanks = await report(env, env.bob, thread, reason="too rude for this server")
    assert "reported to this server's moderators" in thanks

    (posted,) = [m for m in env.fake.messages(mods) if m.embeds]
    (embed,) = posted.embeds
    assert "Turn 2" in embed["title"] and "reported" in embed["title"]
    assert "The goblin sneers at you." in embed["description"]
    fields = {field["name"]: field["value"] for field in embed["fields"]}
    assert fields["Reason"] == "too rude for this server"
    assert fields["Reported by"] == f"<@{env.bob}>"
    assert "bob looks around" in fields["The action it answered"]
    # A link to the turn's message in the adventure's thread.
    narration = [m for m in env.fake.messages(thread) if "goblin" in (m.content or "")][-1]
    assert f"/channels/{env.guild}/{thread}/{narration.id}" in fields["Where"]
    assert [label for label, _, _ in posted.buttons] == ["Undo this turn"]

    # carol, a plain member who did not write the turn, may not undo it from the report (were
    # she to see the channel); the server's manager may.
    carol = env.fake.add_user("carol", member_of=[env.guild])
    await env.done()
    refused = await env.fake.press(carol, posted.id, label="Undo this turn")
    await env.done()
    assert refused.failed is None
    told = [m.content for m in env.fake.messages(mods) if m.visible_to == carol]
    assert any("host" in (text or "") for text in told), told
    assert labels(env.fake.message(posted.id)) == ["Undo this turn"]
    undone = await env.fake.press(env.alice, posted.id, label="Undo this turn")
    await env.done()
    assert undone.failed is None
    marked = env.fake.message(posted.id)
    assert not marked.buttons
    assert any(field["name"] == "Undone" for field in marked.embeds[0]["fields"])
    # The adventure's thread shows the undo, as an undo there does.
    assert any("undid turn 2 after a report" in text for text in env.narration(thread))
    state = await env.bot.services.tree.head_now(thread)
    assert "A calm night." in state.head_text


async def test_reports_in_a_dm_or_without_a_channel_are_refused_with_what_to_do(
    env: DiscordEnv, fake_model
):
    # No reports channel chosen: the player is told who can choose one, nothing is stored.
    thread = await play_turns(env, fake_model, "The well is dry.")
    said = await report(env, env.bob, thread)
    assert "/server reports" in said
    # In a DM there is nobody to report to: no Report button, a forged press is told why.
    dm = env.fake.dm_channel(env.bob)
    start = await env.fake.slash(env.bob, dm, "start")
    await env.done()
    assert start.failed is None
    fake_model.queue("You are alone.")
    await env.fake.slash(env.bob, dm, "do", action="wait")
    await env.done()
    narration = [m for m in env.fake.messages(dm) if m.buttons][-1]
    insights = await env.fake.press(env.bob, narration.id, label="Insights")
    await env.done()
    assert insights.original_message_id is not None
    shown = env.fake.message(insights.original_message_id)
    assert "Report" not in [label for label, _, _ in shown.buttons]
    async with env.bot.services.db.session() as session:
        assert (await session.scalars(select(TurnReport))).all() == []


async def test_a_turn_is_reported_once_and_a_flood_is_bounded(env: DiscordEnv, fake_model):
    mods = env.fake.add_channel(env.guild, "mods")
    await env.done()
    await set_reports(env, channel=mods)
    texts = [f"Scene {n}." for n in range(REPORTS_PER_HOUR + 1)]
    thread = await play_turns(env, fake_model, texts[0])
    assert "Thank you" in await report(env, env.bob, thread)
    assert "reported this turn already" in await report(env, env.bob, thread)
    for text in texts[1:]:
        fake_model.queue(text)
        await env.fake.slash(env.bob, thread, "do", action="go on")
        await env.done()
        said = await report(env, env.bob, thread)
    assert f"{REPORTS_PER_HOUR} reports in the last hour" in said
    async with env.bot.services.db.session() as session:
        stored = (await session.scalars(select(TurnReport))).all()
    assert len(stored) == REPORTS_PER_HOUR
    assert len([m for m in env.fake.messages(mods) if m.embeds]) == REPORTS_PER_HOUR


async def test_a_reports_channel_the_bot_cannot_post_in_is_refused_and_a_report_not_lost(
    env: DiscordEnv, fake_model
):
    mods = env.fake.add_channel(env.guild, "mods")
    env.fake.set_permissions(mods, deny=EMBED_LINKS)
    await env.done()
    said = answer(env, await set_reports(env, channel=mods))
    assert "Embed Links" in said and "Nothing was changed" in said
    # Set while it could post; the permission taken away later: the report is not kept, and
    # the player is told to send it again once the admins have mended it.
    env.fake.set_permissions(mods)
    await env.done()
    await set_reports(env, channel=mods)
    env.fake.set_permissions(mods, deny=VIEW_CHANNEL)
    await env.done()
    env.expect(50001)  # Missing Access: the post refused, as Discord refuses it
    thread = await play_turns(env, fake_model, "Dust everywhere.")
    said = await report(env, env.bob, thread)
    assert "could not post" in said and "send it again" in said
    async with env.bot.services.db.session() as session:
        assert (await session.scalars(select(TurnReport))).all() == []


async def test_a_forged_undo_of_another_servers_report_changes_nothing(env: DiscordEnv, fake_model):
    mods = env.fake.add_channel(env.guild, "mods")
    await env.done()
    await set_reports(env, channel=mods)
    thread = await play_turns(env, fake_model, "The bell tolls.")
    await report(env, env.bob, thread)
    async with env.bot.services.db.session() as session:
        (stored,) = (await session.scalars(select(TurnReport))).all()
    # The report's Undo, as a modified client in another server sends it: its manager, under
    # a button of their own adventure.
    other = env.fake.add_guild("Elsewhere")
    yard = env.fake.add_channel(other, "yard")
    mallory = env.fake.add_user("mallory", member_of=[other], manage_guild=True)
    await env.done()
    await env.fake.slash(mallory, yard, "start")
    await env.done()
    (their_thread,) = env.fake.threads(yard)
    opening = env.fake.last_message(their_thread)
    button = next(c for c in iter_components(opening.components) if c.get("type") == 2)
    button["custom_id"] = f"cf:reportundo:{stored.id}"
    press = await env.fake.press(mallory, opening.id, custom_id=button["custom_id"])
    await env.done()
    assert press.failed is None
    refusals = [m.content for m in env.fake.messages(their_thread) if m.visible_to == mallory]
    assert any("not one of this server's" in (text or "") for text in refusals)
    state = await env.bot.services.tree.head_now(thread)
    assert "The bell tolls." in state.head_text
    async with env.bot.services.db.session() as session:
        row = await session.scalar(select(TurnReport).where(col(TurnReport.id) == stored.id))
        assert row is not None and row.undone_by is None
