"""Insights: the engine's lookup of one turn (by number or node id, heavy columns for that node
only), the embed's rendering within Discord's limits, and /insights and the 🔍 button through
the local Discord stand-in."""

from __future__ import annotations

import json
import zlib
from datetime import UTC, datetime

import pytest
from sqlalchemy import event, select, update
from sqlalchemy.orm import undefer

from engine.errors import InvalidInput, NotFound
from engine.library.scenarios.start import start_adventure
from engine.prompt.report import ContextReport, ItemReport, SectionReport
from engine.storage.database import Database
from engine.storage.models import ActionType, Adventure, Role, Scenario, StoryNode
from engine.turns.insights import Insights, TurnInsights, render_prompt, script_logs
from tests.discord_env import DiscordEnv

#: The buttons that open a form for an action, last under every newest turn.
ACT = ["Do", "Say", "Story"]

CHANNEL = 4242
HEAVY = ("prompt_snapshot", "context_report", "state_report", "reasoning", "state_before")


def sample_report(items: int = 3) -> ContextReport:
    cards = [
        ItemReport("Mira", 42, True, "trigger: Mira"),
        ItemReport("The Lantern", 30, True, "always on"),
        ItemReport("Old Mill", 120, False, "over the 40% card budget"),
    ]
    cards += [
        ItemReport(f"Card number {n} with a long descriptive title", 10 + n, n % 2 == 0, f"why {n}")
        for n in range(max(items - 3, 0))
    ]
    return ContextReport(
        budget=4096,
        reserved=512,
        available=3584,
        used=1400,
        output_words=170,
        sections=[
            SectionReport("narrator", "Narrator", 80, "always included"),
            SectionReport("plot_essentials", "Plot essentials", 120, "always included"),
            SectionReport("story_cards", "Story cards", 72, "2 cards triggered", cards),
            SectionReport(
                "memories",
                "Memories",
                60,
                "2 retrieved",
                [ItemReport("the bridge burned", 30, True, "pinned")]
                + [ItemReport("a heron", 30, True, "score 0.82")],
            ),
            SectionReport("history", "History", 1068, "12 of 40 turns", truncated=True),
        ],
    )


def snapshot(*messages: tuple[str, str]) -> bytes:
    return zlib.compress(json.dumps([{"role": r, "content": c} for r, c in messages]).encode())


async def build_story(db: Database, turns: int = 2) -> tuple[int, int, list[int]]:
    """An adventure in CHANNEL with ``turns`` player+narrator pairs; returns the adventure id,
    the opening's node id and the narrator node ids, oldest first."""
    async with db.session() as session, session.begin():
        scenario_id = await session.scalar(
            select(Scenario.id).where(Scenario.builtin_key == "lantern-road")
        )
        adventure = await start_adventure(session, scenario_id, channel_id=CHANNEL)
        opening = adventure.head_node_id
        parent = await session.get(StoryNode, opening)
        narrators = []
        for n in range(1, turns + 1):
            player = StoryNode(
                adventure_id=adventure.id,
                parent_id=parent.id,
                index=parent.index + 1,
                role=Role.PLAYER,
                action=ActionType.DO,
                text=f"> You try thing {n}.",
            )
            session.add(player)
            await session.flush()
            narrator = StoryNode(
                adventure_id=adventure.id,
                parent_id=player.id,
                index=player.index + 1,
                role=Role.NARRATOR,
                action=ActionType.CONTINUE,
                text=f"Reply {n}.",
                model="fake-model",
                prompt_tokens=1400 + n,
                completion_tokens=90 + n,
                latency_ms=1234,
                reasoning="thinking hard",
                prompt_snapshot=snapshot(
                    ("system", "You are the narrator."), ("user", f"> You try thing {n}.")
                ),
                context_report=sample_report().to_json() if n > 1 else None,
                state_report={"applied": {"hp": 55}, "script_logs": ["hello from onOutput"]}
                if n > 1
                else None,
            )
            session.add(narrator)
            await session.flush()
            narrators.append(narrator.id)
            parent = narrator
        adventure.head_node_id = parent.id
        return adventure.id, opening, narrators


