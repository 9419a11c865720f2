"""Acknowledge first: every interaction is deferred or answered before the bot writes to the
database (a write can wait on a lock for longer than Discord's 3 seconds), and contact records
are few and come after the answer.

The first test plays every command and every button Campfire has through the stand-in, one
interaction at a time, with a recorder on the database (``tests.write_recorder``), and fails
on a write sent between an interaction's dispatch and its acknowledgement. The commands are
walked from the bot's own command tree and the buttons from its persistent items, so one added
later without a scripted example here fails the test.
"""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

from discord import app_commands

from bot.standin import StandinFile
from bot.standin.records import InteractionRecord, iter_components
from engine.people.access.rules import active_adventure
from engine.people.profiles import CONTACT_INTERVAL_S
from engine.story.steering.card_proposals import turn_count
from tests.card_files import card_png
from tests.discord_env import DiscordEnv
from tests.fakes.openai_server import FakeModelServer, Reply
from tests.write_recorder import WriteRecorder

DATA = Path(__file__).parent / "data"


#: What must not touch the database at all before it is acknowledged.
UNTOUCHED_BEFORE_ACKNOWLEDGING = {
    *("/do", "/say", "/story", "/continue", "/retry", "/undo", "/redo"),
    *(f"button {label}" for label in ("Continue", "Retry", "Undo", "Redo", "‹", "›")),
    *(f"button {label}" for label in ("Do", "Say", "Story")),
}


def leaf_commands(tree: app_commands.CommandTree) -> set[str]:
    names: set[str] = set()

    def walk(command: app_commands.Command | app_commands.Group | app_commands.ContextMenu) -> None:
        if isinstance(command, app_commands.Group):
            for sub in command.commands:
                walk(sub)
        else:
            names.add(command.qualified_name)

    for command in tree.get_commands():
        walk(command)
    return names


class Player:
    """Plays one interaction at a time, each to its end, and labels each for the report."""

    def __init__(self, env: DiscordEnv) -> None:
        self.env = env
        self.fake = env.fake
        self.labels: dict[int, str] = {}

    async def _settled(self, record: InteractionRecord, label: str) -> InteractionRecord:
        self.labels[record.id] = label
        await self.quiet()
        assert record.failed is None, f"{label}: {record.failed}"
        return record

    async def quiet(self) -> None:
        """Until the bot is done with it, the memory work a turn asked for included, so that
        a write seen later belongs to the next interaction."""
        bot = self.env.bot
        for _ in range(1000):
            await self.env.done()
            jobs = [j.id for j in bot.scheduler.get_jobs()]
            asked = [
                job
                for job in jobs
                if job.startswith(("memory-", "card-proposal-")) and job != "memory-sweep"
            ]
            if not asked and not bot.background._running:
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"still busy: {asked} {bot.background._running}")

    async def slash(self, user: int, channel: int, command: str, /, **options) -> InteractionRecord:
        record = await self.fake.slash(user, channel, command, **options)
        return await self._settled(record, f"/{command}")

    async def autocomplete(self, user: int, channel: int, command: str, **options) -> list:
        choices = await self.fake.autocomplete(user, channel, command, **options)
        await self.quiet()
        return choices

    async def press(self, user: int, message_id: int, **which) -> InteractionRecord:
        record = await self.fake.press(user, message_id, **which)
        named = which.get("label") or record.name
        return await self._settled(record, f"button {named}")

    async def submit(self, user: int, opened: InteractionRecord, values: dict) -> InteractionRecord:
        record = await self.fake.submit_modal(user, opened, values)
        return await self._settled(record, f"form of {self.labels.get(opened.id, opened.name)}")

    def answer(self, record: InteractionRecord):
        message_id = record.followups[-1] if record.followups else record.original_message_id
        assert message_id is not None, "not answered"
        return self.fake.message(message_id)

    def story_message(self, channel: int, label: str):
        """The newest message there carrying a button with this label."""
        for message in reversed(self.fake.messages(channel)):
            if any(b[0] == label and not b[2] for b in message.buttons):
                return message
        raise LookupError(f"no message with an enabled {label!r} button")


