"""The console: `python -m bot` with no token, driven by a scripted standard input."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.fakes.openai_server import Reply


def run_console(tmp_path, fake_model, script: str, *args: str) -> subprocess.CompletedProcess:
    """``python -m bot [args]`` with no token (so the console), fed ``script``."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("CAMPFIRE_") and key != "DISCORD_TOKEN"
    }
    env |= {
        "CAMPFIRE_DATA_DIR": str(tmp_path / "data"),
        "CAMPFIRE_MODEL_URL": fake_model.base_url,
        "CAMPFIRE_MODEL_NAME": fake_model.model,
        # This checkout's code, whatever copy of Campfire the interpreter has installed.
        "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
    }
    return subprocess.run(
        [sys.executable, "-m", "bot", *args],
        input=script,
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )


def test_the_console_plays_two_turns_and_a_button(tmp_path, fake_model):
    fake_model.queue(
        Reply(text="The lantern flares blue; the humming stops.", delay=0.01),
        "A small wax figure bows to you from the reeds.",
        "It beckons you toward the fallen milestone.",
    )
    done = run_console(
        tmp_path,
        fake_model,
        "/do light the lantern\n/say Who hums there?\n!continue\n/dance\n/insights turn:1\n/quit\n",
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    # The starter scenario opened by itself, then each turn in order, with its buttons.
    order = [
        "The Lantern Road",
        "Dusk settles over the valley",
        "› /do light the lantern",
        "> You light the lantern.",
        "The lantern flares blue; the humming stops.",
        '> You say "Who hums there?"',
        "A small wax figure bows to you from the reeds.",
        "⏩ *Player lets the story go on.*",
        "It beckons you toward the fallen milestone.",
        "⚠ There is no /dance command.",
    ]
    positions = [out.index(piece) for piece in order]
    assert positions == sorted(positions)
    assert "[1 Continue]" in out
    assert "and the console's own: /as (with --server), /quit." in out
    # Insights: the embed as text, and its prompt file saved where the player can open it.
    assert "(only you can see this)" in out[out.index("› /insights turn:1") :]
    saved = next((tmp_path / "data" / "console-files").glob("*-turn-1-prompt.txt"))
    assert "> You light the lantern." in saved.read_text()
    assert f"📎 turn-1-prompt.txt → {saved}" in out
    # Streaming marks never reach a pipe: each message is printed once, final.
    assert "▌" not in out
    assert out.count("The lantern flares blue; the humming stops.") == 1


def test_the_console_resumes_the_adventure_in_its_data_folder(tmp_path, fake_model):
    fake_model.queue("The reeds rustle.")
    first = run_console(tmp_path, fake_model, "/do listen\n")
    assert first.returncode == 0, first.stderr
    second = run_console(tmp_path, fake_model, "")
    assert second.returncode == 0, second.stderr
    assert "Resuming your adventure" in second.stdout
    assert "The reeds rustle." in second.stdout


def test_forms_keep_what_they_hold_ask_again_for_what_is_required_and_can_be_closed(
    tmp_path, fake_model
):
    fake_model.queue("The heron watches you.")
    script = (
        "/do wave\n"
        # /edit's form holds the turn's text: Enter keeps it (so nothing changes).
        "/edit\n\n"
        # A required field left blank is asked again; /cancel closes the form unsent.
        "/card add\n\n/cancel\n"
        "/edit\nThe heron bows.\n"
        # Ctrl-D in a form closes it too, and the console ends as it does at the prompt.
        "/savepoint add name:frog key\n"
        "/card add\nWenna\n"
    )
    done = run_console(tmp_path, fake_model, script)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "Turn text now: The heron watches you." in out
    assert "⚠ The text is unchanged; nothing was saved." in out
    assert "⚠ Title is required: type it, or /cancel." in out
    assert out.count("(The form was closed: nothing was sent.)") == 2
    assert "Keys (comma-separated):" in out  # the field's hint, as Discord shows it
    # An option's value with spaces, unquoted: the console says how to write it.
    assert 'put a value with spaces in quotes, e.g. name:"frog key"' in out
    assert "✏️ *Player corrected the newest turn" in out
    assert "Traceback" not in done.stderr


async def test_a_turn_longer_than_any_wait_limit_is_waited_for_and_said_to_run(
    tmp_path, fake_model, monkeypatch
):
    """The console once waited 60 s for a turn (``StandIn.idle``'s default) and died with a
    traceback past it. Now it waits however long the turn takes, saying it is still running,
    and takes the next line after. The times are shortened here; the wait has no limit."""
    import asyncio
    import io

    from bot.config import load_settings
    from bot.console import app

    monkeypatch.setattr(app, "STILL_RUNNING_AFTER", 0.4, raising=False)
    monkeypatch.setattr(app, "STILL_RUNNING_EVERY", 0.4, raising=False)
    # About 2 s of streaming: longer than the notes' interval, as a slow model is than 60 s.
    fake_model.queue(
        Reply(text="The answer comes at last, word by slow word.", delay=0.15), "Then dawn."
    )
    settings = load_settings(
        data_dir=tmp_path / "data", model_url=fake_model.base_url, model_name=fake_model.model
    )
    out = io.StringIO()
    stdin = io.StringIO("/do ask the oracle\n/do wait\n/quit\n")
    await asyncio.wait_for(app.run_console(settings, stdin=stdin, out=out), timeout=60)
    text = out.getvalue()
    turn = text[text.index("› /do ask the oracle") :]
    assert "(The turn is still running: " in turn
    order = ["(The turn is still running: ", "word by slow word.", "› /do wait", "Then dawn."]
    positions = [turn.index(piece) for piece in order]
    assert positions == sorted(positions)