# --- engine ------------------------------------------------------------------------------------


async def test_the_newest_turn_is_the_default_and_numbers_count_narrator_replies(db: Database):
    _, _, narrators = await build_story(db, turns=2)
    newest = await Insights(db).for_turn(CHANNEL)
    assert (newest.number, newest.node_id) == (2, narrators[1])
    assert newest.model == "fake-model" and newest.latency_ms == 1234
    assert (newest.prompt_tokens, newest.completion_tokens) == (1402, 92)
    assert newest.report == sample_report()
    assert newest.state_report["applied"] == {"hp": 55}
    assert newest.script_logs == ["hello from onOutput"]
    assert newest.prompt_text == (
        "=== system ===\nYou are the narrator.\n\n=== user ===\n> You try thing 2.\n"
    )

    first = await Insights(db).for_turn(CHANNEL, turn=1)
    assert (first.number, first.node_id) == (1, narrators[0])
    assert first.report is None and first.state_report is None and first.script_logs == []
    assert "thing 1" in first.prompt_text


async def test_a_turn_is_found_by_node_id_with_its_number(db: Database):
    _, _, narrators = await build_story(db, turns=3)
    found = await Insights(db).for_turn(CHANNEL, node_id=narrators[1])
    assert (found.number, found.node_id) == (2, narrators[1])
    assert found.report == sample_report()


async def test_a_turn_off_the_current_line_keeps_its_own_number(db: Database):
    adventure_id, _, narrators = await build_story(db, turns=3)
    # Undo twice: the head moves back to turn 1; turn 3 is still reachable by its button.
    async with db.session() as session, session.begin():
        await session.execute(
            update(Adventure).where(Adventure.id == adventure_id).values(head_node_id=narrators[0])
        )
    assert (await Insights(db).for_turn(CHANNEL, node_id=narrators[2])).number == 3
    with pytest.raises(InvalidInput):
        await Insights(db).for_turn(CHANNEL, turn=2)


@pytest.mark.parametrize("turn", [0, 3, 9, -1])
async def test_a_turn_out_of_range_is_a_clear_error(db: Database, turn: int):
    await build_story(db, turns=2)
    with pytest.raises(InvalidInput) as raised:
        await Insights(db).for_turn(CHANNEL, turn=turn)
    assert f"no turn {turn}" in raised.value.message
    assert "2 AI turns" in raised.value.message and "1 to 2" in raised.value.message


async def test_nothing_to_show_is_said_plainly(db: Database):
    with pytest.raises(NotFound, match="no adventure running"):
        await Insights(db).for_turn(CHANNEL)
    _, opening, narrators = await build_story(db, turns=0)
    with pytest.raises(NotFound, match="not replied yet"):
        await Insights(db).for_turn(CHANNEL)
    with pytest.raises(NotFound, match="narrator's replies"):
        await Insights(db).for_turn(CHANNEL, node_id=opening)
    with pytest.raises(NotFound):
        await Insights(db).for_turn(CHANNEL, node_id=999_999)


async def test_a_node_of_another_channel_is_not_shown(db: Database):
    _, _, narrators = await build_story(db, turns=1)
    with pytest.raises(NotFound):
        await Insights(db).for_turn(CHANNEL + 1, node_id=narrators[0])


async def test_heavy_columns_are_loaded_for_that_one_node_only(db: Database):
    _, _, narrators = await build_story(db, turns=3)
    statements: list[tuple[str, object]] = []

    def listener(conn, cursor, statement, parameters, context, executemany):
        statements.append((statement, parameters))

    event.listen(db.engine.sync_engine, "before_cursor_execute", listener)
    try:
        found = await Insights(db).for_turn(CHANNEL, turn=2)
    finally:
        event.remove(db.engine.sync_engine, "before_cursor_execute", listener)
    assert found.node_id == narrators[1]
    heavy = [(s, p) for s, p in statements if any(c in s for c in HEAVY)]
    assert len(heavy) == 1, heavy
    statement, parameters = heavy[0]
    # One row, by primary key, and only the columns Insights reads.
    assert "WHERE story_nodes.id = " in statement
    assert list(parameters if isinstance(parameters, tuple | list) else parameters.values()) == [
        narrators[1]
    ]
    # Of the reasoning trace, only whether there is one (its length), never the text.
    assert "reasoning" not in statement.replace("length(story_nodes.reasoning)", "")
    assert "state_before" not in statement
    # Walking the line named no heavy column and no story text.
    for statement, _ in statements:
        if statement is not heavy[0][0]:
            assert "story_nodes.text" not in statement


