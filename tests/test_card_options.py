"""/card options: a story card's world-info options set with typed slash options.

The engine half checks ``changed_lore`` against ``clean_lore``'s own bounds (the table the
command is built from must not drift from them); the Discord half plays the command through
the stand-in: options set and shown in words, a turn whose Insights say a secondary key fired
(SillyTavern's World Info "optional filter": docs.sillytavern.app, "World Info"), a value
refused with nothing written, a player without the right refused, reset.
"""

from __future__ import annotations

import pytest
from sqlalchemy import select
from sqlmodel import col

from engine.errors import InvalidInput
from engine.platform.sanitise import QUOTE_MAX
from engine.prompt.lore import clean_lore, read_lore
from engine.storage.models import AdventureCard
from engine.story.steering.card_options import CLEAR, LORE_OPTIONS, changed_lore
from tests.discord_env import DiscordEnv, answered

# --- the engine: changes, checked against clean_lore ----------------------------------------


@pytest.mark.parametrize(
    "option", [o for o in LORE_OPTIONS if o.kind == "number"], ids=lambda o: o.name
)
def test_a_number_options_bounds_are_clean_lores(option):
    # A depth is read only with the place it belongs to.
    beside = {"position": "depth"} if option.name == "depth" else {}
    kept: list[str] = []
    clean_lore({**beside, option.name: option.high}, kept)
    clean_lore({**beside, option.name: option.low}, kept)
    assert kept == []
    for outside in (option.low - 1, option.high + 1):
        clamped: list[str] = []
        clean_lore({**beside, option.name: outside}, clamped)
        assert clamped, f"clean_lore keeps {option.name}={outside}, the table refuses it"


def test_every_option_is_one_clean_lore_keeps():
    # Each row names an option the card stores (an unknown one would be dropped by clean_lore).
    for option in LORE_OPTIONS:
        warnings: list[str] = []
        clean_lore({option.name: None}, warnings)
        assert not any("unknown option" in w for w in warnings), option.name
        assert len(option.help) <= 100  # Discord's most for an option's description


def test_changes_merge_clear_and_reset():
    current = {"secondary": ["tower"], "logic": "and_any", "order": 5}
    changed = changed_lore(current, {"probability": 40, "logic": "not_any"})
    assert changed == {"secondary": ["tower"], "logic": "not_any", "order": 5, "probability": 40}
    assert read_lore(changed).describe() == [
        "secondary keys (NOT ANY): tower",
        "order 5",
        "probability 40%",
    ]
    # A text option's CLEAR clears it (and its logic with it: nothing left to combine).
    assert changed_lore(changed, {"secondary": CLEAR}) == {"order": 5, "probability": 40}
    assert changed_lore(changed, {}, reset=True) == {}
    assert changed_lore(changed, {"sticky": 2}, reset=True) == {"sticky": 2}
    # Regex keys with spaces between, each one RE2 runs; groups with commas.
    assert changed_lore({}, {"regex": "/dragons?/i  /wyrm\\/kin/", "group": "foes, beasts"}) == {
        "regex": ["/dragons?/i", "/wyrm\\/kin/"],
        "group": "foes,beasts",
    }


def test_a_place_and_its_depth_set_moved_and_cleared():
    # SillyTavern's Insertion Position: at a depth takes its depth; moving the card elsewhere
    # drops the depth, and "where Campfire puts it" clears the place.
    deep = changed_lore({"order": 5}, {"position": "depth", "depth": 2})
    assert deep == {"order": 5, "position": "depth", "depth": 2}
    assert "placed at depth 2" in " ".join(read_lore(deep).describe())
    assert changed_lore(deep, {"position": "an_top"}) == {"order": 5, "position": "an_top"}
    assert changed_lore(deep, {"position": CLEAR}) == {"order": 5}
    with pytest.raises(InvalidInput, match="`depth` places a card only with `position` at a depth"):
        changed_lore({}, {"position": "after", "depth": 3})


