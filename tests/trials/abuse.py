"""Trial: a player abusing Campfire while two honest players play beside them.

    python -m tests.trials.abuse

Campfire on the Discord stand-in (real discord.py, SQLite), the fake model server behind it.
Two honest players play in their own DMs all along; first alone (their unloaded turn time),
then while the attacks below run one after another:

* the budget: 30 turns fired at once in a server thread whose server has little budget left
  (each turn reserves its window as it is admitted: together they must not pass the cap);
* the operator's ceilings: a host sets a context of 1,000,000 tokens and replies of 32,768 and
  plays (the model must be asked for the operator's reply length, no more);
* blocks: a blocked player's /do, plain message in their DM, and a Do form opened before the
  block and sent after it;
* host controls: a kicked player's /do, plain message and character;
* a hostile endpoint a DM player sets (/model set): one event line that never ends, and a 500
  whose body never ends; and /model test flooded;
* the shared script workers: a plain member uploading a file built to parse slowly (refused by
  the right, before any parsing), a DM player uploading it (refused at the parse bound), and a
  DM player whose scripts loop to their time limit on every turn, turn after turn (the honest
  players' turns run a script too, so they need the same workers: a fair share each);
* spend that used to go uncounted: turns that fail after the model was asked (a disconnect, a
  stream gone silent), and an imported file whose entries claim to cost 0 tokens (its prompt
  must stay within the context budget).

Its last line:
``abuse: <N> attacks, over cap <T> tokens, blocked plays <B>, honest turn p95 <s> s (alone <s> s),
peak memory <MB> MB``. It exits 1 when any spend passed a cap, a blocked or kicked player's
action played, a ceiling was passed, the honest p95 grew past 3× its unloaded value, or memory
grew more than 300 MB over the start.

Outside the test run: pytest collects ``test_*.py`` files only. Script workers import this
module as their main module (multiprocessing's spawn), so it imports only the standard library
at the top; Campfire is imported by ``trial``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HONEST_TURNS_ALONE = 6
#: Each honest reply streams over about half a second, as a small hosted model would.
HONEST_CHUNK_DELAY = 0.04
SERVER_CAP = 3_000
USER_CAP = 50_000
CONTEXT_TOKENS = 1_024
MAX_OUTPUT_TOKENS = 200
P95_FACTOR = 3.0
MEMORY_LIMIT_MB = 300.0
MARK = "ZEBRA-CROSSING"  # in every action that must not play
#: The honest players' script (every turn runs it in the shared workers).
HONEST_SCRIPT = b"const modifier = (text) => ({ text: text.trim() }); modifier(text);"
#: The attacker's: every run spends its whole time limit.
LOOPING_SCRIPT = b"const modifier = (text) => { while (true) {} }; modifier(text);"
LOOPING_TURNS = 3


@dataclass
class Findings:
    attacks: int = 0
    over_cap_tokens: int = 0
    blocked_plays: int = 0
    problems: list[str] = field(default_factory=list)

    def attack(self, name: str) -> None:
        self.attacks += 1
        print(f"attack {self.attacks}: {name}", flush=True)


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _peak_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _p95(seconds: list[float]) -> float:
    if len(seconds) < 2:
        return max(seconds, default=0.0)
    return statistics.quantiles(seconds, n=20, method="inclusive")[-1]


class Honest:
    """Two players playing in their own DMs, turn after turn, each turn timed."""

    def __init__(self, fake: Any, bot: Any, players: list[int]) -> None:
        self.fake, self.bot, self.players = fake, bot, players
        self.times: list[float] = []
        self.failures: list[str] = []
        self.playing = True
        #: Cleared while the trial waits for an attack's effects to settle (the stand-in's
        #: idle waits for every handler, and honest turns would never let it be).
        self.go = asyncio.Event()
        self.go.set()

    def newest(self, channel: int) -> Any:
        mine = [
            m
            for m in self.fake.messages(channel)
            if m.author_id == self.bot.user.id and not m.is_response and not m.ephemeral
        ]
        return mine[-1] if mine else None

    async def turn(self, player: int, number: int) -> None:
        """One /do, timed from the command to the turn's final edit (its buttons come with
        it)."""
        dm = self.fake.dm_channel(player)
        before = self.newest(dm)
        started = time.perf_counter()
        record = await self.fake.slash(player, dm, "do", action=f"walk on ({number})")
        deadline = started + 60
        while True:
            newest = self.newest(dm)
            if newest is not None and newest is not before and newest.buttons:
                break
            if time.perf_counter() > deadline:
                ids = [record.original_message_id, *record.followups]
                said = [self.fake.message(i).content for i in ids if i is not None]
                self.failures.append(f"player {player}'s turn {number} never came: {said}")
                return
            await asyncio.sleep(0.02)
        self.times.append(time.perf_counter() - started)

    async def play(self, rounds: int | None = None) -> None:
        """Both play a turn at once, again and again (``rounds`` times, or until stopped)."""
        number = 0
        while self.playing and (rounds is None or number < rounds):
            await self.go.wait()
            number += 1
            await asyncio.gather(*(self.turn(p, number) for p in self.players))
            await asyncio.sleep(0.2)


async def _tokens_of(bot: Any, user: int) -> int:
    """The tokens counted today against ``user``."""
    from sqlalchemy import func, select

    from engine.storage.limit_models import TokenUse

    async with bot.services.db.session() as session:
        spent = await session.scalar(
            select(func.sum(TokenUse.tokens)).where(
                TokenUse.scope == "user", TokenUse.subject_id == user
            )
        )
    return int(spent or 0)


async def trial() -> tuple[Findings, float, float, float]:
    from sqlalchemy import select

    from bot.config import load_settings
    from bot.discord_bot import CampfireBot
    from bot.standin import StandIn
    from bot.standin.gateway import INTENT_MESSAGE_CONTENT
    from bot.standin.interactions import StandinFile
    from engine.storage.limit_models import TokenUse
    from tests.fakes.openai_server import FakeModelServer, Reply
    from tests.fakes.static_server import endless_server

    findings = Findings()
    with tempfile.TemporaryDirectory() as folder, FakeModelServer() as model:
        model.default_text = "The road runs on between the hills, and the lanterns hum."
        model.default_delay = HONEST_CHUNK_DELAY
        config = load_settings(
            data_dir=Path(folder) / "data",
            database_url=f"sqlite+aiosqlite:///{Path(folder) / 'trial.db'}",
            model_url=model.base_url,
            model_name=model.model,
            model_timeout=5,
            server_tokens_per_day=SERVER_CAP,
            user_tokens_per_day=USER_CAP,
            context_tokens=CONTEXT_TOKENS,
            max_output_tokens=MAX_OUTPUT_TOKENS,
            message_content=True,
            # The hostile endpoints of this trial listen on this machine.
            allow_private_endpoints=True,
            # The rate limits let all 30 turns at once through: the budget alone must hold.
            turns_per_user_per_minute=60,
            turns_per_adventure_per_minute=60,
        )
        bot = CampfireBot(config)
        standin = StandIn(bot)
        fake = standin.fake
        fake.gateway.privileged_intents |= INTENT_MESSAGE_CONTENT
        guild = fake.add_guild("Trial")
        channel = fake.add_channel(guild, "adventures")
        owner = fake.world.guilds[guild].owner_id
        host = fake.add_user("host", member_of=[guild], manage_guild=True)
        mallory = fake.add_user("mallory", member_of=[guild])
        honest = [fake.add_user(f"honest{n}", member_of=[guild]) for n in (1, 2)]
        async with standin:
            for player in honest:
                await fake.slash(player, fake.dm_channel(player), "start")
                # A small script on every turn: their turns use the shared script workers.
                await fake.slash(
                    player,
                    fake.dm_channel(player),
                    "script upload",
                    hook="output",
                    file=StandinFile("tidy.js", HONEST_SCRIPT, "text/javascript"),
                )
            await standin.idle()
            start_mb = _rss_mb()
            players = Honest(fake, bot, honest)
            await players.play(1)  # the first turns after start are not typical
            players.times.clear()
            await players.play(HONEST_TURNS_ALONE)
            alone = _p95(players.times)
            players.times.clear()
            playing = asyncio.create_task(players.play())

            async def settled() -> None:
                """Until the attack's effects are whole (honest play resumes after: each
                attack starts while honest turns are being written)."""
                players.go.clear()
                try:
                    await standin.idle()
                finally:
                    players.go.set()

            async def answer_of(record: Any) -> str:
                await settled()
                ids = [*record.followups, record.original_message_id]
                texts = [fake.message(i).content for i in ids if i is not None]
                return texts[0] if record.followups else (texts[-1] if texts else "")

            async def answered(record: Any) -> str:
                """The interaction's answer so far ("" while it has none)."""
                ids = [record.original_message_id, *record.followups]
                texts = [fake.message(i).content for i in ids if i is not None]
                return next((text for text in reversed(texts) if text.strip()), "")

            def played(mark: str = MARK) -> bool:
                return mark in str(model.requests)

            # --- the budget: many turns at once against a server's cap ---
            findings.attack("30 turns fired at once against the server's budget")
            await fake.slash(host, channel, "start")
            await settled()
            thread = fake.threads(channel)[-1]
            await asyncio.gather(
                *(fake.slash(mallory, thread, "do", action=f"grab {n}") for n in range(30))
            )
            await settled()

            # --- the operator's ceilings ---
            findings.attack("a host's settings past the operator's ceilings")
            await fake.slash(owner, fake.dm_channel(owner), "start")
            await settled()
            owner_dm = fake.dm_channel(owner)
            await fake.slash(
                owner,
                owner_dm,
                "adventure settings",
                context_tokens=1_000_000,
                max_output_tokens=32_768,
            )
            await settled()
            asked = len(model.requests)
            await fake.slash(owner, owner_dm, "do", action="look far")
            await settled()
            for request in model.requests[asked:]:
                if request.get("max_tokens", 0) > MAX_OUTPUT_TOKENS:
                    findings.problems.append(f"a reply of {request['max_tokens']} was asked for")

            # --- blocks ---
            findings.attack("a blocked player's /do, message and an old form")
            eve = fake.add_user("eve", member_of=[guild])
            eve_dm = fake.dm_channel(eve)
            await fake.slash(eve, eve_dm, "start")
            await settled()
            newest = [m for m in fake.messages(eve_dm) if m.buttons][-1]
            form = await fake.press(eve, newest.id, label="Do")
            await settled()
            await fake.slash(owner, owner_dm, "operator block", user=eve)
            await settled()
            await fake.slash(eve, eve_dm, "do", action=f"{MARK} run")
            await fake.user_message(eve, eve_dm, f"{MARK} shout")
            await settled()
            if form.modal is not None:
                await fake.submit_modal(eve, form, {"action": f"{MARK} sneak"})
            await settled()
            findings.blocked_plays += played()

            # --- host controls ---
            findings.attack("a kicked player's /do, message and character")
            await fake.slash(host, thread, "host kick", player=mallory)
            await settled()
            await fake.slash(mallory, thread, "character set", name=MARK, about=MARK)
            await fake.slash(mallory, thread, "do", action=f"{MARK} steal")
            await fake.slash(host, thread, "adventure settings", messages="on")
            await fake.user_message(mallory, thread, f"{MARK} whisper")
            await settled()
            findings.blocked_plays += played()

            # --- a hostile endpoint ---
            trudy = fake.add_user("trudy", member_of=[guild])
            trudy_dm = fake.dm_channel(trudy)
            await fake.slash(trudy, trudy_dm, "start")
            await settled()
            line = b'data: {"choices": [{"index": 0, "delta": {"content": "'
            for name, status, kind, head, filler in (
                ("an event line that never ends", 200, "text/event-stream", line, b"a" * 65536),
                ("a 500 whose body never ends", 500, "application/json", b'{"e": "', b"x" * 65536),
            ):
                findings.attack(f"a hostile endpoint: {name}")
                with endless_server(status, kind, head, filler) as (url, _):
                    await fake.slash(trudy, trudy_dm, "model set", url=url, model="any")
                    await settled()
                    record = await fake.slash(trudy, trudy_dm, "do", action="look")
                    reply = await answer_of(record)
                    if not reply:
                        findings.problems.append(f"{name}: the turn was not answered")
            findings.attack("/model test flooded")
            with endless_server(500, "application/json", b"{", b" ") as (url, sent):
                await fake.slash(trudy, trudy_dm, "model set", url=url, model="any")
                await settled()
                for _ in range(20):
                    await fake.slash(trudy, trudy_dm, "model test")
                await settled()
                if len(sent) > 4:
                    findings.problems.append(f"/model test reached the endpoint {len(sent)} times")

            # --- the shared script workers ---
            slow = "".join(f"var v{i};" for i in range(213_000)).encode()
            findings.attack("a plain member uploads a script built to parse slowly")
            started = time.perf_counter()
            record = await fake.slash(
                mallory,
                thread,
                "script upload",
                hook="library",
                file=StandinFile("slow.js", slow, "text/javascript"),
            )
            while not await answered(record) and time.perf_counter() - started < 30:  # noqa: ASYNC110 - polls the stand-in's records
                await asyncio.sleep(0.02)
            if time.perf_counter() - started > 3:
                findings.problems.append("a plain member's upload was parsed before refused")
            await settled()
            findings.attack("a DM player uploads it")
            await fake.slash(
                trudy,
                trudy_dm,
                "script upload",
                hook="library",
                file=StandinFile("slow.js", slow, "text/javascript"),
            )
            await settled()

            # --- a DM player's scripts looping to their limit, turn after turn ---
            findings.attack("a DM player's scripts looping on every turn")
            lou = fake.add_user("lou", member_of=[guild])
            lou_dm = fake.dm_channel(lou)
            await fake.slash(lou, lou_dm, "start")
            for hook in ("input", "output"):
                await fake.slash(
                    lou,
                    lou_dm,
                    "script upload",
                    hook=hook,
                    file=StandinFile("loop.js", LOOPING_SCRIPT, "text/javascript"),
                )
            await settled()
            # Turn after turn while the honest players play (each waits for the last one's
            # buttons: a turn is whole).
            for number in range(LOOPING_TURNS):
                before = players.newest(lou_dm)
                await fake.slash(lou, lou_dm, "do", action=f"loop {number}")
                started = time.perf_counter()
                while time.perf_counter() - started < 60:
                    newest = players.newest(lou_dm)
                    if newest is not None and newest is not before and newest.buttons:
                        break
                    await asyncio.sleep(0.05)
                else:
                    findings.problems.append("the looping player's turn never came")

            # --- spend that used to go uncounted ---
            findings.attack("turns that fail after the model was asked")
            frank = fake.add_user("frank", member_of=[guild])
            frank_dm = fake.dm_channel(frank)
            await fake.slash(frank, frank_dm, "start")
            await settled()
            spent = await _tokens_of(bot, frank)
            for fault in ("disconnect", "stall"):
                # The fault is the next reply the model server gives, whoever asks: the honest
                # players wait (``answer_of`` lets them go again).
                players.go.clear()
                await standin.idle()
                model.queue(Reply(text="Half a reply that never ends well. " * 4, fault=fault))
                record = await fake.slash(frank, frank_dm, "do", action=f"fail by {fault}")
                await answer_of(record)
                now = await _tokens_of(bot, frank)
                if now <= spent:
                    findings.problems.append(f"a turn failed by {fault} was not counted")
                spent = now

            findings.attack("an imported file claiming its entries cost 0 tokens")
            exported = await fake.slash(frank, frank_dm, "adventure export")
            await settled()
            saved = fake.message(exported.followups[-1]).attachments[0]
            raw = json.loads(saved.content)
            raw["nodes"][-1]["text"] = "The road goes on. " * 40_000  # about 160k tokens
            for node in raw["nodes"]:
                node["token_count"] = 0
            await fake.slash(
                frank,
                frank_dm,
                "adventure import",
                file=StandinFile("cheap.json", json.dumps(raw).encode(), "application/json"),
            )
            await settled()
            asked = len(model.requests)
            await fake.slash(frank, frank_dm, "do", action="walk on")
            await settled()
            for request in model.requests[asked:]:
                sent = sum(len(str(m.get("content", ""))) for m in request.get("messages", []))
                if sent > CONTEXT_TOKENS * 8:
                    findings.problems.append(f"a prompt of {sent:,} characters was sent")
            async with bot.services.db.session() as session:
                for use in (await session.scalars(select(TokenUse))).all():
                    cap = SERVER_CAP if use.scope == "server" else USER_CAP
                    findings.over_cap_tokens += max(0, use.tokens - cap)

            players.playing = False
            await playing
            findings.problems.extend(players.failures)
            if fake.failures:
                findings.problems.append(f"interactions not acknowledged: {fake.failures[:3]}")
            under_attack = _p95(players.times)
            grown = _peak_mb() - start_mb
    return findings, under_attack, alone, grown


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="A player abusing Campfire beside two others.")
    parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR, format="%(levelname)s %(name)s: %(message)s")
    findings, under_attack, alone, grown = asyncio.run(trial())
    failed = list(findings.problems)
    if findings.over_cap_tokens:
        failed.append(f"{findings.over_cap_tokens} tokens past a cap")
    if findings.blocked_plays:
        failed.append("a blocked or kicked player's action played")
    if under_attack > P95_FACTOR * alone:
        failed.append(f"honest p95 {under_attack:.2f} s is past {P95_FACTOR:g}× {alone:.2f} s")
    if grown > MEMORY_LIMIT_MB:
        failed.append(f"memory grew {grown:.0f} MB")
    for problem in failed:
        print(f"NOT {problem}", flush=True)
    print(
        f"abuse: {findings.attacks} attacks, over cap {findings.over_cap_tokens} tokens, "
        f"blocked plays {findings.blocked_plays}, honest turn p95 {under_attack:.2f} s "
        f"(alone {alone:.2f} s), peak memory {grown:.0f} MB"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    from tests.trials.needs import run_trial

    sys.exit(run_trial("abuse", main))