def test_the_prompt_is_rendered_per_message():
    assert render_prompt(None) == ""
    assert render_prompt(snapshot(("system", "S"), ("user", "U\n"))) == (
        "=== system ===\nS\n\n=== user ===\nU\n"
    )
    assert "could not be read" in render_prompt(b"not zlib")


def test_script_logs_come_from_the_state_report():
    assert script_logs(None) == []
    assert script_logs({"applied": {}}) == []
    report = {
        "script_logs": ["one", {"script": "Inventory", "message": "two"}],
        "script_errors": ["boom"],
    }
    assert script_logs(report) == ["one", "Inventory: two", "error: boom"]


# --- rendering ---------------------------------------------------------------------------------


def insights_for(report: ContextReport | None, **kw) -> TurnInsights:
    values = dict(
        number=3,
        node_id=77,
        adventure_id=1,
        model="fake-model",
        latency_ms=2345,
        prompt_tokens=1400,
        completion_tokens=95,
        created_at=datetime(2025, 1, 1, tzinfo=UTC),
        report=report,
        state_report=None,
        prompt_text="=== system ===\nS\n",
    )
    values.update(kw)
    return TurnInsights(**values)


def assert_within_limits(embed_dict: dict) -> None:
    assert len(embed_dict.get("title", "")) <= 256
    assert len(embed_dict.get("description", "")) <= 4096
    assert len(embed_dict.get("fields", [])) <= 25
    for f in embed_dict.get("fields", []):
        assert len(f["name"]) <= 256 and 0 < len(f["value"]) <= 1024
    assert len(embed_dict.get("footer", {}).get("text", "")) <= 2048
    total = len(embed_dict.get("title", "")) + len(embed_dict.get("description", ""))
    total += len(embed_dict.get("footer", {}).get("text", ""))
    total += sum(len(f["name"]) + len(f["value"]) for f in embed_dict.get("fields", []))
    assert total <= 6000


def test_the_embed_shows_sections_bars_reasons_and_usage():
    from cogs.ui.insights import bar, insights_embed

    embed, cut = insights_embed(
        insights_for(
            sample_report(),
            state_report={"applied": {"hp": 55}, "logs": ["hi"]},
            script_logs=["hi"],
        )
    )
    data = embed.to_dict()
    assert_within_limits(data)
    assert not cut
    description = data["description"]
    for title in ("Narrator", "Plot essentials", "Story cards", "Memories", "History"):
        assert title in description
    assert (
        bar(1068, 1400) in description
        and bar(1400, 3584) in description
        and "12 of 40 turns" in description
    )
    assert "1,400 of 3,584 tokens" in description and "170 words" in description
    fields = {f["name"]: f["value"] for f in data["fields"]}
    assert "trigger: Mira" in fields["Why included"] and "pinned" in fields["Why included"]
    assert "score 0.82" in fields["Why included"] and "always on" in fields["Why included"]
    assert "Old Mill" in fields["Left out"] and "40% card budget" in fields["Left out"]
    assert "hp → 55" in fields["World state"] and "logs" not in fields["World state"]
    assert "hi" in fields["Script logs"]
    assert data["footer"]["text"].startswith("fake-model · 2.3 s · 1,400 prompt + 95 reply")


