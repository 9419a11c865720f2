"""The fault trial's player sees what a player sees: an action played in a server thread is
recognised as played, and one that failed on the model plays after Retry, stored once.

The trial once counted every such action stuck: it looked for the DM's "> You open door 1."
where a server adventure names its actor ("> alice opens door 1.", since characters), so
it never saw an action play and sent it again and again. This runs one model fault of the
trial, in the trial's own code, on each backend: a drift between what the bot stores and what
the trial expects fails here, in the suite, not only when someone runs the trial.
"""

from __future__ import annotations

from tests.fakes.openai_server import FakeModelServer
from tests.trials.faults import MODEL_REPLY_SECONDS, MODEL_TIMEOUT, bot_settings
from tests.trials.live_faults import PROVIDER_FAULTS, campfire, provider_faults
from tests.trials.tally import Tally, stored_form


async def test_a_model_fault_then_retry_plays_once_and_is_seen_played(
    tmp_path, database_url, fake_model: FakeModelServer
):
    fake_model.default_text = "The road goes on into the dusk."
    settings = bot_settings(tmp_path, database_url, fake_model)
    tally, said = Tally(), []
    async with campfire(settings, tmp_path / "live.log") as live:
        # A plain action first: the trial must see it played as the player does.
        outcome = await live.act("look around", 20)
        assert outcome.finished
        assert outcome.answer == "> alice looks around." == live.stored_form("look around")
        assert outcome.played("look around")
        # Then the trial's first model fault (a 500), followed by Retry as the bot offers.
        limits = (MODEL_TIMEOUT, MODEL_REPLY_SECONDS)
        await provider_faults(live, fake_model, tally, limits, said.append, PROVIDER_FAULTS[:1])
    assert tally.line() == "faults: 1 injected, lost 0, half-written 0, duplicated 0, stuck 0"
    assert tally.told == {"> alice opens door 1."}, said
    assert "Retry offered; Retry; played" in said[0]
    assert not fake_model.errors


def test_a_dm_action_is_stored_in_the_second_person():
    # The kill-restart part of the trial plays in a DM.
    assert stored_form("cross bridge 1") == "> You cross bridge 1."
    assert stored_form("cross bridge 1", "alice") == "> alice crosses bridge 1."
