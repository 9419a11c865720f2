"""Pronouns per character (issue: actions that read right): "/character set pronouns:", used
where the story tells a character's action in the third person, and told to the narrator in
the party section."""

from __future__ import annotations

import pytest

from engine.errors import InvalidInput
from engine.story.actions import ActionType, PlayerAction, format_action
from engine.story.pronouns import THEY, kept_pronouns, parse_pronouns, shown
from tests.discord_env import DiscordEnv
from tests.test_discord_characters import action_line, said


def _done(text: str, actor: str, pronouns: str = "") -> str:
    return format_action(PlayerAction(ActionType.DO, text, 1, actor, kept_pronouns(pronouns)))


@pytest.mark.parametrize(
    ("pronouns", "expected"),
    [
        ("", "> Ann raises their lantern and hides it behind themself."),
        ("she/her", "> Ann raises her lantern and hides it behind herself."),
        ("he/him", "> Ann raises his lantern and hides it behind himself."),
        ("It/Its", "> Ann raises its lantern and hides it behind itself."),
        ("xe/xem/xyr", "> Ann raises xyr lantern and hides it behind xemself."),
        ("ze/zir/zir/zirs/zirself", "> Ann raises zir lantern and hides it behind zirself."),
    ],
)
def test_a_characters_pronouns_replace_the_players_first_person(pronouns, expected):
    assert _done("raise my lantern and hide it behind myself", "Ann", pronouns) == expected


def test_quoted_words_and_the_solo_player_keep_their_own_person():
    assert _done('shout "my lantern is mine!" at her', "Ann", "he/him") == (
        '> Ann shouts "my lantern is mine!" at her.'
    )
    assert _done("lift my lantern", "You", "she/her") == "> You lift your lantern."
    assert _done("give it back, it is mine", "Ann", "she/her") == (
        "> Ann gives it back, it is hers."
    )


def test_pronouns_are_read_as_players_write_them_and_refused_clearly():
    assert parse_pronouns("") == THEY and kept_pronouns("they/them") == ""
    assert shown(kept_pronouns("She / Her")) == "she/her"
    assert shown(kept_pronouns("he/his")) == "he/him"
    for typed in ("she/him", "a/b/c/d", "<@123>", "x" * 41, "she/her/" + "a" * 20):
        with pytest.raises(InvalidInput):
            kept_pronouns(typed)


async def test_pronouns_set_through_discord_write_the_action_and_reach_the_party(
    env: DiscordEnv, fake_model
):
    thread = await env.start_thread()
    content, card = await said(
        env,
        await env.fake.slash(
            env.alice, thread, "character set", name="Ann", about="A ranger.", pronouns="she/her"
        ),
    )
    assert "You play Ann" in content
    refused, _ = await said(
        env, await env.fake.slash(env.bob, thread, "character set", name="Bram", pronouns="b/c")
    )
    assert refused.startswith("⚠") and "she/her, he/him" in refused

    fake_model.queue("The lantern flares.")
    raised = await env.fake.slash(env.alice, thread, "do", action="raise my lantern")
    await env.done()
    assert action_line(env, raised) == "> Ann raises her lantern."
    system = fake_model.requests[-1]["messages"][0]["content"]
    assert "Ann (she/her): A ranger." in system

    # Setting the name again keeps the pronouns; only what is given changes.
    await said(env, await env.fake.slash(env.alice, thread, "character set", name="Annika"))
    fake_model.queue("The lantern dims.")
    lowered = await env.fake.slash(env.alice, thread, "do", action="lower my lantern")
    await env.done()
    assert action_line(env, lowered) == "> Annika lowers her lantern."
