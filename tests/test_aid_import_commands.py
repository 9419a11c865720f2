"""Issue 19 through Discord (the stand-in): the preview of an old export listing scenarios, an
import over the card cap offering its first cards, and a scenario's questions asked in as many
forms as they need."""

from __future__ import annotations

import json

from bot.standin import StandinFile
from bot.standin.records import iter_components
from tests.discord_env import campfire_on_standin
from tests.test_aid_import import OLD_LIST
from tests.test_scenario_commands import answer, imported_titles


def upload(name: str, value: object) -> StandinFile:
    return StandinFile(name, json.dumps(value).encode(), "application/json")


async def test_a_list_of_scenarios_is_previewed_and_saved_as_each(env):
    record = await env.fake.slash(
        env.alice, env.channel, "scenario import", file=upload("mine.json", OLD_LIST)
    )
    await env.done()
    message = answer(env, record)
    embed = message.embeds[0]
    assert embed["title"] == "2 scenarios"
    assert embed["description"].splitlines() == [
        "• The Dragon's Hoard · 1 card",
        "• Choose a kingdom · 0 cards, 2 options",
    ]
    fields = {f["name"]: f["value"] for f in embed["fields"]}
    assert fields["Format"] == "AI Dungeon scenarios (2020–21 export of several)"
    assert fields["Asked at /start"] == "`character.name`"

    await env.fake.press(env.alice, message.id, label="Confirm")
    await env.done()
    done = env.fake.message(message.id).content
    assert done.startswith(
        "✅ Imported 2 scenarios (**The Dragon's Hoard**, **Choose a kingdom**) into this "
        "server's library (1 story card, 2 options)."
    )
    assert await imported_titles(env) == [
        "The Dragon's Hoard",
        "Choose a kingdom",
        "Larion",
        "Zalt",
    ]


async def test_an_import_over_the_card_cap_offers_its_first_cards(
    tmp_path, fake_model, caplog, database_url
):
    cards = [{"keys": f"k{i}", "value": f"v{i}", "title": f"Card {i}"} for i in range(5)]
    async with campfire_on_standin(
        tmp_path, fake_model, caplog, database_url, max_story_cards=3
    ) as env:
        record = await env.fake.slash(
            env.alice, env.channel, "scenario import", file=upload("big.json", cards)
        )
        await env.done()
        message = answer(env, record)
        fields = {f["name"]: f["value"] for f in message.embeds[0]["fields"]}
        assert fields["Story cards"] == "3"
        assert "has 5 story cards; an adventure may hold at most 3" in fields["Warnings"]
        assert "the last 2, from “Card 3” on, are left out" in fields["Warnings"]
        assert [b[0] for b in message.buttons] == ["Import the first 3 cards", "Cancel"]

        await env.fake.press(env.alice, message.id, label="Import the first 3 cards")
        await env.done()
        assert "(3 story cards)" in env.fake.message(message.id).content


def _inputs(modal: dict) -> list[dict]:
    return [c for c in iter_components(modal["components"]) if c.get("type") == 4]


async def test_seven_questions_are_asked_in_two_forms(env, fake_model):
    prompt = " ".join(f"Q{i}=${{Question {i}?}}" for i in range(7))
    scenario = {"title": "Seven questions", "prompt": prompt, "memory": "", "authorsNote": ""}
    record = await env.fake.slash(
        env.alice, env.channel, "scenario import", file=upload("seven.json", scenario)
    )
    await env.done()
    await env.fake.press(env.alice, answer(env, record).id, label="Confirm")
    await env.done()

    started = await env.fake.slash(env.alice, env.channel, "start", scenario="Seven questions")
    await env.done()
    assert started.modal is not None
    first = _inputs(started.modal)
    assert [c["label"] for c in first] == [f"Question {i}?" for i in range(5)]
    assert started.modal["title"].endswith("(1/2)")
    submitted = await env.fake.submit_modal(
        env.alice, started, {c["custom_id"]: f"A{i}" for i, c in enumerate(first)}
    )
    await env.done()
    between = answer(env, submitted)
    assert between.content == "5 of 7 questions answered; 2 more before the story begins."

    pressed = await env.fake.press(env.alice, between.id, label="Next questions")
    await env.done()
    assert pressed.modal is not None
    second = _inputs(pressed.modal)
    assert [c["label"] for c in second] == ["Question 5?", "Question 6?"]
    assert pressed.modal["title"].endswith("(2/2)")
    last = await env.fake.submit_modal(
        env.alice, pressed, {c["custom_id"]: f"A{i + 5}" for i, c in enumerate(second)}
    )
    await env.done()
    assert last.failed is None
    thread = env.fake.threads(env.channel)[-1]
    opening = env.narration(thread)[-1]
    assert opening == " ".join(f"Q{i}=A{i}" for i in range(7))