def test_the_prompt_tokens_read_before_are_shown_where_they_were_kept():
    """A hosted provider's prompt cache, or the embedded model's reuse of the last turn."""
    from cogs.ui.insights import insights_embed, report_text

    report = sample_report()
    report.cached_tokens = 1200
    embed, _ = insights_embed(insights_for(report))
    data = embed.to_dict()
    line = "1,200 of 1,400 prompt tokens cached by the provider (86%)"
    assert line in data["description"]
    assert data["footer"]["text"].startswith("fake-model · 2.3 s · 1,400 prompt (1,200 cached)")
    assert line in report_text(insights_for(report))
    embedded, _ = insights_embed(insights_for(report, model="SmolLM2.gguf (embedded)"))
    assert "1,200 of 1,400 prompt tokens reused from the last turn" in embedded.description
    # A model that did not say: nothing claimed.
    report.cached_tokens = None
    silent, _ = insights_embed(insights_for(report))
    assert "read before" not in (silent.description or "")
    assert "cached" not in (silent.footer.text or "")


def test_bars_are_proportional():
    from cogs.ui.insights import bar

    assert bar(50, 100) == "█████░░░░░"
    assert bar(0, 100) == "░░░░░░░░░░"
    assert bar(1, 1000) == "▏░░░░░░░░░"
    assert bar(500, 100) == "██████████"


def test_a_turn_without_a_report_says_so():
    from cogs.ui.insights import insights_embed, insights_files

    embed, cut = insights_embed(insights_for(None))
    assert "No context report for this turn" in embed.description
    assert "Left out" not in [f.name for f in embed.fields]
    files = insights_files(insights_for(None), full_report=cut)
    assert [f.filename for f in files] == ["turn-3-prompt.txt"]
    embed, _ = insights_embed(insights_for(None, prompt_text=""))
    assert any("No prompt was stored" in f.value for f in embed.fields)
    assert insights_files(insights_for(None, prompt_text=""), full_report=False) == []


def test_a_huge_report_is_cut_to_discords_limits_and_attached_whole():
    from cogs.ui.insights import insights_embed, insights_files

    report = sample_report(items=200)
    report.sections += [
        SectionReport(f"extra{n}", f"Extra section {n}", n, "because " * 10) for n in range(150)
    ]
    insights = insights_for(
        report,
        state_report={f"stat{n}": n for n in range(300)},
        script_logs=[f"log line {n} " * 5 for n in range(300)],
    )
    embed, cut = insights_embed(insights)
    data = embed.to_dict()
    assert_within_limits(data)
    assert cut
    assert "more sections" in data["description"]
    assert all("…and" in f["value"] for f in data["fields"])
    files = insights_files(insights, full_report=cut)
    assert [f.filename for f in files] == ["turn-3-prompt.txt", "turn-3-context.txt"]
    whole = files[1].fp.read().decode()
    assert "Card number 196 with a long descriptive title" in whole
    assert "Extra section 149" in whole


# --- through Discord ---------------------------------------------------------------------------


async def play_one_turn(env: DiscordEnv, fake_model) -> int:
    record = await env.fake.slash(env.alice, env.channel, "start")
    await env.done()
    assert record.failed is None
    (thread,) = env.fake.threads(env.channel)
    fake_model.queue("The lantern catches, and the reeds go still.")
    await env.fake.slash(env.alice, thread, "do", action="light the lantern")
    await env.done()
    return thread


async def stored_report(env: DiscordEnv, thread: int, report: ContextReport | None = None):
    """The newest turn's context report; a hand-built one is stored when the turn has none
    (or when ``report`` is given)."""
    ref = await env.bot.services.play.adventure_in(thread)
    db = env.bot.services.db
    async with db.session() as session, session.begin():
        adventure = await session.get(Adventure, ref.adventure_id)
        node = await session.get(
            StoryNode, adventure.head_node_id, options=[undefer(StoryNode.context_report)]
        )
        if report is not None or node.context_report is None:
            report = report or sample_report()
            node.context_report = report.to_json()
            return report
        return ContextReport.from_json(node.context_report)


def assert_insights_message(env: DiscordEnv, message_id: int, report: ContextReport) -> None:
    message = env.fake.message(message_id)
    assert message.ephemeral
    (embed,) = message.embeds
    assert_within_limits(embed)
    assert embed["title"] == "🔍 Insights · turn 1"
    for section in report.sections[:5]:
        assert section.title[:15] in embed["description"]
    prompt = next(a for a in message.attachments if a.filename == "turn-1-prompt.txt")
    text = prompt.content.decode()
    assert "=== system ===" in text and "=== user ===" in text
    assert "> alice lights the lantern." in text


