"""The console: `python -m bot` with no token, driven by a scripted standard input."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.fakes.openai_server import Reply


def console_env(tmp_path, fake_model) -> dict[str, str]:
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
    return env


def run_console(tmp_path, fake_model, script: str, *args: str) -> subprocess.CompletedProcess:
    """``python -m bot [args]`` with no token (so the console), fed ``script``."""
    return subprocess.run(
        [sys.executable, "-m", "bot", *args],
        input=script,
        capture_output=True,
        text=True,
        env=console_env(tmp_path, fake_model),
        cwd=tmp_path,
        timeout=120,
    )


class Interrupted:
    """A console sent Ctrl-C (SIGINT, as a terminal sends it) once ``ready`` says so."""

    def __init__(self, tmp_path, fake_model, typed: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bot"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=console_env(tmp_path, fake_model),
            cwd=tmp_path,
            # As a terminal's program gets it: Python turns SIGINT into KeyboardInterrupt
            # (a process started in the background of a shell would ignore it).
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        self.out: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        assert self.process.stdin is not None
        self.process.stdin.write(typed)
        self.process.stdin.flush()  # and left open, as a terminal's is

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.out.append(line)

    def interrupt_when(self, ready, timeout: float = 60) -> tuple[int, str, float]:
        """Ctrl-C once ``ready()``; the exit status, what it printed, and how long it took
        to end after the Ctrl-C."""
        deadline = time.monotonic() + timeout
        while not ready():
            assert time.monotonic() < deadline, "".join(self.out)
            time.sleep(0.05)
        self.process.send_signal(signal.SIGINT)
        sent = time.monotonic()
        self.process.wait(timeout=30)
        took = time.monotonic() - sent
        self.reader.join(timeout=5)
        return self.process.returncode, "".join(self.out), took


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
        "⏩ You let the story go on.",
        "It beckons you toward the fallen milestone.",
        "⚠ There is no /dance command.",
    ]
    positions = [out.index(piece) for piece in order]
    assert positions == sorted(positions)
    assert "[1 !continue]" in out
    assert "and the console's own: /as (with --server), /quit." in out
    # Insights: the embed as text, and its prompt file saved where the player can open it.
    assert "(only you can see this)" in out[out.index("› /insights turn:1") :]
    saved = next((tmp_path / "data" / "console-files").glob("*-turn-1-prompt.txt"))
    assert "> You light the lantern." in saved.read_text()
    assert f"📎 turn-1-prompt.txt → {saved}" in out
    # Streaming marks never reach a pipe: each message is printed once, final.
    assert "▌" not in out
    assert out.count("The lantern flares blue; the humming stops.") == 1


@pytest.mark.usefixtures("installed_data_dir")
def test_the_console_resumes_the_adventure_in_its_data_folder(tmp_path, fake_model):
    fake_model.queue("The reeds rustle.")
    first = run_console(tmp_path, fake_model, "/do listen\n")
    assert first.returncode == 0, first.stderr
    second = run_console(tmp_path, fake_model, "")
    assert second.returncode == 0, second.stderr
    assert "Resuming your adventure" in second.stdout
    assert "The reeds rustle." in second.stdout


def test_data_dir_sets_the_data_folder_for_the_run(tmp_path, fake_model):
    """``console --data-dir PATH`` keeps this run's database, logs and files in PATH, as
    CAMPFIRE_DATA_DIR would (the environment names another folder here)."""
    mine = tmp_path / "mine"
    fake_model.queue("The reeds rustle.")
    first = run_console(tmp_path, fake_model, "/do listen\n", "console", "--data-dir", str(mine))
    assert first.returncode == 0, first.stderr
    assert {"campfire.db", "campfire.log", "secret.key"} <= {p.name for p in mine.iterdir()}
    assert not (tmp_path / "data").exists()
    again = run_console(tmp_path, fake_model, "", "console", "--data-dir", str(mine))
    assert "Resuming your adventure" in again.stdout and "The reeds rustle." in again.stdout
    # Without it, the setting's folder: a story of its own.
    elsewhere = run_console(tmp_path, fake_model, "", "console")
    assert elsewhere.returncode == 0, elsewhere.stderr
    assert "Resuming" not in elsewhere.stdout and (tmp_path / "data" / "campfire.db").exists()


@pytest.mark.usefixtures("installed_data_dir")
def test_the_opening_names_the_embedded_model_only_while_it_runs(tmp_path, fake_model):
    """On the embedded model the console says, before the story, what that model is, how slow
    a first turn is, and the one line to a real model; on another model it says nothing of it.
    Nothing here asks the embedded model for a turn: the opening is the scenario's own."""
    from cogs.help import EMBEDDED_MODEL_NOTE

    env = console_env(tmp_path, fake_model)
    del env["CAMPFIRE_MODEL_URL"], env["CAMPFIRE_MODEL_NAME"]
    done = subprocess.run(
        [sys.executable, "-m", "bot"],
        input="/quit\n",
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.index("Campfire console:") < out.index(EMBEDDED_MODEL_NOTE) < out.index("begins")
    assert "SmolLM2 (135M parameters)" in EMBEDDED_MODEL_NOTE
    assert "30–50 s on two cores" in EMBEDDED_MODEL_NOTE
    assert "CAMPFIRE_MODEL_URL=http://localhost:11434/v1" in EMBEDDED_MODEL_NOTE
    assert fake_model.requests == []
    other = run_console(tmp_path, fake_model, "/quit\n")
    assert other.returncode == 0, other.stderr
    assert "SmolLM2" not in other.stdout and "Resuming your adventure" in other.stdout


@pytest.mark.usefixtures("installed_data_dir")
def test_after_a_restart_the_newest_turn_has_its_buttons_again(tmp_path, fake_model):
    """The stand-in starts empty each run: the bot sends the newest turn again with its
    buttons, as it does in Discord when the message that had them is gone."""
    fake_model.queue("The reeds rustle.")
    first = run_console(tmp_path, fake_model, "/do listen\n")
    assert first.returncode == 0, first.stderr
    fake_model.queue("The reeds whisper your name.", "A heron lands beside you.")
    second = run_console(tmp_path, fake_model, "!Retry\n!Continue\n")
    assert second.returncode == 0, second.stderr
    out = second.stdout
    assert "No message here has a button" not in out
    order = [
        "(Resuming your adventure where you left it.)",
        "> You listen.",
        "The reeds rustle.",
        "[1 !continue]  [2 !retry]",
        "› !Retry",
        "The reeds whisper your name.",
        "› !Continue",
        "⏩ You let the story go on.",
        "A heron lands beside you.",
    ]
    positions = [out.index(piece) for piece in order]
    assert positions == sorted(positions), out
    # The newest turn is shown once, on the message with its buttons.
    assert out[: out.index("› !Retry")].count("The reeds rustle.") == 1, out
    assert len(fake_model.requests) == 3


@pytest.mark.usefixtures("installed_data_dir")
def test_redo_shows_the_turn_it_brings_back(tmp_path, fake_model):
    fake_model.queue("The heron watches you.")
    done = run_console(tmp_path, fake_model, "/do wave\n/undo\n/redo\n")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    undone = out[out.index("› /undo") : out.index("› /redo")]
    # The console is a DM: the player's own moves are theirs, in the second person.
    assert "↩️ You undid the last turn." in undone and "The heron watches you." in undone
    redone = out[out.index("› /redo") :]
    assert "↪️ You brought the turn back." in redone
    # The turn's text again, as Discord shows the message once its mark is taken off.
    assert "✎ The heron watches you." in redone, out


@pytest.mark.usefixtures("installed_data_dir")
def test_an_unknown_scenario_is_answered_with_the_scenarios_there_are(tmp_path, fake_model):
    done = run_console(tmp_path, fake_model, "/start scenario:doesnotexist\n")
    assert done.returncode == 0, done.stderr
    out = done.stdout[done.stdout.index("› /start scenario:doesnotexist") :]
    assert "No scenario matches “doesnotexist”. Scenarios: " in out
    assert "“The Lantern Road”" in out
    assert "Start typing" not in out  # there is no autocomplete list in a console


@pytest.mark.usefixtures("installed_data_dir")
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
    # The field's hint, as Discord greys it in the empty box: an example, never a value.
    assert "(Keys (comma-separated), for example: " in out
    assert "Keys (comma-separated): Wenna, innkeeper" not in out
    # An option's value with spaces, unquoted, runs to the next option, as in Discord's box.
    assert "⚑ Save point “frog key” made here" in out
    assert "✏️ You corrected the newest turn" in out
    assert "Traceback" not in done.stderr


@pytest.mark.usefixtures("installed_data_dir")
def test_ctrl_c_mid_turn_saves_nothing_says_so_and_the_next_start_offers_it_again(
    tmp_path, fake_model
):
    fake_model.queue(Reply(text="The heron wades closer. " * 60, delay=0.1))
    console = Interrupted(tmp_path, fake_model, "/do wait and listen\n")
    code, out, took = console.interrupt_when(lambda: len(fake_model.requests) >= 1)
    assert code == 130 and took < 10, (code, took)
    assert "(Stopped. What the bot was doing was cut off and nothing of it was saved" in out
    assert "The heron wades closer." not in out  # nothing of the turn was shown as done

    # The next start says what was cut off, with its Retry, which plays it.
    fake_model.queue("The heron bows.")
    again = run_console(tmp_path, fake_model, "!Retry\n")
    assert again.returncode == 0, again.stderr
    assert "⚠ The turn for “wait and listen” was interrupted when the bot stopped" in again.stdout
    assert "> You wait and listen." in again.stdout and "The heron bows." in again.stdout
    assert "Traceback" not in again.stderr


@pytest.mark.usefixtures("installed_data_dir")
def test_after_a_cut_off_turn_retry_plays_it_not_another_take_of_the_turn_before(
    tmp_path, fake_model
):
    """Both the resumed newest turn and the notice of the turn cut off have a Retry: the
    notice comes below, as in Discord, so ``!Retry`` (the newest) plays the cut-off turn."""
    fake_model.queue("The reeds rustle.", Reply(text="The heron wades closer. " * 60, delay=0.1))
    console = Interrupted(tmp_path, fake_model, "/do listen\n/do wait\n")
    code, _, _ = console.interrupt_when(lambda: len(fake_model.requests) >= 2)
    assert code == 130

    fake_model.queue("The heron bows.")
    again = run_console(tmp_path, fake_model, "!Retry\n")
    assert again.returncode == 0, again.stderr
    out = again.stdout
    order = [
        "The reeds rustle.\n  [1 !continue]  [2 !retry]",
        "⚠ The turn for “wait” was interrupted when the bot stopped",
        "› !Retry",
        "> You wait.",
        "The heron bows.",
    ]
    positions = [out.index(piece) for piece in order]
    assert positions == sorted(positions), out
    assert "Retried" not in out  # no other take of "listen" was asked for


@pytest.mark.usefixtures("installed_data_dir")
def test_ctrl_c_at_the_prompt_ends_the_console_at_once(tmp_path, fake_model):
    console = Interrupted(tmp_path, fake_model, "")
    code, out, took = console.interrupt_when(lambda: "begins" in "".join(console.out))
    # "At once" against waiting out the turn or hanging: a loaded two-core CI machine has taken
    # just over 5 s to start and stop the process, so the bound leaves room for that.
    assert code == 130 and took < 8, (code, took, out)


@pytest.mark.usefixtures("installed_data_dir")
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


@pytest.mark.usefixtures("installed_data_dir")
async def test_the_loop_runs_on_while_the_console_waits_for_a_line(tmp_path, fake_model):
    """The console waits for the next line off the event loop: the bot's gateway, heartbeats
    and timers run on meanwhile (a blocking read once left the websocket 41 s behind)."""
    import asyncio
    import io

    from bot.config import load_settings
    from bot.console import app

    settings = load_settings(
        data_dir=tmp_path / "data", model_url=fake_model.base_url, model_name=fake_model.model
    )
    read_end, write_end = os.pipe()
    out = io.StringIO()
    loop = asyncio.get_running_loop()
    lags: list[float] = []

    async def ticker() -> None:
        while True:
            started = loop.time()
            await asyncio.sleep(0.05)
            lags.append(loop.time() - started - 0.05)

    with os.fdopen(read_end, "r") as stdin:
        console = asyncio.create_task(app.run_console(settings, stdin=stdin, out=out))
        ticking = asyncio.create_task(ticker())
        for _ in range(600):
            if "begins" in out.getvalue():
                break
            await asyncio.sleep(0.05)
        lags.clear()
        await asyncio.sleep(2.0)  # nothing typed: the console waits for its line
        os.write(write_end, b"/quit\n")
        os.close(write_end)
        await asyncio.wait_for(console, 60)
        ticking.cancel()
    assert lags and max(lags) < 0.5, max(lags)