async def propose_a_card(
    env: DiscordEnv, fake_model: FakeModelServer, p: Player, thread: int
) -> None:
    """A card the story proposes to the host every few turns (``cogs.ui.card_proposals``): the
    turns played up to a multiple of 5, then what the scheduler runs after such a turn, run
    here between interactions (no memory work then takes the model's answer), and the host's
    Add card pressed in their DM."""
    services = env.bot.services
    async with services.db.session() as session:
        adventure = await active_adventure(session, thread)
        assert adventure is not None and adventure.id is not None
        played = await turn_count(session, adventure.id)
    for n in range(-played % 5):
        fake_model.queue(f"Tomas the miller waves; you wave back at Tomas ({n}).")
        await p.slash(env.alice, thread, "do", action="wave")
    await p.slash(env.alice, thread, "adventure settings", card_proposals=5)
    fake_model.queue('{"title": "Tomas", "keys": ["Tomas"], "entry": "The miller."}')
    await services.card_proposals.after_turn(adventure.id)
    await p.quiet()
    dm = env.fake.messages(env.fake.dm_channel(env.alice))
    proposal = next(m for m in reversed(dm) if any(b[0] == "Add card" for b in m.buttons))
    await p.press(env.alice, proposal.id, label="Add card")
    await p.slash(env.alice, thread, "adventure settings", card_proposals=0)


def form_inputs(record: InteractionRecord) -> list[str]:
    assert record.modal is not None
    return [c["custom_id"] for c in iter_components(record.modal["components"]) if c["type"] == 4]


