"""/card import through the Discord stand-in: a story-card file merged into the running adventure
or a library scenario, as AI Dungeon imports story cards into adventures and scenarios
(help.aidungeon.com/story-cards-import-and-export), with the preview first; the files of other
tools it reads, real published ones among them (``tests/data/corpus``); who may; whole
adventures and scenarios sent to their own commands; and hostile files."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import select
from sqlmodel import col

from bot.standin import StandinFile
from engine.library.formats.draft import ImportedCard
from engine.play.card_imports import plan_merge
from engine.storage.models import AdventureCard, Scenario, ScenarioCard
from tests.discord_env import DiscordEnv, campfire_on_standin
from tests.fakes.openai_server import FakeModelServer
from tests.test_adventure_rights import answer, export_file, running_in

DATA = Path(__file__).parent / "data"
CORPUS = DATA / "corpus"
#: The starter scenario's cards, which every adventure in these tests starts with.
STARTER_CARDS = ["Old Wenna", "The Fallen Milestone", "Marsh-lights"]


def card_file(cards: list[dict], name: str = "cards.json") -> StandinFile:
    """An AI Dungeon story-card export, as its Export button writes one."""
    return StandinFile(name, json.dumps(cards).encode(), "application/json")


def story_card(title: str, keys: str, value: str, type_: str = "character") -> dict:
    return {
        "keys": keys,
        "value": value,
        "type": type_,
        "title": title,
        "description": "",
        "useForCharacterCreation": False,
    }


def from_disk(path: Path) -> StandinFile:
    return StandinFile(path.name, path.read_bytes(), "application/json")


async def imported(env: DiscordEnv, user: int, place: int, file: StandinFile, **options: str):
    """``/card import`` played to its end: the message that answered it."""
    record = await env.fake.slash(user, place, "card import", file=file, **options)
    await env.done()
    return answer(env, record)


def fields_of(message) -> dict[str, str]:
    return {field["name"]: field["value"] for field in message.embeds[0]["fields"]}


async def press(env: DiscordEnv, user: int, message, label: str):
    pressed = await env.fake.press(user, message.id, label=label)
    await env.done()
    assert pressed.failed is None
    return env.fake.message(message.id)


async def adventure_cards(env: DiscordEnv, place: int) -> list[AdventureCard]:
    adventure_id = await running_in(env, place)
    async with env.bot.services.db.session() as session:
        rows = await session.scalars(
            select(AdventureCard)
            .where(col(AdventureCard.adventure_id) == adventure_id)
            .order_by(col(AdventureCard.position), col(AdventureCard.id))
        )
        return list(rows)


async def scenario_cards(env: DiscordEnv, title: str) -> list[ScenarioCard]:
    async with env.bot.services.db.session() as session:
        scenario = await session.scalar(select(Scenario).where(col(Scenario.title) == title))
        assert scenario is not None
        rows = await session.scalars(
            select(ScenarioCard)
            .where(col(ScenarioCard.scenario_id) == scenario.id)
            .order_by(col(ScenarioCard.position), col(ScenarioCard.id))
        )
        return list(rows)


async def test_cards_merge_into_the_running_adventure_after_a_preview(
    env: DiscordEnv, fake_model: FakeModelServer
):
    thread = await env.start_thread(env.alice)
    file = card_file(
        [
            # The same title as a card there (whatever its case): it replaces that card.
            story_card("old wenna", "Wenna, innkeeper", "Wenna keeps a crossbow under the bar."),
            # The same keys as a card there, under another title: it replaces that card too.
            story_card(
                "Will-o'-wisps",
                "wisp, marsh-light, will-o'-the-wisp, marsh-lights",
                "They lead travellers off the causeway.",
                "custom",
            ),
            story_card("Brother Tomas", "Tomas, monk", "A monk who counts the lanterns."),
        ]
    )
    preview = await imported(env, env.alice, thread, file)
    assert preview.visible_to == env.alice
    fields = fields_of(preview)
    assert fields["Format"] == "AI Dungeon story cards"
    assert (fields["In the file"], fields["New"], fields["Replacing"]) == ("3", "1", "2")
    assert fields["Replaced (same title or keys)"] == "“Old Wenna”, “Marsh-lights”"
    assert [label for label, _, _ in preview.buttons] == ["Import 3 story cards", "Cancel"]
    # Nothing is written before Import.
    assert [c.title for c in await adventure_cards(env, thread)] == STARTER_CARDS

    done = await press(env, env.alice, preview, "Import 3 story cards")
    assert done.content == (
        "✅ The adventure here, **The Lantern Road**: 1 story card added, 2 story cards "
        "replaced; they apply from the next turn."
    )
    assert done.embeds == [] and done.components == []
    cards = await adventure_cards(env, thread)
    assert [c.title for c in cards] == [
        "old wenna",
        "The Fallen Milestone",
        "Will-o'-wisps",
        "Brother Tomas",
    ]
    wenna, _, wisps, tomas = cards
    assert wenna.entry == "Wenna keeps a crossbow under the bar." and wenna.type == "character"
    assert wisps.entry == "They lead travellers off the causeway."
    # A new card goes after the others, as /card add puts it.
    assert tomas.position == max(c.position for c in cards[:3]) + 1
    assert tomas.keys == "Tomas, monk"  # as AI Dungeon wrote them

    # The new card is the adventure's as one added by hand is: it comes into the context when
    # its keys come up in the story.
    fake_model.queue("Brother Tomas nods.")
    await env.fake.slash(env.alice, thread, "do", action="greet Tomas the monk")
    await env.done()
    prompt = json.dumps(fake_model.requests[-1]["messages"])
    assert "A monk who counts the lanterns." in prompt
    assert "Wenna keeps a crossbow" not in prompt  # her keys did not come up

    # Undo takes the turn back, not the cards, as it leaves a card added by hand; the turn
    # played again reads them.
    undone = await env.fake.slash(env.alice, thread, "undo")
    await env.done()
    assert undone.original_message_id is not None
    assert "undid" in env.fake.message(undone.original_message_id).content
    assert [c.title for c in await adventure_cards(env, thread)] == [c.title for c in cards]
    fake_model.queue("Brother Tomas bows.")
    await env.fake.slash(env.alice, thread, "do", action="greet Tomas again")
    await env.done()
    assert "A monk who counts the lanterns." in json.dumps(fake_model.requests[-1]["messages"])


async def test_cancel_saves_nothing_and_a_stale_preview_writes_nothing(env: DiscordEnv):
    thread = await env.start_thread(env.alice)
    file = card_file([story_card("Brother Tomas", "Tomas", "A monk.")])
    preview = await imported(env, env.alice, thread, file)
    assert (await press(env, env.alice, preview, "Cancel")).content == (
        "Import cancelled; nothing was saved."
    )
    assert [c.title for c in await adventure_cards(env, thread)] == STARTER_CARDS

    # Between the preview and Import, a card of the same title is added by hand: the file's
    # card would now replace it rather than join, which is not what the preview said.
    preview = await imported(env, env.alice, thread, file)
    form = await env.fake.slash(env.alice, thread, "card add")
    await env.done()
    await env.fake.submit_modal(env.alice, form, {"title": "Brother Tomas", "keys": "monk"})
    await env.done()
    stale = await press(env, env.alice, preview, "Import 1 story card")
    assert stale.content.startswith(
        "⚠ The story cards of “The Lantern Road” changed since the preview"
    )
    tomas = [c for c in await adventure_cards(env, thread) if c.title == "Brother Tomas"]
    assert [c.keys for c in tomas] == ["monk"]


async def test_published_story_cards_and_lorebooks_import_whole(env: DiscordEnv):
    thread = await env.start_thread(env.alice)
    # AI Dungeon: the 500 cards of Hashtag DnD's published story-card export.
    path = CORPUS / "storycards" / "hashtag-dnd" / "story-cards.json"
    published = json.loads(path.read_text())
    preview = await imported(env, env.alice, thread, from_disk(path))
    fields = fields_of(preview)
    assert fields["Format"] == "AI Dungeon story cards"
    assert (fields["In the file"], fields["New"], fields["Replacing"]) == ("500", "500", "0")
    await press(env, env.alice, preview, "Import 500 story cards")
    cards = await adventure_cards(env, thread)
    assert len(cards) == 503
    assert [c.title for c in cards[3:6]] == [c["title"] for c in published[:3]]

    # SillyTavern: the world info it ships with its default character.
    path = CORPUS / "lorebooks" / "sillytavern-eldoria.json"
    preview = await imported(env, env.alice, thread, from_disk(path))
    assert fields_of(preview)["Format"] == "SillyTavern world info"
    entries = json.loads(path.read_text())["entries"]
    count = len(entries)
    await press(env, env.alice, preview, f"Import {count} story card{'s' if count != 1 else ''}")
    assert len(await adventure_cards(env, thread)) == 503 + count
    # The same file again replaces what it brought, adding nothing.
    preview = await imported(env, env.alice, thread, from_disk(path))
    assert (fields_of(preview)["New"], fields_of(preview)["Replacing"]) == ("0", str(count))


async def test_cards_merge_into_a_library_scenario_its_editors_may_change(env: DiscordEnv):
    scenario = await imported(
        env, env.alice, env.channel, from_disk(DATA / "aid-new-scenario.json"), scenario=""
    )
    # No scenario named: the cards would go to the adventure here, and none runs here.
    assert "There is no adventure running here" in scenario.content
    assert "name it with `scenario:`" in scenario.content
    record = await env.fake.slash(
        env.alice, env.channel, "scenario import", file=from_disk(DATA / "aid-new-scenario.json")
    )
    await env.done()
    await press(env, env.alice, answer(env, record), "Confirm")
    before = [c.title for c in await scenario_cards(env, "The Clockwork City")]

    novelai = CORPUS / "lorebooks" / "novelai-grahamwaters" / "ripple.lorebook"
    refused = await imported(env, env.bob, env.channel, from_disk(novelai), scenario="Clockwork")
    assert refused.content.startswith("⚠ Only members with the Manage Server permission")
    assert "change this server's scenarios" in refused.content
    shipped = await imported(env, env.alice, env.channel, from_disk(novelai), scenario="Lantern")
    assert "ships with Campfire and cannot be changed" in shipped.content

    preview = await imported(env, env.alice, env.channel, from_disk(novelai), scenario="Clockwork")
    fields = fields_of(preview)
    assert fields["Format"] == "NovelAI lorebook"
    assert "the scenario **The Clockwork City**" in preview.embeds[0]["description"]
    new = int(fields["New"])
    assert new >= 1 and fields["Replacing"] == "0"
    label = f"Import {new} story card{'s' if new != 1 else ''}"
    done = await press(env, env.alice, preview, label)
    assert "adventures started from it from now on have them" in done.content
    after = [c.title for c in await scenario_cards(env, "The Clockwork City")]
    assert after[: len(before)] == before and len(after) == len(before) + new


async def test_whole_adventures_and_scenarios_go_to_their_own_commands(env: DiscordEnv):
    thread = await env.start_thread(env.alice)
    # AI-DnD's published scenarios carry story cards, but they are whole scenarios.
    scenario = await imported(
        env, env.alice, thread, from_disk(DATA / "01-sunken-crypt-of-vharos.json")
    )
    assert scenario.content.startswith(
        "⚠ This file is a whole scenario (AI-DnD scenario), not story cards: `/scenario import`"
    )
    adventure = await imported(env, env.alice, thread, await export_file(env, env.alice, thread))
    assert "whole adventure, not story cards: `/adventure import`" in adventure.content
    assert [c.title for c in await adventure_cards(env, thread)] == STARTER_CARDS


async def test_a_scenario_import_of_story_cards_points_to_card_import(env: DiscordEnv):
    file = from_disk(DATA / "aid-story-cards.json")
    record = await env.fake.slash(env.alice, env.channel, "scenario import", file=file)
    await env.done()
    fields = fields_of(answer(env, record))
    assert "`/card import`" in fields["Story cards only"]
    record = await env.fake.slash(
        env.alice, env.channel, "scenario import", file=from_disk(DATA / "aid-new-scenario.json")
    )
    await env.done()
    assert "Story cards only" not in fields_of(answer(env, record))


async def test_only_those_who_steer_the_adventure_import_cards_into_it(env: DiscordEnv):
    thread = await env.start_thread(env.alice)
    refused = await imported(env, env.bob, thread, card_file([story_card("X", "x", "y")]))
    assert refused.content.startswith("⚠ Only alice (this adventure's host)")
    assert [c.title for c in await adventure_cards(env, thread)] == STARTER_CARDS


async def test_banned_words_are_masked_as_imports_mask_them(env: DiscordEnv):
    thread = await env.start_thread(env.alice)
    await env.fake.slash(env.alice, env.channel, "server banned", words="gore")
    await env.done()
    file = card_file([story_card("Butcher", "butcher", "His apron is red with gore.")])
    preview = await imported(env, env.alice, thread, file)
    assert "1 story card had words banned here masked." in fields_of(preview)["Warnings"]
    await press(env, env.alice, preview, "Import 1 story card")
    butcher = (await adventure_cards(env, thread))[-1]
    assert butcher.title == "Butcher" and "gore" not in butcher.entry


async def test_hostile_files_are_held_to_the_caps(tmp_path, fake_model, caplog, database_url):
    async with campfire_on_standin(
        tmp_path, fake_model, caplog, database_url, max_story_cards=10, imports_per_day=3
    ) as env:
        thread = await env.start_thread(env.alice)
        # Too many cards: the adventure keeps as many as it may hold, the first ones first.
        many = card_file([story_card(f"Goblin {n}", f"goblin{n}", "Small.") for n in range(50)])
        preview = await imported(env, env.alice, thread, many)
        fields = fields_of(preview)
        assert (fields["In the file"], fields["New"]) == ("50", "7")
        assert fields["Left out (3)"].startswith(
            "This adventure holds 3 story cards of the 10 it may (this bot's setting). The "
            "first new cards fit; from “Goblin 7”, “Goblin 8”, “Goblin 9” on"
        )
        assert "the last 40, from “Goblin 10” on, are left out" in fields["Warnings"]
        await press(env, env.alice, preview, "Import 7 story cards")
        assert len(await adventure_cards(env, thread)) == 10
        # Full: a file of new cards has nothing to bring.
        full = await imported(env, env.alice, thread, card_file([story_card("Ogre", "ogre", "")]))
        assert full.content.startswith("⚠ Nothing of the file would be imported: This adventure")

        # Keys past a card's cap refuse the whole file, naming the card.
        huge = card_file([story_card("Hydra", ",".join(["head"] * 400), "Many heads.")])
        refused = await imported(env, env.alice, thread, huge)
        assert refused.content == (
            "⚠ The file: story card 1 (“Hydra”): its keys together has 1,999 characters; at "
            "most 500 are allowed."
        )
        # The day's imports are counted, refused files too: a fourth is one too many.
        limited = await imported(env, env.alice, thread, card_file([story_card("A", "a", "")]))
        assert "You can import 3 files a day." in limited.content and "<t:" in limited.content
        assert len(await adventure_cards(env, thread)) == 10


async def test_the_cards_one_host_may_hold_bound_an_import(
    tmp_path, fake_model, caplog, database_url
):
    async with campfire_on_standin(
        tmp_path, fake_model, caplog, database_url, cards_per_user=5
    ) as env:
        thread = await env.start_thread(env.alice)
        file = card_file([story_card(f"Imp {n}", f"imp{n}", "Tiny.") for n in range(4)])
        preview = await imported(env, env.alice, thread, file)
        fields = fields_of(preview)
        assert (fields["New"], fields["Left out (2)"].split(" The first")[0]) == (
            "2",
            "The adventures its host runs hold 3 story cards of the 5 one player's may.",
        )
        await press(env, env.alice, preview, "Import 2 story cards")
        assert [c.title for c in await adventure_cards(env, thread)][3:] == ["Imp 0", "Imp 1"]


def test_a_card_there_is_replaced_once_by_title_first_then_by_keys():
    there = [(1, "Wenna", "wenna, innkeeper"), (2, "The  Inn", "inn"), (3, "Ferry", "boat")]
    cards = [
        ImportedCard(title="Innkeeper", keys="Innkeeper, WENNA"),  # Wenna's keys, any order
        ImportedCard(title="wenna", keys="other"),  # Wenna's title: taken by title first
        ImportedCard(title="the inn", keys="inn"),  # a title as players read it
        ImportedCard(title="Ferryman", keys="boat"),  # Ferry's keys
        ImportedCard(title="Raft", keys="boat"),  # Ferry's keys again: Ferry is taken
        ImportedCard(title="Dock", keys=""),
    ]
    merge = plan_merge(cards, there, room=1, why="Full.")
    assert merge.targets == (None, 1, 2, 3, None, None)
    assert merge.replaced_titles == ("Wenna", "The  Inn", "Ferry")
    assert (merge.new, merge.kept, merge.left_out, merge.writes) == (3, 1, 2, 4)
    assert merge.why_left_out == "Full."
    assert plan_merge(cards[:1], [], room=5, why="Full.").why_left_out == ""
