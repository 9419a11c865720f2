"""The console as a group: `python -m bot console --server`, members switched with /as, the
adventure's thread followed after /start; driven by a scripted standard input."""

from __future__ import annotations

from tests.fakes.openai_server import Reply
from tests.test_console import run_console


def test_a_group_plays_in_the_thread_start_opens(tmp_path, fake_model):
    fake_model.queue(
        Reply(text="Ann's lantern flares blue.", delay=0.01),
        "Bob's whistle answers from the reeds.",
        "A heron lifts off the water.",
    )
    script = "\n".join(
        [
            "/as",
            "/start",
            "/as ann",
            "/do light the lantern",
            "/as bob",
            "/do whistle back",
            "/as ann",
            "!continue",
            "/as bob",
            "/undo",
            "/as",
            "/as b o b",
            "/quit",
            "",
        ]
    )
    done = run_console(tmp_path, fake_model, script, "console", "--server")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    order = [
        "you are in #adventures of a server you own",
        "Player › /as",
        "Members: Player. Typing now: Player.",
        "Player › /start",
        "The Lantern Road begins in #",  # the thread's mention, shown by its name
        "(Following the adventure into its thread #",
        "Dusk settles over the valley",  # the opening, in the thread
        "Player › /as ann",
        "(Typing as ann, who joins the server now as a plain member.)",
        "ann › /do light the lantern",
        "> ann lights the lantern.",
        "Ann's lantern flares blue.",
        "bob › /do whistle back",
        "Bob's whistle answers from the reeds.",
        "ann › !continue",
        "⏩ ann lets the story go on.",
        "A heron lifts off the water.",
        "bob › /undo",
        "Only the player who wrote that turn",
        "(only bob can see this)",
        "Members: Player, ann, bob. Typing now: bob.",
        "⚠ A member's name is",
    ]
    positions = [out.index(piece) for piece in order]
    assert positions == sorted(positions), out
    # Bob's refusal changed nothing: three narrations, each once, and the model was asked
    # for exactly those three.
    assert len(fake_model.requests) == 3
    assert out.count("A heron lifts off the water.") == 1
    # Each member's action reached the narrator under their name, with the turn it asked for.
    prompts = [str(request) for request in fake_model.requests]
    assert "> ann lights the lantern." in prompts[0]
    assert "> bob whistles back." in prompts[1]


def test_the_group_console_takes_its_thread_up_again_on_the_next_run(tmp_path, fake_model):
    fake_model.queue("The reeds rustle.", "The heron comes back.")
    first = run_console(
        tmp_path, fake_model, "/start\n/as ann\n/do listen\n", "console", "--server"
    )
    assert first.returncode == 0, first.stderr
    second = run_console(tmp_path, fake_model, "/as ann\n/do wait\n", "console", "--server")
    assert second.returncode == 0, second.stderr
    out = second.stdout
    assert "(Resuming the adventure in #" in out
    assert out.index("The reeds rustle.") < out.index("ann › /do wait")
    assert "The heron comes back." in out[out.index("ann › /do wait") :]


def test_as_belongs_to_the_server_console(tmp_path, fake_model):
    done = run_console(tmp_path, fake_model, "/as\n/as ann\n/quit\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("⚠ /as needs a server: start the console with --server.") == 2


def test_the_host_names_players_in_options_and_sees_them_by_name(tmp_path, fake_model):
    fake_model.queue("Ann waves at the heron.")
    script = "\n".join(
        [
            "/start",
            "/as ann",
            "/do wave",
            "/as Player",
            "/host mute player:ann",
            "/as ann",
            "/do run",
            "/as Player",
            "/host mute player:nobody",
            "/host show",
            "",
        ]
    )
    done = run_console(tmp_path, fake_model, script, "console", "--server")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    order = [
        "Player › /host mute player:ann",
        "Player muted ann",
        "ann › /do run",
        "You were muted in this adventure",
        "(only ann can see this)",
        "⚠ player: nobody here is called nobody",
        "Host: @Player",  # a mention, shown by name as Discord's client shows it
        "Muted: @ann",
    ]
    positions = [out.index(piece) for piece in order]
    assert positions == sorted(positions), out
    assert len(fake_model.requests) == 1  # the muted player's action asked the model nothing
