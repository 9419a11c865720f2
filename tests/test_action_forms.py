"""The Do, Say and Story buttons under the newest turn: each opens a one-field form, and what is
typed there plays as that player's action, as the slash command would. Through the stand-in,
with real discord.py and the fake model server."""

from __future__ import annotations

from tests.discord_env import DiscordEnv, answered
from tests.test_adventure_rights import answer, press_forged
from tests.test_steering_commands import form


async def press(env: DiscordEnv, thread: int, user: int, label: str):
    newest = [m for m in env.fake.messages(thread) if m.buttons][-1]
    return await env.fake.press(user, newest.id, label=label)


async def test_each_button_opens_its_form_and_plays_what_is_typed_as_that_players(
    env: DiscordEnv, fake_model
):
    thread = await env.start_thread()
    fake_model.queue("Steel rings in the dark.", "Nobody answers.", "Thunder rolls.")
    opened = await press(env, thread, env.bob, "Do")
    assert opened.modal is not None and opened.modal["title"] == "What do you do?"
    assert form(opened) == {"action": ""}
    await env.fake.submit_modal(env.bob, opened, {"action": "draw my sword"})
    await env.done()
    said = await press(env, thread, env.alice, "Say")
    assert said.modal["title"] == "What do you say?"
    await env.fake.submit_modal(env.alice, said, {"action": "Who goes there?"})
    await env.done()
    told = await press(env, thread, env.bob, "Story")
    await env.fake.submit_modal(env.bob, told, {"action": "A storm rolls in."})
    await env.done()
    shown = [m.content for m in env.fake.messages(thread) if not m.ephemeral]
    order = [
        "> bob draws their sword.",
        "Steel rings in the dark.",
        '> alice says "Who goes there?"',
        "Nobody answers.",
        "A storm rolls in.",
        "Thunder rolls.",
    ]
    assert [text for text in shown if text in order] == order
    # What the model read: the players' actions, under their names.
    assert "> bob draws their sword." in str(fake_model.requests[0])
    newest = env.fake.last_message(thread)
    assert [label for label, _, _ in newest.buttons][-3:] == ["Do", "Say", "Story"]


async def test_a_form_from_an_adventure_that_ended_plays_nothing(env: DiscordEnv, fake_model):
    thread = await env.start_thread()
    opened = await press(env, thread, env.alice, "Do")  # the form is open...
    await env.start_anew(env.alice, thread)  # ...when a new adventure starts here
    requests = len(fake_model.requests)
    submitted = await env.fake.submit_modal(env.alice, opened, {"action": "open the door"})
    await env.done()
    refusal = await answered(env, submitted)
    assert refusal.visible_to == env.alice and "another adventure" in refusal.content.lower()
    assert len(fake_model.requests) == requests


async def test_forged_form_buttons_open_no_form_for_another_adventure(env: DiscordEnv, fake_model):
    """A modified client can send any ``custom_id``: one naming an older adventure here, or a
    number no adventure can have, is refused at the press, privately, and plays nothing (a
    form already open when its adventure ended is refused when sent: the test above)."""
    old = await env.start_thread()
    thread = await env.start_thread()
    theirs = await env.bot.services.play.adventure_in(old)
    assert theirs is not None
    newest = [m for m in env.fake.messages(thread) if m.buttons][-1]
    requests = len(fake_model.requests)
    for custom_id in (f"cf:act:do:{theirs.adventure_id}", "cf:act:say:" + "9" * 40):
        refused = await press_forged(env, env.bob, newest, custom_id)
        assert refused.modal is None, custom_id
        assert answer(env, refused).visible_to == env.bob, custom_id
        assert answer(env, refused).content.startswith("⚠"), custom_id
    assert len(fake_model.requests) == requests