async def play_everything(env: DiscordEnv, fake_model: FakeModelServer, p: Player) -> None:
    alice, bob, channel = env.alice, env.bob, env.channel

    # --- the library, and a scenario with options and questions ---------------------------
    await p.slash(alice, channel, "help")
    await p.slash(alice, channel, "help", topic="group")
    await p.slash(alice, channel, "scenario list")
    await p.slash(alice, channel, "scenario show", scenario="bandit")
    await p.slash(alice, channel, "scenario export", scenario="bandit")
    await p.autocomplete(alice, channel, "scenario show", focused="scenario", value="ban")
    await p.slash(alice, channel, "server importers", role=env.guild)
    await p.slash(alice, channel, "server importers")
    await p.slash(alice, channel, "server suggestions", on=False)
    await p.slash(alice, channel, "server suggestions", on=True)
    await p.slash(alice, channel, "server rating", level="safe")
    await p.slash(alice, channel, "server rating")
    await p.slash(alice, channel, "server rating", level="default")
    await p.slash(alice, channel, "server banned", words="gore, grisly death")
    await p.slash(alice, channel, "server banned", words="none")
    await p.slash(alice, channel, "server reports", channel=channel)
    await p.slash(alice, channel, "server reports", off=True)
    await p.slash(alice, channel, "server reports")
    for name in ("aid-new-scenario.json", "aid-story-cards.json"):
        file = StandinFile(name, (DATA / name).read_bytes(), "application/json")
        preview = await p.slash(alice, channel, "scenario import", file=file)
        label = "Confirm" if name.startswith("aid-new") else "Cancel"
        await p.press(alice, p.answer(preview).id, label=label)
    menu = await p.slash(alice, channel, "start", scenario="Clockwork")
    chosen = await p.press(alice, p.answer(menu).id, label="Tinkerer")
    first, second = form_inputs(chosen)
    await p.submit(alice, chosen, {first: "Ada", second: "Bo"})
    await p.slash(alice, channel, "scenario delete", scenario="Clockwork")
    # A character card PNG, its openings chosen at /start, and its export as a card.
    sola = json.loads((DATA / "cards" / "sola-v2.json").read_text())
    preview = await p.slash(
        alice, channel, "scenario import", file=StandinFile("sola.png", card_png(sola), "image/png")
    )
    await p.press(alice, p.answer(preview).id, label="Confirm")
    menu = await p.slash(alice, channel, "start", scenario="Orsolya")
    chosen = await p.press(alice, p.answer(menu).id, label=p.answer(menu).buttons[1][0])
    [name] = form_inputs(chosen)
    await p.submit(alice, chosen, {name: "Ada"})
    await p.slash(alice, channel, "scenario export", scenario="Orsolya", format="Character Card V2")
    await p.slash(alice, channel, "scenario delete", scenario="Orsolya")

    # --- an adventure, and every way of playing it -----------------------------------------
    await p.autocomplete(alice, channel, "start", focused="scenario", value="ban")
    await p.slash(alice, channel, "start", scenario="bandit")
    thread = env.fake.threads(channel)[-1]
    await p.slash(alice, thread, "do", action="creep closer")
    await p.slash(bob, thread, "say", words="Quiet now.")
    await p.slash(alice, thread, "story", text="A dog barks.")
    fake_model.queue('The dog falls quiet.\n```state\n{"suggestions": ["Hide by the cart"]}\n```')
    await p.slash(alice, thread, "continue")
    await p.press(bob, p.story_message(thread, "Hide by the cart").id, label="Hide by the cart")
    for label in ("Do", "Say", "Story"):
        opened = await p.press(bob, p.story_message(thread, label).id, label=label)
        await p.submit(bob, opened, {"action": "Someone hums nearby."})
    await p.press(alice, p.story_message(thread, "Continue").id, label="Continue")
    await p.press(alice, p.story_message(thread, "Retry").id, label="Retry")
    await p.press(alice, p.story_message(thread, "‹").id, label="‹")
    # The take counter between ‹ and › is disabled in every message: only a modified client
    # presses it.
    paged = p.story_message(thread, "›")
    counter = next(b for b in paged.button_components() if b["custom_id"].startswith("cf:takes:"))
    counter["disabled"] = False
    await p.press(alice, paged.id, custom_id=counter["custom_id"])
    await p.press(alice, p.story_message(thread, "Undo").id, label="Undo")
    await p.press(alice, p.story_message(thread, "Redo").id, label="Redo")
    await p.press(bob, p.story_message(thread, "Insights").id, label="Insights")
    fake_model.queue(Reply(fault="500"))
    await p.slash(alice, thread, "do", action="shout")
    await p.press(alice, p.story_message(thread, "Retry").id, label="Retry")
    await p.slash(alice, thread, "retry")
    await p.slash(alice, thread, "undo")
    await p.slash(alice, thread, "redo")
    edit = await p.slash(alice, thread, "edit")
    await p.submit(alice, edit, {"text": "The camp sleeps."})
    await p.autocomplete(alice, thread, "edit", focused="entry", value="")
    edit = await p.slash(alice, thread, "edit", entry=1)
    edited = await p.submit(alice, edit, {"text": "> You look at the camp."})
    await p.press(alice, p.answer(edited).id, label="Undo edit")
    await p.slash(alice, thread, "insights")
    await p.slash(alice, thread, "tree")

    # --- branches and save points ------------------------------------------------------------
    await p.slash(alice, thread, "branch new", name="the river path")
    await p.slash(alice, thread, "branch list")
    await p.autocomplete(alice, thread, "branch switch", focused="name", value="")
    await p.slash(alice, thread, "branch rename", name="the river path", new_name="the river")
    await p.slash(alice, thread, "branch switch", name="main")
    await p.slash(alice, thread, "branch delete", name="the river")
    await p.slash(alice, thread, "savepoint add", name="camp")
    await p.slash(alice, thread, "savepoint list")
    await p.autocomplete(alice, thread, "savepoint restore", focused="name", value="ca")
    await p.slash(alice, thread, "savepoint restore", name="camp")
    await p.slash(alice, thread, "savepoint delete", name="camp")

    # --- steering: texts and their forms, cards, settings, world state ----------------------
    for command in ("note", "essentials", "instructions"):
        await p.slash(alice, thread, command, text=f"The {command} for this camp.")
        opened = await p.slash(alice, thread, command)
        await p.submit(alice, opened, {"text": f"The {command}, from a form."})
    for n in range(8):
        opened = await p.slash(alice, thread, "card add", always_on=n == 0)
        await p.submit(alice, opened, {"title": f"Guard {n}", "keys": f"guard{n}"})
    opened = await p.slash(alice, thread, "card add")
    refused = await p.submit(alice, opened, {"title": "Guard 1", "keys": "again"})
    again = await p.press(alice, p.answer(refused).id, label="Fix and send again")
    await p.submit(alice, again, {"title": "Guard nine"})
    await p.autocomplete(alice, thread, "card edit", focused="card", value="gua")
    opened = await p.slash(alice, thread, "card edit", card="Guard 0")
    await p.submit(alice, opened, {"entry": "Sleeps at his post."})
    await p.autocomplete(alice, thread, "card options", focused="card", value="gua")
    await p.slash(alice, thread, "card options", card="Guard 0", secondary="gate", order=5)
    await p.slash(alice, thread, "card options", card="Guard 0")
    await p.slash(alice, thread, "card options", card="Guard 0", reset=True)
    listing = await p.slash(alice, thread, "card list")
    await p.press(alice, p.answer(listing).id, label="▶")
    await p.autocomplete(alice, thread, "card remove", focused="card", value="nine")
    await p.slash(alice, thread, "card remove", card="Guard nine")
    for name, label in (("Wren", "Add card"), ("Mira", "Discard")):
        fake_model.queue(f'{{"title": "{name}", "keys": ["{name}"], "entry": "Of the reeds."}}')
        proposal = await p.slash(alice, thread, "card generate", name=name)
        await p.press(alice, p.answer(proposal).id, label=label)
    cards = StandinFile(
        "aid-story-cards.json", (DATA / "aid-story-cards.json").read_bytes(), "application/json"
    )
    await p.autocomplete(alice, thread, "card import", focused="scenario", value="ban")
    for label in ("Cancel", "Import 3 story cards"):
        preview = await p.slash(alice, thread, "card import", file=cards)
        await p.press(alice, p.answer(preview).id, label=label)
    await p.slash(alice, thread, "adventure settings")
    await p.slash(alice, thread, "adventure settings", temperature=0.7)
    await propose_a_card(env, fake_model, p, thread)
    await p.slash(alice, thread, "state show")
    await p.slash(alice, thread, "state set", path="player.hp", value="50")
    await p.slash(alice, thread, "narrative track", on=True)
    await p.slash(alice, thread, "narrative correct", what="entity", subject="Gwen", value="ally")
    await p.slash(alice, thread, "narrative state")

    # --- memory and summary ------------------------------------------------------------------
    await p.slash(alice, thread, "memory add", text="The dog belongs to the cook.")
    choices = await p.autocomplete(alice, thread, "memory pin", focused="memory", value="dog")
    memory = choices[0]["value"]
    await p.slash(alice, thread, "memory list")
    await p.slash(alice, thread, "memory edit", memory=memory, text="The dog is the cook's.")
    await p.slash(alice, thread, "memory pin", memory=memory)
    await p.slash(alice, thread, "memory unpin", memory=memory)
    await p.slash(alice, thread, "memory forget", memory=memory)
    await p.slash(alice, thread, "memory restore", memory=memory)
    await p.slash(alice, thread, "summary view")
    opened = await p.slash(alice, thread, "summary edit")
    await p.submit(alice, opened, {"text": "Ada crept up on the bandit camp."})

    await p.slash(bob, thread, "recap")
    await p.slash(bob, thread, "usage")
    await p.slash(bob, thread, "chapters")

    # --- characters, the party, the host's controls -----------------------------------------
    await p.slash(bob, thread, "character set", name="Bo", about="The cook's boy.")
    await p.slash(alice, thread, "character show", player=bob)
    await p.slash(bob, thread, "party")
    await p.slash(bob, thread, "leave")
    await p.slash(bob, thread, "join")
    await p.slash(bob, thread, "host show")
    await p.slash(alice, thread, "host party", state="closed")
    await p.slash(alice, thread, "host party", state="open")
    await p.slash(alice, thread, "host lock")
    await p.slash(alice, thread, "host unlock")
    await p.slash(alice, thread, "host mute", player=bob)
    await p.slash(alice, thread, "host unmute", player=bob)
    await p.slash(alice, thread, "host rights", retry="anyone")
    await p.slash(alice, thread, "host mode", mode="host")
    fake_model.queue("The round is answered.")
    await p.slash(bob, thread, "do", action="wait for the others")
    await p.press(alice, p.story_message(thread, "Close round").id, label="Close round")
    await p.slash(alice, thread, "host mode", mode="free")
    await p.slash(alice, thread, "host banned", words="lich")
    await p.slash(alice, thread, "host banned")
    await p.slash(alice, thread, "host transfer", player=bob)
    await p.slash(bob, thread, "host transfer", player=alice)
    await p.slash(alice, thread, "host kick", player=bob)
    await p.slash(alice, thread, "host unmute", player=bob)

    # --- scripts -----------------------------------------------------------------------------
    code = StandinFile("o.js", b"const modifier = (text) => ({ text }); modifier(text);")
    await p.slash(alice, thread, "script upload", hook="output", file=code, name="echo")
    await p.slash(alice, thread, "script list")
    await p.autocomplete(alice, thread, "script disable", focused="name", value="ec")
    await p.slash(alice, thread, "script disable", name="echo")
    await p.slash(alice, thread, "script enable", name="echo")
    await p.slash(alice, thread, "script test", hook="output", text="The camp sleeps.")
    await p.slash(alice, thread, "script remove", name="echo")

    # --- the knowledge library (issue 21) ----------------------------------------------------
    notes = StandinFile("fen.md", b"# The Fen\n\nThe cook keeps eels in the rain barrel.")
    preview = await p.slash(alice, thread, "knowledge import", file=notes, **{"class": "canon"})
    await p.press(alice, p.answer(preview).id, label="Confirm")
    await p.slash(alice, thread, "knowledge list")
    await p.autocomplete(alice, thread, "knowledge show", focused="source", value="fen")
    await p.slash(alice, thread, "knowledge show", source="fen.md")
    await p.slash(alice, thread, "knowledge options", source="fen.md", narrator_only=True)
    await p.slash(alice, thread, "knowledge remove", source="fen.md")

    # --- models of one's own, the operator, the reasoning view (issue 18) --------------------
    fake_model.queue(Reply(text="The cook nods.", reasoning="The dog is the cook's."))
    await p.slash(alice, thread, "continue")
    insights = await p.slash(bob, thread, "insights")
    await p.press(bob, p.answer(insights).id, label="Reasoning")
    # A report of the turn, and its Undo in the reports channel (here, the server's channel).
    await p.slash(alice, channel, "server reports", channel=channel)
    opened = await p.press(bob, p.answer(insights).id, label="Report")
    await p.submit(bob, opened, {"reason": "not for this server"})
    posted = [m for m in env.fake.messages(channel) if m.embeds and "reported" in str(m.embeds)]
    await p.press(alice, posted[-1].id, label="Undo this turn")
    await p.slash(alice, channel, "model show")
    # Refused (the fake model server is on the loopback): after the acknowledgement.
    await p.slash(alice, channel, "model set", url=fake_model.base_url, model=fake_model.model)
    await p.slash(alice, channel, "model test")
    await p.slash(alice, channel, "model pick", name=fake_model.model)
    await p.slash(alice, channel, "model clear")
    owner = env.fake.world.guilds[env.guild].owner_id
    await p.slash(owner, channel, "operator status")
    await p.slash(owner, channel, "operator block", user=bob)
    await p.slash(owner, channel, "operator unblock", user=bob)

    # --- files, and the player's own data ----------------------------------------------------
    exported = await p.slash(bob, thread, "adventure export")
    saved = p.answer(exported).attachments[0]
    await p.slash(bob, thread, "adventure export", format="html")
    dm = env.fake.dm_channel(bob)
    await p.slash(bob, dm, "adventure import", file=StandinFile(saved.filename, saved.content))
    # Again where the import now runs: asked first, then confirmed.
    for label in ("Keep playing", "Import it"):
        asked = await p.slash(
            bob, dm, "adventure import", file=StandinFile(saved.filename, saved.content)
        )
        await p.press(bob, p.answer(asked).id, label=label)
    await p.slash(bob, thread, "profile show")
    await p.slash(bob, thread, "profile keep", keep=True)
    await p.slash(bob, thread, "profile rating", level="safe")
    await p.slash(bob, thread, "profile rating")
    await p.slash(bob, thread, "profile delete", confirm="delete")

    # --- a place's adventures: listed, ended on purpose, brought back (issue 23) ------------
    await p.slash(alice, channel, "adventure list")
    for label in ("Keep playing", "End it"):
        asked = await p.slash(alice, thread, "adventure end")
        await p.press(alice, p.answer(asked).id, label=label)
    await p.slash(alice, thread, "start", scenario="lantern")
    choices = await p.autocomplete(alice, thread, "adventure resume", focused="adventure")
    asked = await p.slash(alice, thread, "adventure resume", adventure=choices[0]["value"])
    await p.press(alice, p.answer(asked).id, label="Resume it")


