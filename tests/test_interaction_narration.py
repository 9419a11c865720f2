"""A turn asked for by an interaction narrates through it: the narration is a follow-up of the
interaction and is edited through its token, off the bot's global budget ("Interaction
endpoints are not bound to the bot's Global Rate Limit", discord-api-docs, Rate Limits); the
bot's own token takes over where the interaction's no longer answers, and a follow-up whose
answer was lost is never sent twice (``cogs.ui.narration_routes``). Real discord.py over the
stand-in, the fake model server behind the bot."""

from __future__ import annotations

from bot.standin.ratelimits import is_interaction_path
from bot.standin.routes_interactions import TOKEN_LIFETIME_S
from tests.discord_env import DiscordEnv, narration_under_way
from tests.fakes.openai_server import Reply

REPLY = "The reeds go quiet. Then, softly, the humming starts again, closer now."


def labels(message) -> list[str]:
    return [label or "" for label, _, _ in message.buttons]


async def test_a_slash_turn_narrates_as_a_follow_up_of_its_interaction(env: DiscordEnv, fake_model):
    thread = await env.start_thread()
    (opening,) = env.fake.messages(thread)
    fake_model.queue(Reply(text=REPLY, delay=0.01))
    since = len(env.fake.requests)
    record = await env.fake.slash(env.alice, thread, "do", action="follow the humming")
    await env.done()
    # Players see what they saw before: the action line, then the narration with its buttons.
    response, narration = [m for m in env.fake.messages(thread) if m.id != opening.id]
    assert response.id == record.original_message_id
    assert response.content == "> alice follows the humming."
    assert narration.content == REPLY and "Undo" in labels(narration)
    assert narration.followup and narration.interaction_id == record.id
    assert narration.edits, "streamed by edits"
    assert labels(env.fake.message(opening.id)) == []
    # One request on the bot's global budget: the buttons taken off the opening.
    spent = [
        f"{r.method} {r.path.rsplit('/api/v10', 1)[-1]}"
        for r in env.fake.requests[since:]
        if not is_interaction_path(r.path)
    ]
    assert spent == [f"PATCH /channels/{thread}/messages/{opening.id}"]


async def test_the_next_turn_takes_the_buttons_off_through_the_earlier_token(
    env: DiscordEnv, fake_model
):
    thread = await env.start_thread()
    fake_model.queue(Reply(text=REPLY, delay=0.01), Reply(text="The humming stops.", delay=0.01))
    first = await env.fake.slash(env.alice, thread, "do", action="follow the humming")
    await env.done()
    (narration,) = [env.fake.message(m) for m in first.followups]
    since = len(env.fake.requests)
    await env.fake.slash(env.alice, thread, "do", action="stop")
    await env.done()
    assert labels(env.fake.message(narration.id)) == []
    assert "Undo" in labels(env.fake.last_message(thread))
    # The whole turn through the interactions' tokens: nothing on the global budget.
    assert [r.path for r in env.fake.requests[since:] if not is_interaction_path(r.path)] == []
    took_off = f"/webhooks/{env.fake.world.application_id}/{first.token}/messages/{narration.id}"
    assert any(r.path.endswith(took_off) for r in env.fake.requests[since:])


async def test_a_token_that_expires_mid_narration_hands_over_to_the_bots_token(
    env: DiscordEnv, fake_model
):
    env.expect(50027)  # provoked: the token runs out while the narration streams
    thread = await env.start_thread()
    turn = await narration_under_way(env, fake_model, thread, words=80)
    story = " ".join(f"step{n}" for n in range(80)) + "."
    env.fake.advance(TOKEN_LIFETIME_S + 1)
    record = await turn
    await env.done()
    narration = env.fake.last_message(thread)
    assert narration.content == story and "Undo" in labels(narration)
    assert narration.followup and narration.interaction_id == record.id
    # Refused once; from then on the bot edits its own message in the channel.
    assert [r.code for r in env.fake.refused] == [50027]
    edits = [r for r in env.fake.requests if r.method == "PATCH" and r.status == 200]
    assert any(r.path.endswith(f"/channels/{thread}/messages/{narration.id}") for r in edits)


async def test_a_follow_up_whose_answer_was_lost_is_not_sent_twice(env: DiscordEnv, fake_model):
    thread = await env.start_thread()
    before = {m.id for m in env.fake.messages(thread)}
    fake_model.queue(Reply(text=REPLY, delay=0.01))
    env.fake.faults.lose_followup_answers(1)
    record = await env.fake.slash(env.alice, thread, "do", action="follow the humming")
    await env.done()
    assert len(env.fake.faults.injected) == 1, "the fault met the narration's follow-up"
    new = [m for m in env.fake.messages(thread) if m.id not in before and not m.is_response]
    # The follow-up made unanswered was found in the channel and finished, not made again.
    assert [m.content for m in new] == [REPLY]
    assert new[0].interaction_id == record.id and "Undo" in labels(new[0])
    # Found as the gateway told of it: no request, no Read Message History needed.
    history = f"/channels/{thread}/messages"
    assert not any(r.method == "GET" and history in r.path for r in env.fake.requests)
