"""Steering through Discord: /note, /essentials, /instructions, /card … and /adventure settings
on the local stand-in. Every answer is ephemeral; forms come back prefilled."""

from __future__ import annotations

from sqlalchemy import select

from bot.standin.records import InteractionRecord, iter_components
from engine.people.access.rules import Actor
from engine.storage.models import Adventure, AdventureCard
from engine.story.steering.cards import CardDraft
from tests.discord_env import DiscordEnv, answered, campfire_on_standin


async def adventure_here(env: DiscordEnv, channel_id: int) -> Adventure:
    ref = await env.bot.services.play.adventure_in(channel_id)
    async with env.bot.services.db.session() as session:
        return await session.get(Adventure, ref.adventure_id)


async def cards_here(env: DiscordEnv, channel_id: int) -> list[AdventureCard]:
    adventure = await adventure_here(env, channel_id)
    async with env.bot.services.db.session() as session:
        rows = await session.scalars(
            select(AdventureCard)
            .where(AdventureCard.adventure_id == adventure.id)
            .order_by(AdventureCard.position)
        )
        return list(rows)


async def answer(env: DiscordEnv, record: InteractionRecord):
    """The message that answered an interaction (checked to be for its user alone)."""
    message = await answered(env, record)
    assert message.ephemeral and message.visible_to == record.user_id
    return message


def form(record: InteractionRecord) -> dict[str, str]:
    """The inputs of the form an interaction opened, by custom_id, as prefilled."""
    assert record.modal is not None, "no form was opened"
    return {
        c["custom_id"]: c.get("value") or ""
        for c in iter_components(record.modal["components"])
        if c.get("type") == 4
    }


# --- steering text -------------------------------------------------------------------------------


async def test_note_with_text_is_stored_and_shown(env):
    thread = await env.start_thread()
    record = await env.fake.slash(env.alice, thread, "note", text="Keep it gothic and eerie.")
    message = await answer(env, record)
    assert message.content == "Author's note updated; it applies from the next turn."
    assert message.embeds[0]["description"] == "Keep it gothic and eerie."
    assert (await adventure_here(env, thread)).authors_note == "Keep it gothic and eerie."
    assert env.narration(thread)[-1].startswith("Dusk settles")  # nothing posted in public


async def test_essentials_without_text_opens_a_prefilled_form(env):
    thread = await env.start_thread()
    before = (await adventure_here(env, thread)).plot_essentials
    assert before  # the scenario's, copied at start
    record = await env.fake.slash(env.alice, thread, "essentials")
    assert record.response_type == 9
    assert record.modal["title"] == "Plot essentials"
    assert form(record) == {"text": before}
    submitted = await env.fake.submit_modal(
        env.alice, record, {"text": "The lamplighter owes the ferryman a debt."}
    )
    message = await answer(env, submitted)
    assert message.content == "Plot essentials updated; it applies from the next turn."
    adventure = await adventure_here(env, thread)
    assert adventure.plot_essentials == "The lamplighter owes the ferryman a debt."
    assert adventure.version == 0  # buttons under the newest turn stay valid


async def test_an_empty_form_clears_and_says_so(env):
    thread = await env.start_thread()
    record = await env.fake.slash(env.alice, thread, "instructions")
    submitted = await env.fake.submit_modal(env.alice, record, {"text": ""})
    message = await answer(env, submitted)
    assert message.content == "AI instructions cleared; it applies from the next turn."
    assert message.embeds == []
    assert (await adventure_here(env, thread)).ai_instructions == ""


async def test_a_non_host_is_refused_and_told_who_can(env):
    thread = await env.start_thread()
    before = (await adventure_here(env, thread)).authors_note
    record = await env.fake.slash(env.bob, thread, "note", text="Everyone loves Bob.")
    assert (await answer(env, record)).content == (
        "⚠ Only alice (this adventure's host) and members with the Manage Server permission "
        "can change this adventure."
    )
    assert (await adventure_here(env, thread)).authors_note == before
    # No form is opened for someone who could not submit it.
    record = await env.fake.slash(env.bob, thread, "essentials")
    assert record.modal is None and "Only alice" in (await answer(env, record)).content
    record = await env.fake.slash(env.bob, thread, "card add")
    assert record.modal is None and "Only alice" in (await answer(env, record)).content