async def test_slash_insights_answers_privately_with_the_sections_and_the_prompt(
    env: DiscordEnv, fake_model
):
    thread = await play_one_turn(env, fake_model)
    report = await stored_report(env, thread)
    record = await env.fake.slash(env.bob, thread, "insights")
    await env.done()
    assert record.failed is None and record.ephemeral
    assert_insights_message(env, record.original_message_id, report)
    # The same by number.
    record = await env.fake.slash(env.bob, thread, "insights", turn=1)
    await env.done()
    assert_insights_message(env, record.original_message_id, report)


async def test_the_providers_cached_tokens_are_stored_with_the_turn_and_shown(
    env: DiscordEnv, fake_model
):
    from tests.fakes.openai_server import Reply

    record = await env.fake.slash(env.alice, env.channel, "start")
    await env.done()
    assert record.failed is None
    (thread,) = env.fake.threads(env.channel)
    fake_model.queue(Reply(text="The lantern catches.", prompt_tokens=400, cached_tokens=352))
    await env.fake.slash(env.alice, thread, "do", action="light the lantern")
    await env.done()
    report = await stored_report(env, thread)
    assert report.cached_tokens == 352
    record = await env.fake.slash(env.bob, thread, "insights")
    await env.done()
    (embed,) = env.fake.message(record.original_message_id).embeds
    assert "352 of 400 prompt tokens cached by the provider (88%)" in embed["description"]
    assert "400 prompt (352 cached)" in embed["footer"]["text"]


async def test_the_insights_button_under_a_turn_gives_the_same(env: DiscordEnv, fake_model):
    thread = await play_one_turn(env, fake_model)
    report = await stored_report(env, thread)
    narration = env.fake.last_message(thread)
    assert [label for label, _, _ in narration.buttons] == [
        "Continue",
        "Retry",
        "Undo",
        "Insights",
        *ACT,
    ]
    (custom_id,) = [c for label, c, _ in narration.buttons if label == "Insights"]
    assert custom_id.startswith("cf:insights:")
    press = await env.fake.press(env.bob, narration.id, label="Insights")
    await env.done()
    assert press.failed is None and press.ephemeral
    assert_insights_message(env, press.original_message_id, report)
    # The story did not move: pressing Insights is not a turn.
    assert env.narration(thread)[-1] == "The lantern catches, and the reeds go still."


async def test_a_turn_that_does_not_exist_is_a_private_error(env: DiscordEnv, fake_model):
    thread = await play_one_turn(env, fake_model)
    record = await env.fake.slash(env.alice, thread, "insights", turn=9)
    await env.done()
    assert record.failed is None and record.ephemeral
    message = env.fake.message(record.original_message_id)
    assert message.ephemeral and not message.embeds and not message.attachments
    assert "no turn 9" in message.content and "1 AI turn" in message.content


async def test_insights_where_nothing_runs_is_a_private_error(env: DiscordEnv):
    record = await env.fake.slash(env.alice, env.channel, "insights")
    await env.done()
    assert record.ephemeral
    assert "no adventure running" in env.fake.message(record.original_message_id).content


async def test_a_report_with_200_items_fits_discords_limits(env: DiscordEnv, fake_model):
    thread = await play_one_turn(env, fake_model)
    report = await stored_report(env, thread, sample_report(items=200))
    record = await env.fake.slash(env.alice, thread, "insights")
    await env.done()
    assert record.failed is None
    message = env.fake.message(record.original_message_id)
    (embed,) = message.embeds
    assert_within_limits(embed)
    fields = {f["name"]: f["value"] for f in embed["fields"]}
    assert "more" in fields["Why included"] and "more" in fields["Left out"]
    names = sorted(a.filename for a in message.attachments)
    assert names == ["turn-1-context.txt", "turn-1-prompt.txt"]
    whole = next(a for a in message.attachments if a.filename == "turn-1-context.txt")
    assert len(report.excluded) > 90
    assert all(item.label in whole.content.decode() for item in report.excluded)