async def test_every_interaction_is_acknowledged_before_it_writes(
    env: DiscordEnv, fake_model: FakeModelServer
):
    player = Player(env)
    recorder = WriteRecorder(env.bot.services.db.engine, env.fake.clock)
    reads = WriteRecorder(env.bot.services.db.engine, env.fake.clock, reads_too=True)
    with recorder.recording(), reads.recording():
        await play_everything(env, fake_model, player)
        await env.done()

    interactions = list(env.fake.world.interactions.values())
    played = {r.name for r in interactions if r.type == 2}
    assert leaf_commands(env.bot.tree) - played == set(), "commands with no example here"
    pressed = [r.name or "" for r in interactions if r.type == 3]
    buttons = env.bot._connection._view_store._dynamic_items  # pattern -> DynamicItem class
    never = [
        item.__name__
        for pattern, item in buttons.items()
        if not any(pattern.fullmatch(custom_id) for custom_id in pressed)
    ]
    assert never == [], "persistent buttons with no example here"

    late = []
    for record in interactions:
        name = record.name or ""
        end = record.acknowledged if record.acknowledged is not None else math.inf
        writes = recorder.between(record.created, end)
        if writes:
            label = player.labels.get(record.id, f"autocomplete of /{name}")
            late.append(f"{label}: {writes[0]}")
    assert not late, "written before acknowledging:\n" + "\n".join(late)

    # The busiest interactions, actions, story buttons and head moves, ask the database
    # nothing at all before they are acknowledged (a read, too, can wait past the 3 s on a
    # loaded database): an in-memory hint chooses how to acknowledge them.
    asked = []
    for record in interactions:
        label = player.labels.get(record.id, "")
        if label in UNTOUCHED_BEFORE_ACKNOWLEDGING:
            end = record.acknowledged if record.acknowledged is not None else math.inf
            if early := reads.between(record.created, end):
                asked.append(f"{label}: {early[0]}")
    assert not asked, "the database asked before acknowledging:\n" + "\n".join(asked)


async def test_a_contact_is_recorded_after_the_answer_once_an_hour_and_not_for_typing(
    env: DiscordEnv,
):
    """Every interaction is a contact (the person's row, their "last seen"), but only the first
    of each hour is written, after its answer; autocomplete, which is typing, is none."""
    env.bot.services.profiles.clock = env.fake.clock  # the hour passes on the stand-in's clock
    recorder = WriteRecorder(env.bot.services.db.engine, env.fake.clock)

    def contacts() -> list[float]:
        return [w.at for w in recorder.writes if w.statement.startswith("INSERT INTO users")]

    with recorder.recording():
        await env.fake.autocomplete(env.bob, env.channel, "start", focused="scenario", value="l")
        await env.done()
        assert contacts() == []
        helped = [await env.fake.slash(env.bob, env.channel, "help") for _ in range(3)]
        await env.done()
        (written,) = contacts()
        assert helped[0].acknowledged is not None and written >= helped[0].acknowledged
        env.fake.advance(CONTACT_INTERVAL_S)
        again = await env.fake.slash(env.bob, env.channel, "help")
        await env.done()
        assert len(contacts()) == 2 and contacts()[1] >= (again.acknowledged or math.inf)