async def test_a_server_manager_may_steer_someone_elses_adventure(env):
    thread = await env.start_thread(host=env.bob)
    carol = env.fake.add_user("carol", member_of=[env.guild])
    refused = await env.fake.slash(carol, thread, "note", text="carol's note")
    assert "Only bob (this adventure's host)" in (await answer(env, refused)).content
    # alice can manage the server.
    record = await env.fake.slash(env.alice, thread, "note", text="alice's note")
    assert (await answer(env, record)).content.startswith("Author's note updated")
    assert (await adventure_here(env, thread)).authors_note == "alice's note"


async def test_a_dm_player_steers_their_solo_adventure(env):
    dm = env.fake.dm_channel(env.bob)
    await env.fake.slash(env.bob, dm, "start")
    await env.done()
    record = await env.fake.slash(env.bob, dm, "note", text="Quiet and lonely.")
    assert (await answer(env, record)).content.startswith("Author's note updated")
    assert (await adventure_here(env, dm)).authors_note == "Quiet and lonely."


async def test_a_form_for_an_adventure_that_was_replaced_saves_nothing(env):
    thread = await env.start_thread()
    record = await env.fake.slash(env.alice, thread, "note")
    await env.start_anew(env.alice, thread)  # a new adventure in the same thread
    submitted = await env.fake.submit_modal(env.alice, record, {"text": "For the old story."})
    assert (await answer(env, submitted)).content == (
        "⚠ Another adventure started here while the form was open; nothing was saved."
    )
    assert (await adventure_here(env, thread)).authors_note != "For the old story."


async def test_a_value_too_long_for_a_form_is_shown_not_cut(env):
    thread = await env.start_thread()
    adventure = await adventure_here(env, thread)
    async with env.bot.services.db.session() as session, session.begin():
        stored = await session.get(Adventure, adventure.id)
        stored.plot_essentials = "lore " * 1000  # imported, longer than a form holds
    record = await env.fake.slash(env.alice, thread, "essentials")
    assert record.modal is None
    message = await answer(env, record)
    assert message.content.startswith("Plot essentials is 5,000 characters long")
    assert len(message.embeds[0]["description"]) <= 4096


async def test_steering_where_nothing_runs(env):
    record = await env.fake.slash(env.alice, env.channel, "note")
    assert (await answer(env, record)).content == (
        "⚠ There is no adventure running here. Start one with /start."
    )


# --- story cards ---------------------------------------------------------------------------------


async def test_card_add_through_a_form_then_list_shows_it(env):
    thread = await env.start_thread()
    record = await env.fake.slash(env.alice, thread, "card add", always_on=True)
    assert record.modal["title"] == "New story card"
    assert form(record) == {"title": "", "keys": "", "entry": "", "type": "custom"}
    submitted = await env.fake.submit_modal(
        env.alice,
        record,
        {
            "title": "The Ferryman",
            "keys": "ferry, boatman, river",
            "entry": "A silent ferryman who takes one coin and never speaks of the far bank.",
            "type": "character",
        },
    )
    assert (await answer(env, submitted)).content == (
        "Story card “The Ferryman” added; it applies from the next turn."
    )
    card = (await cards_here(env, thread))[-1]
    assert (card.title, card.keys, card.type, card.always_on) == (
        "The Ferryman",
        "ferry, boatman, river",
        "character",
        True,
    )

    listing = await env.fake.slash(env.bob, thread, "card list")  # anyone may look
    (embed,) = (await answer(env, listing)).embeds
    assert embed["title"] == "Story cards · The Lantern Road"
    assert "**4. The Ferryman** · character · 📌 always on" in embed["description"]
    assert "keys: ferry, boatman, river" in embed["description"]
    assert (
        "> A silent ferryman who takes one coin and never speaks of the far bank."
        in (embed["description"])
    )
    assert "**1. Old Wenna** · character" in embed["description"]
    assert embed["footer"]["text"].startswith("Page 1/1 · 4 cards")