@pytest.mark.parametrize(
    ("changes", "refusal"),
    [
        (
            {"probability": 150},
            "Nothing was changed: `probability` takes a whole number from 0 to 100; "
            "“150” is not that.",
        ),
        (
            {"scan_depth": True},
            "Nothing was changed: `scan_depth` takes a whole number from 0 to 100; "
            "“True” is not that.",
        ),
        (
            {"logic": "maybe"},
            "Nothing was changed: `logic` takes one of AND ANY, NOT ALL, NOT ANY, AND ALL; "
            "“maybe” is not that.",
        ),
        (
            {"logic": "and_all"},
            "Nothing was changed: `logic` applies only to a card with `secondary`; "
            "set `secondary` too.",
        ),
        (
            {"group_weight": 5},
            "Nothing was changed: `group_weight` applies only to a card with `group`; "
            "set `group` too.",
        ),
        (
            {"regex": "/(?=look)ahead/"},
            "Nothing was changed: the regex key “/(?=look)ahead/” is not one Campfire runs: at "
            "most 300 characters, flags among gimsuy, and no look-arounds or back-references "
            "(RE2's syntax).",
        ),
        (
            {"regex": "dragons"},
            "Nothing was changed: `regex` takes keys written /pattern/flags, separated by "
            "spaces, e.g. `/dragons?/i /wyrm/`.",
        ),
        (
            {"regex": " ".join(f"/k{n}/" for n in range(17))},
            "Nothing was changed: a card holds at most 16 regex keys; you gave 17.",
        ),
        (
            {"group": "x" * 65},
            "Nothing was changed: `group` takes up to 8 names with commas, each at most 64 "
            "characters.",
        ),
        (
            {"secondary": "k" * 1001},
            "Nothing was changed: `secondary` takes words with commas, at most 1,000 characters "
            "together; “" + "k" * (QUOTE_MAX - 1) + "…” is not that.",
        ),
        ({"constant": True}, "Nothing was changed: there is no world-info option `constant`."),
    ],
    ids=lambda value: str(value)[:30],
)
def test_a_value_clean_lore_would_not_keep_is_refused_whole(changes, refusal):
    with pytest.raises(InvalidInput) as refused:
        changed_lore({"order": 5}, {"sticky": 3, **changes})
    assert refused.value.message == refusal


# --- through Discord -----------------------------------------------------------------------------


async def test_discord_gets_typed_bounded_options_from_the_table(env: DiscordEnv):
    """As registered (the stand-in checks Discord's schema: 25 options, 100-character
    descriptions, 8,000 characters a command): Discord's client then refuses out of range."""
    await env.bot.tree.sync()
    (card,) = [c for c in env.fake.commands[None] if c["name"] == "card"]
    (command,) = [o for o in card["options"] if o["name"] == "options"]
    options = {o["name"]: o for o in command["options"]}
    assert list(options) == ["card", "reset", *(o.name for o in LORE_OPTIONS)]
    assert options["card"]["required"] and options["card"]["autocomplete"]
    assert (options["probability"]["type"], options["probability"]["min_value"]) == (4, 0)
    assert options["probability"]["max_value"] == 100
    assert options["sticky"]["max_value"] == 100 and options["recurse"]["type"] == 5
    assert [c["name"] for c in options["logic"]["choices"]] == [
        "AND ANY",
        "NOT ALL",
        "NOT ANY",
        "AND ALL",
    ]
    assert options["secondary"]["max_length"] == 1000


async def card_lore(env: DiscordEnv, thread: int, title: str) -> dict:
    ref = await env.bot.services.play.adventure_in(thread)
    assert ref is not None
    async with env.bot.services.db.session() as session:
        card = await session.scalar(
            select(AdventureCard).where(
                col(AdventureCard.adventure_id) == ref.adventure_id,
                col(AdventureCard.title) == title,
            )
        )
        assert card is not None
        return card.lore


async def private_answer(env: DiscordEnv, record) -> str:
    message = await answered(env, record)
    assert message.ephemeral and message.visible_to == record.user_id
    return message.content


async def insights_of_newest_turn(env: DiscordEnv, thread: int) -> str:
    record = await env.fake.slash(env.alice, thread, "insights")
    await env.done()
    assert record.failed is None and record.original_message_id is not None
    (embed,) = env.fake.message(record.original_message_id).embeds
    fields = [f"{field['name']}\n{field['value']}" for field in embed.get("fields", [])]
    return "\n".join((embed["description"], *fields))


