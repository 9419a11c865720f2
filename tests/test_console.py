"""The console plays turns against the engine, shows them as they stream, and resumes."""

from __future__ import annotations

import pytest

from bot.config import load_settings
from bot.console import Console
from bot.services import build_services
from tests.fakes.openai_server import Reply


@pytest.fixture
async def services(tmp_path, fake_model, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no stray .env
    settings = load_settings(
        data_dir=tmp_path / "data", model_url=fake_model.base_url, model_name=fake_model.model
    )
    built = await build_services(settings)
    yield built
    await built.aclose()


async def test_playing_a_few_turns_in_the_console(services, fake_model, capsys):
    console = Console(services)
    await console._resume_or_start()
    assert "Lantern Road" in capsys.readouterr().out

    fake_model.queue("The lantern flares blue.", Reply(fault="500"), "Wenna waves from the inn.")
    assert await console.handle("light the lantern")
    out = capsys.readouterr().out
    assert "> You light the lantern." in out and "The lantern flares blue." in out

    assert await console.handle("/say Hello?")
    out = capsys.readouterr().out
    assert "internal error" in out and "/retry" in out
    assert await console.handle("/retry")
    out = capsys.readouterr().out
    assert '> You say "Hello?"' in out and "Wenna waves from the inn." in out

    assert await console.handle("/frobnicate")
    assert "Unknown command /frobnicate" in capsys.readouterr().out
    assert await console.handle("/quit") is False

    # A new console in the same data folder picks the story up where it was left.
    again = Console(services)
    await again._resume_or_start()
    assert "Wenna waves from the inn." in capsys.readouterr().out
    assert again.adventure_id == console.adventure_id