async def test_a_refused_card_form_can_be_fixed_without_retyping(env):
    thread = await env.start_thread()
    record = await env.fake.slash(env.alice, thread, "card add")
    typed = {"title": "old wenna", "keys": "", "entry": "A second Wenna.", "type": "character"}
    submitted = await env.fake.submit_modal(env.alice, record, typed)
    message = await answer(env, submitted)
    assert message.content == "⚠ This adventure already has a story card called “old wenna”."
    again = await env.fake.press(env.alice, message.id, label="Fix and send again")
    assert form(again) == typed
    fixed = await env.fake.submit_modal(env.alice, again, {"title": "Young Wenna"})
    assert "“Young Wenna” added" in (await answer(env, fixed)).content
    assert [c.title for c in await cards_here(env, thread)][-1] == "Young Wenna"


async def test_card_edit_with_autocomplete(env):
    thread = await env.start_thread()
    choices = await env.fake.autocomplete(
        env.alice, thread, "card edit", focused="card", value="wen"
    )
    assert [c["name"] for c in choices] == ["Old Wenna"]
    record = await env.fake.slash(env.alice, thread, "card edit", card=choices[0]["value"])
    assert record.modal["title"] == "Edit card: Old Wenna"
    prefilled = form(record)
    assert prefilled["title"] == "Old Wenna" and prefilled["type"] == "character"
    assert prefilled["keys"] == "Wenna, innkeeper, Brindle"
    submitted = await env.fake.submit_modal(
        env.alice, record, {"entry": "Wenna keeps the Brindle inn and a secret about lantern 13."}
    )
    assert (await answer(env, submitted)).content == (
        "Story card “Old Wenna” saved; it applies from the next turn."
    )
    wenna = next(c for c in await cards_here(env, thread) if c.title == "Old Wenna")
    assert wenna.entry == "Wenna keeps the Brindle inn and a secret about lantern 13."
    assert wenna.keys == "Wenna, innkeeper, Brindle" and not wenna.always_on


async def test_card_edit_by_typed_title_and_always_on(env):
    thread = await env.start_thread()
    record = await env.fake.slash(
        env.alice, thread, "card edit", card="marsh-lights", always_on=True
    )
    submitted = await env.fake.submit_modal(env.alice, record, {})
    assert "saved" in (await answer(env, submitted)).content
    lights = next(c for c in await cards_here(env, thread) if c.title == "Marsh-lights")
    assert lights.always_on


async def test_card_remove(env):
    thread = await env.start_thread()
    choices = await env.fake.autocomplete(
        env.alice, thread, "card remove", focused="card", value="mile"
    )
    assert [c["name"] for c in choices] == ["The Fallen Milestone"]
    record = await env.fake.slash(env.alice, thread, "card remove", card=choices[0]["value"])
    assert (await answer(env, record)).content == (
        "Story card “The Fallen Milestone” removed; it applies from the next turn."
    )
    assert "Milestone" not in str([c.title for c in await cards_here(env, thread)])
    missing = await env.fake.slash(env.alice, thread, "card remove", card="The Fallen Milestone")
    assert (await answer(env, missing)).content == (
        "⚠ There is no story card called “The Fallen Milestone” in this adventure; "
        "/card list shows them."
    )
    refused = await env.fake.slash(env.bob, thread, "card remove", card="Old Wenna")
    assert "Only alice" in (await answer(env, refused)).content
    assert len(await cards_here(env, thread)) == 2


async def test_a_long_card_list_is_paged(env):
    thread = await env.start_thread()
    host = Actor(env.alice)
    for n in range(10):
        await env.bot.services.story_cards.add(
            thread, host, CardDraft(f"Card {n:02}", "k" * 400, "word " * 800)
        )
    record = await env.fake.slash(env.alice, thread, "card list")
    message = await answer(env, record)
    assert message.embeds[0]["footer"]["text"].startswith("Page 1/2 · 13 cards")
    assert [label for label, _, disabled in message.buttons] == ["◀", "page 1/2", "▶"]
    assert [disabled for _, _, disabled in message.buttons] == [True, True, False]
    await env.fake.press(env.alice, message.id, label="▶")
    await env.done()
    assert message.embeds[0]["footer"]["text"].startswith("Page 2/2")
    assert "**13. Card 09**" in message.embeds[0]["description"]
    assert [disabled for _, _, disabled in message.buttons] == [False, True, True]