async def test_options_set_shown_and_at_work_in_a_turn(env: DiscordEnv, fake_model):
    thread = await env.start_thread()
    choices = await env.fake.autocomplete(
        env.alice, thread, "card options", focused="card", value="wen"
    )
    assert [c["name"] for c in choices] == ["Old Wenna"]
    record = await env.fake.slash(
        env.alice,
        thread,
        "card options",
        card=choices[0]["value"],
        secondary="humming tune, lullaby",
        logic="and_any",
        order=7,
        sticky=1,
    )
    assert await private_answer(env, record) == (
        "World-info options of “Old Wenna” saved; they apply from the next turn.\n"
        "• secondary keys (AND ANY): humming tune, lullaby\n"
        "• order 7\n"
        "• sticky 1 entries"
    )
    assert await card_lore(env, thread, "Old Wenna") == {
        "secondary": ["humming tune", "lullaby"],
        "logic": "and_any",
        "order": 7,
        "sticky": 1,
    }
    # A primary key alone does not bring her in now; with a secondary key it does, and
    # Insights says which one fired.
    fake_model.queue("Wenna wipes the bar.", "Wenna hums the first bars.")
    await env.fake.slash(env.alice, thread, "do", action="ask Wenna about the road")
    await env.done()
    assert "Old Wenna" not in await insights_of_newest_turn(env, thread)
    await env.fake.slash(env.alice, thread, "do", action="ask Wenna where the lullaby is from")
    await env.done()
    seen = await insights_of_newest_turn(env, thread)
    assert "**Old Wenna**" in seen
    assert "fired by secondary key lullaby (AND ANY)" in seen
    # Without options, the command shows them.
    shown = await env.fake.slash(env.bob, thread, "card options", card="Old Wenna")
    assert "Only alice" in await private_answer(env, shown)  # the steering right, as /card edit
    shown = await env.fake.slash(env.alice, thread, "card options", card="old wenna")
    assert (await private_answer(env, shown)).startswith(
        "World-info options of “Old Wenna”:\n• secondary keys (AND ANY)"
    )


async def test_a_bad_value_or_a_player_without_the_right_changes_nothing(env: DiscordEnv):
    thread = await env.start_thread()
    before = {"order": 3}
    set_first = await env.fake.slash(
        env.alice, thread, "card options", card="Marsh-lights", order=3
    )
    assert "order 3" in await private_answer(env, set_first)
    # Discord bounds the number; a client may send it anyway, and the engine refuses it too.
    record = await env.fake.slash(
        env.alice, thread, "card options", card="Marsh-lights", probability=101, sticky=2
    )
    assert await private_answer(env, record) == (
        "⚠ Nothing was changed: `probability` takes a whole number from 0 to 100; "
        "“101” is not that."
    )
    record = await env.fake.slash(
        env.alice, thread, "card options", card="Marsh-lights", regex="/(\\w)\\1/", sticky=2
    )
    assert "the regex key “/(\\w)\\1/” is not one Campfire runs" in await private_answer(
        env, record
    )
    assert await card_lore(env, thread, "Marsh-lights") == before
    record = await env.fake.slash(env.bob, thread, "card options", card="Marsh-lights", reset=True)
    assert await private_answer(env, record) == (
        "⚠ Only alice (this adventure's host) and members with the Manage Server permission "
        "can change this adventure."
    )
    assert await card_lore(env, thread, "Marsh-lights") == before
    record = await env.fake.slash(env.alice, thread, "card options", card="Nobody", order=1)
    assert (await private_answer(env, record)).startswith(
        "⚠ There is no story card called “Nobody” in this adventure"
    )


async def test_reset_clears_every_option(env: DiscordEnv):
    thread = await env.start_thread()
    await env.fake.slash(
        env.alice,
        thread,
        "card options",
        card="The Fallen Milestone",
        group="landmarks",
        group_weight=30,
        disabled=True,
        whole_words=False,
    )
    await env.done()
    assert await card_lore(env, thread, "The Fallen Milestone") == {
        "group": "landmarks",
        "group_weight": 30,
        "disabled": True,
        "whole_words": False,
    }
    record = await env.fake.slash(
        env.alice, thread, "card options", card="The Fallen Milestone", reset=True
    )
    assert await private_answer(env, record) == (
        "World-info options of “The Fallen Milestone” reset; they apply from the next turn.\n"
        "None: it comes in when one of its keys appears, as a plain story card does."
    )
    assert await card_lore(env, thread, "The Fallen Milestone") == {}
    # Reset with a value: cleared first, then set.
    record = await env.fake.slash(
        env.alice, thread, "card options", card="The Fallen Milestone", reset=True, delay=2
    )
    assert "• delay 2 entries" in await private_answer(env, record)
    assert await card_lore(env, thread, "The Fallen Milestone") == {"delay": 2}
