"""Character cards through the Discord stand-in: a card PNG attached to /scenario import is
previewed and saved, /start offers its greetings as openings (and in a server asks the host's
character's name for ``{{user}}``), a hostile PNG is refused privately with nothing stored, and
/scenario export gives the card back."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import func, select
from sqlmodel import col

from bot.standin import StandinFile
from bot.standin.records import iter_components
from engine.storage.models import Scenario
from tests.card_files import card_png, image, ztxt_chunk
from tests.test_scenario_commands import answer

CARDS = Path(__file__).parent / "data" / "cards"


def png_file(name: str) -> StandinFile:
    card = json.loads((CARDS / name).read_text())
    return StandinFile(name.replace(".json", ".png"), card_png(card), "image/png")


async def imported_count(env) -> int:
    async with env.bot.services.db.session() as session:
        query = (
            select(func.count()).select_from(Scenario).where(col(Scenario.builtin_key).is_(None))
        )
        return await session.scalar(query) or 0


async def import_card(env, user: int, channel: int, file: StandinFile) -> None:
    record = await env.fake.slash(user, channel, "scenario import", file=file)
    await env.done()
    preview = answer(env, record)
    fields = {f["name"]: f["value"] for f in preview.embeds[0]["fields"]}
    assert fields["Format"] == "Character Card V2"
    assert fields["Openings (3)"] == "One is chosen at /start"
    assert "{{user}} is the player" in fields["Warnings"]
    pressed = await env.fake.press(user, preview.id, label="Confirm")
    await env.done()
    assert pressed.failed is None
    assert env.fake.message(preview.id).content.startswith("✅ Imported **Orsolya Venn**")


async def test_a_card_png_imports_and_start_offers_its_greetings(env, fake_model):
    await import_card(env, env.alice, env.channel, png_file("sola-v2.json"))

    record = await env.fake.slash(env.alice, env.channel, "start", scenario="Orsolya")
    await env.done()
    menu = answer(env, record)
    assert "Choose how your story begins" in menu.content
    labels = [b[0] for b in menu.buttons]
    # Each opening's first words, "you" until the name is known, without the emphasis marks.
    assert labels == [
        '1. Orsolya Venn lowers her pole as you approach. "Third lamp tonight. You are…',
        "2. Rain on the cobbles. Orsolya Venn is on her ladder, swearing at a lamp…",
        "3. The ledger lies open on the counter of the lamp house. You are written on…",
    ]

    chosen = await env.fake.press(env.alice, menu.id, label=labels[2])
    await env.done()
    # In a server, {{user}} is the host's character: asked before the story begins.
    assert chosen.modal is not None
    inputs = [c for c in iter_components(chosen.modal["components"]) if c.get("type") == 4]
    assert [c["label"] for c in inputs] == ["Your character's name"]
    submitted = await env.fake.submit_modal(env.alice, chosen, {inputs[0]["custom_id"]: "Ada"})
    await env.done()
    assert submitted.failed is None
    thread = env.fake.threads(env.channel)[-1]
    assert env.narration(thread)[-1] == (
        "*The ledger lies open on the counter of the lamp house.* Ada is written on tonight's "
        "page, in Orsolya Venn's hand."
    )
    # The host plays Ada: their actions are written with the name the story calls them by.
    fake_model.queue("Orsolya looks up.")
    acted = await env.fake.slash(env.alice, thread, "do", action="read the ledger")
    await env.done()
    assert "> Ada reads the ledger." in env.fake.message(acted.original_message_id).content
    prompt = json.dumps(fake_model.requests[-1])
    assert "> Ada reads the ledger." in prompt


async def test_in_a_dm_the_user_is_you_and_nothing_is_asked(env, fake_model):
    dm = env.fake.dm_channel(env.bob)
    record = await env.fake.slash(env.bob, dm, "scenario import", file=png_file("sola-v2.json"))
    await env.done()
    await env.fake.press(env.bob, answer(env, record).id, label="Confirm")
    await env.done()

    record = await env.fake.slash(env.bob, dm, "start", scenario="Orsolya")
    await env.done()
    menu = answer(env, record)
    chosen = await env.fake.press(env.bob, menu.id, label=menu.buttons[1][0])
    await env.done()
    assert chosen.failed is None and chosen.modal is None
    assert env.narration(dm)[-1].endswith('"Hold this, you."')


async def test_a_hostile_png_is_refused_privately_and_nothing_is_stored(env):
    bomb = image(ztxt_chunk(b"chara", b"A" * (20 * 1024 * 1024)))
    record = await env.fake.slash(
        env.alice, env.channel, "scenario import", file=StandinFile("bomb.png", bomb, "image/png")
    )
    await env.done()
    refusal = answer(env, record)
    assert "inflates to more than" in refusal.content
    assert refusal.components == []
    truncated = png_file("sola-v2.json")
    record = await env.fake.slash(
        env.alice,
        env.channel,
        "scenario import",
        file=StandinFile("cut.png", truncated.content[:200], "image/png"),
    )
    await env.done()
    assert "cut short" in answer(env, record).content
    assert await imported_count(env) == 0


async def test_export_as_a_card(env):
    await import_card(env, env.alice, env.channel, png_file("sola-v2.json"))
    shown = await env.fake.slash(env.alice, env.channel, "scenario show", scenario="Orsolya")
    await env.done()
    fields = {f["name"]: f["value"] for f in answer(env, shown).embeds[0]["fields"]}
    assert fields["Openings"] == "3, chosen at /start"
    record = await env.fake.slash(
        env.alice,
        env.channel,
        "scenario export",
        scenario="Orsolya",
        format="Character Card V3",
    )
    await env.done()
    message = answer(env, record)
    [file] = message.attachments
    assert file.filename == "orsolya-venn.card-v3.json"
    card = json.loads(file.content)
    assert card["spec"] == "chara_card_v3"
    assert card["data"]["first_mes"].startswith("*Orsolya Venn lowers her pole")
    assert len(card["data"]["alternate_greetings"]) == 2
    assert [e["name"] for e in card["data"]["character_book"]["entries"]] == [
        "The ledger",
        "Lamp house",
        "Fog",
    ]
    assert "as a character card" in message.content