async def test_the_card_cap_is_checked_before_the_form_opens(
    tmp_path, fake_model, caplog, database_url
):
    async with campfire_on_standin(
        tmp_path, fake_model, caplog, database_url, max_story_cards=3
    ) as env:
        thread = await env.start_thread()
        record = await env.fake.slash(env.alice, thread, "card add")
        assert record.modal is None
        assert (await answer(env, record)).content == (
            "⚠ This adventure already has 3 story cards, the most it can hold (3). "
            "Remove one first."
        )


# --- generation settings -------------------------------------------------------------------------


async def test_adventure_settings_are_shown_with_their_defaults(env):
    thread = await env.start_thread()
    record = await env.fake.slash(env.bob, thread, "adventure settings")  # anyone may look
    content = (await answer(env, record)).content
    assert "Context: **4,096** tokens (the default)" in content
    assert "Reply length: at most **300** tokens (the default)" in content
    assert "Temperature: **0.8** (the default)" in content


async def test_settings_past_the_operators_ceilings_say_they_are_held(env):
    """On the operator's model a turn is held to the operator's context and reply length
    (``engine.llm.ceilings``): the settings say so when they are set past them."""
    thread = await env.start_thread()
    record = await env.fake.slash(
        env.alice, thread, "adventure settings", context_tokens=100_000, max_output_tokens=2000
    )
    content = (await answer(env, record)).content
    assert "Context: **100,000** tokens" in content
    assert "held to the operator's limits: context 100,000 tokens held to the operator's 4,096" in (
        content
    )
    assert "replies of 2,000 tokens held to the operator's 300" in content
    record = await env.fake.slash(env.alice, thread, "adventure settings", reset=True)
    assert "held to the operator's" not in (await answer(env, record)).content


async def test_adventure_settings_are_set_and_validated(env):
    thread = await env.start_thread()
    record = await env.fake.slash(env.alice, thread, "adventure settings", temperature=0.3)
    content = (await answer(env, record)).content
    assert content.startswith("Settings updated; they apply from the next turn.")
    assert "Temperature: **0.3** (set for this adventure; default 0.8)" in content
    assert (await adventure_here(env, thread)).temperature == 0.3

    record = await env.fake.slash(env.alice, thread, "adventure settings", temperature=5)
    assert (await answer(env, record)).content == "⚠ temperature must be between 0 and 2; got 5."
    record = await env.fake.slash(
        env.alice, thread, "adventure settings", context_tokens=1024, max_output_tokens=1000
    )
    assert "at least max_output_tokens (1,000) + 256 = 1,256" in (await answer(env, record)).content
    adventure = await adventure_here(env, thread)
    assert (adventure.temperature, adventure.context_tokens, adventure.max_output_tokens) == (
        0.3,
        None,
        None,
    )

    refused = await env.fake.slash(env.bob, thread, "adventure settings", temperature=1.5)
    assert "Only alice" in (await answer(env, refused)).content
    record = await env.fake.slash(env.alice, thread, "adventure settings", reset=True)
    assert "Temperature: **0.8** (the default)" in (await answer(env, record)).content
    assert (await adventure_here(env, thread)).temperature is None


async def test_the_next_turn_uses_the_new_settings(env, fake_model):
    thread = await env.start_thread()
    await env.fake.slash(
        env.alice, thread, "adventure settings", temperature=0.3, max_output_tokens=120
    )
    await env.fake.slash(env.alice, thread, "note", text="Write in a gothic tone.")
    fake_model.queue("The lantern gutters.")
    await env.fake.slash(env.alice, thread, "do", action="light the lantern")
    await env.done()
    (request,) = fake_model.requests
    assert request["temperature"] == 0.3 and request["max_tokens"] == 120
    assert "Write in a gothic tone." in str(request["messages"])
