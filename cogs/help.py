"""/help: a short overview that fits one screen, and a ``topic:`` for each part of the guide.

Every command the bot registers is named in the overview or in a topic (a test holds it). An
embed's description holds 4,096 characters, all of a message's embeds 6,000 together, and a
command option at most 25 choices of up to 100 characters (discord-api-docs, Message: "Embed
Limits"; Application Commands: "Application Command Option Choice Structure").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import discord
from discord import app_commands
from discord.ext import commands

from cogs.ui.content import fit_embed
from engine.llm.providers.local import runs_the_bundled_model

if TYPE_CHECKING:
    from cogs.ui import CampfireBot

#: Said where a newcomer first meets the embedded model (the console's opening, /help) and only
#: while it is the model in use: what it is, how slow its first turn is, and the way out.
EMBEDDED_MODEL_NOTE = (
    "🐣 This Campfire runs the embedded SmolLM2 (135M parameters), a toy for trying Campfire: "
    "the first turn after a start can take 30–50 s on two cores. For real prose, point it at "
    "any OpenAI-compatible server (Ollama, llama.cpp, vLLM…): "
    "`CAMPFIRE_MODEL_URL=http://localhost:11434/v1 CAMPFIRE_MODEL_NAME=llama3.1 scripts/run` "
    "(or `/model set` for your own adventures)."
)

OVERVIEW_TITLE = "How to play"

OVERVIEW = """\
**Campfire** runs text adventures narrated by an AI.

`/start [scenario]` start an adventure (in a server it opens a thread for it; in a DM, solo)
`/do <action>` act: `/do open the door` → *> You open the door.*
`/say <words>` speak: `/say Hello` → *> You say "Hello."*
`/story <text>` add to the story in your own words
`/continue` or the ⏩ button: let the narrator go on
✋ Do, 💬 Say, 📜 Story buttons under the newest turn: type your action in a form
`/retry` 🔁, `/undo` ↩️, `/redo` ↪️: write the newest turn again, take it back, bring it back
`/character set name:` your character; `/party` who plays; `/join`, `/leave`
`/recap` catch up; `/adventure list|resume|end` the adventures here
A failed turn saves nothing; its 🔁 Retry button plays it again.
{model}
**More:** `/help topic:` and one of
`playing`: plain messages, takes, edits, branches, save points
`group`: characters, the party, the host's controls and turn modes
`story`: steering, story cards, world state, memory, chapters, Insights
`scenarios`: scenarios, imports and exports, knowledge, saves
`scripts`: AI Dungeon scripts · `models`: the model, your own · `data`: your data"""


@dataclass(frozen=True)
class Topic:
    title: str
    #: The choice's name in Discord's menu (at most 100 characters).
    summary: str
    text: str


TOPICS: dict[str, Topic] = {
    "playing": Topic(
        "Playing",
        "Playing: acting, plain messages, retry and undo, branches, save points",
        """\
**Play**
`/start [scenario]` start an adventure (in a server it opens a thread for it)
`/do <action>` act: `/do open the door` → *> You open the door.*
`/say <words>` speak: `/say Hello` → *> You say "Hello."*
`/story <text>` add to the story in your own words
`/continue` or the ⏩ button: let the narrator go on
✋ Do, 💬 Say, 📜 Story buttons under the newest turn: type your action in a form
Plain messages, once the host runs `/adventure settings messages:on`: `open the door` is a do,
`"Hello"` a say, `+ text` a story line; `//` or `(` is table talk (ignored). Unless the operator
allowed message content, mention @Campfire in the message

**Rewind and branch**
`/retry` or 🔁: write the newest turn again (‹ › pages the takes)
`/undo` ↩️, `/redo` ↪️: take back the newest turn, bring it back
`/edit entry:`: correct the newest turn, or an earlier action or narration (↩️ Undo edit)
`/branch list|new|switch|rename|delete`, `/savepoint add|list|restore|delete`, `/tree`

Actions sent at once are queued and played in order.
A failed turn saves nothing; its 🔁 Retry button plays it again.""",
    ),
    "group": Topic(
        "Playing together",
        "Playing together: characters, the party, the host's controls, rounds",
        """\
**Play together** (in a server, actions carry your character's name)
`/character set name: [about:] [pronouns:]`: your character here → *> Ann draws her sword.*
`/character show [player:]`: yours, or another player's; `/party`: who plays
`/join`, `/leave`: play here, or stop and watch

**Host controls** (the host and server managers; anyone may `/host show`)
`/host lock|unlock`: while locked, only the host and managers act
`/host mute|unmute|kick player:`: who may not act here; `/host transfer player:` a new host
`/host rights retry:author|host|anyone`: who may retry, undo and edit turns
`/host party state:open|closed`: closed, only the party acts and nobody joins
`/host mode mode:free|rounds|host`: each action a turn; or rounds of one action each, \
narrated together once all acted, on Close, or late (`host`: on the host's Close only)
`/host banned words:`: words this adventure bans (the host; in a DM, its player)

**Content** (what the narrator may write)
`/server rating level:` safe, moderate or mature for this server (Manage Server; mature only in \
age-restricted channels); `/server banned words:` words banned in all its adventures
`/server reports channel:` where 🚩 Report (under a turn's Insights) sends a turn to moderators
`/profile rating level:` the rating of your own adventures in DMs""",
    ),
    "story": Topic(
        "Steering the story",
        "Steering the story: notes, cards, world state, memory, chapters, Insights",
        """\
**Steer the story** (the host and server managers)
`/note`, `/essentials`, `/instructions`: the author's note, plot essentials, AI instructions
`/card add|edit|remove|list`: story cards, brought in when their keys come up
`/card options card: …`: a card's world-info options (secondary keys, probability, order, \
groups, sticky …), `reset:` clears them
`/card generate [name]`: the model writes a card from the story; you see it before it is added
`/card import file: [scenario:]`: story cards from a file, into the adventure here or a scenario
`/adventure settings`: context size, reply length, temperature, top_p, min_p, penalties,
stop strings, the author's note's depth; `messages:on|off`; `card_proposals:` a card proposed
to the host privately every few turns (0 off)

**World state** (in scenarios that track it)
`/state show`: health, trust, flags and the rest, with what each number means
`/state set <path> <value>`: correct a value (the host and server managers)

**Memory**
`/memory list|add|edit|pin|unpin|forget|restore`: facts the narrator remembers
(changing them: the host and server managers)
`/summary view|edit`: the story summary the narrator reads
`/recap`: catch up on the adventure here (the summary and the latest turns, to you alone)

**Chapters and the story's state**
`/chapters`: a scenario's chapters, the beat you are on, each chapter's recap and the epilogue
`/narrative state`: who is where, who holds what, open threads, and what the last turn changed
`/narrative track on:` and `/narrative correct` (the host): follow the story's state, fix it
Suggested actions under the newest turn play as your `/do`; `/server suggestions` turns \
them off (Manage Server)

**See how it works**
`/insights [turn]` or the 🔍 button: what the model was given for a turn, and why; \
🧠 Reasoning there: the model's own notes for it, to you alone""",
    ),
    "scenarios": Topic(
        "Scenarios, imports and saves",
        "Scenarios: importing and exporting them, knowledge, saving adventures",
        """\
**Scenarios and saves**
`/scenario import file:` bring in an AI Dungeon, SillyTavern, NovelAI, KoboldAI or Campfire \
file, or a character card (JSON or PNG: its greetings become openings to choose at `/start`)
`/scenario list`, `/scenario show`, `/scenario export [format:]` (Campfire, or a character \
card), `/scenario delete`
`/adventure export` the whole story as a file (`format:` text, markdown or html to read it); \
`/adventure import file:` to restore one
`/adventure list|resume|end`: the adventures here, bring one back, end this one
`/server importers [role]`: who besides server managers may import (Manage Server)

**Knowledge** (setting notes the narrator reads when they come up)
`/knowledge import file: class:canon|reference|inspiration`: a .txt or .md file (as for \
scenarios: server managers and importers; in a DM, yours); `/knowledge list|show|options|remove`""",
    ),
    "scripts": Topic(
        "Scripts",
        "Scripts: AI Dungeon scripts, uploading and testing them",
        """\
**Scripts** (AI Dungeon scripts; server managers, or the player in a DM)
`/script upload hook file`: a script's library, input, context or output code from a .js file
`/script list|enable|disable|remove`, `/script test hook`: manage them, try a hook unsaved""",
    ),
    "models": Topic(
        "Models",
        "Models: which model narrates, using your own",
        """\
**Your own model**
`/model set url: model: [key:]`: the model this server's adventures use (Manage Server), or, \
in a DM, your own adventures'; a key is never shown again
`/model pick name:`: another of the models the operator offers
`/model show|test|clear`: which model is used here, check it answers, back to the default
`/operator status|block|unblock`: for the bot's operator only""",
    ),
    "data": Topic(
        "Your data",
        "Your data: what Campfire keeps about you, your use of its model today",
        """\
**Your data**
`/profile show|keep|delete`: what Campfire stores about you, keeping it, deleting it
`/profile rating level:`: the content rating of your own DM adventures
`/usage`: your use of Campfire's model today (and your server's), and the daily caps""",
    ),
}

TOPIC_CHOICES = [
    app_commands.Choice(name=topic.summary, value=key) for key, topic in TOPICS.items()
]


def embedded_model_note(provider: object) -> str | None:
    """The note on the embedded model, while ``provider`` (the operator's) is that model."""
    return EMBEDDED_MODEL_NOTE if runs_the_bundled_model(provider) else None


def overview(provider: object) -> str:
    """/help without a topic: with the note on the embedded model while it is in use."""
    note = embedded_model_note(provider)
    return OVERVIEW.format(model=f"\n{note}\n" if note else "")


def topic_text(key: str, provider: object) -> str:
    """A topic's text; the models topic names the embedded model while it is in use."""
    text = TOPICS[key].text
    note = embedded_model_note(provider) if key == "models" else None
    return f"{note}\n\n{text}" if note else text


class HelpCog(commands.Cog):
    def __init__(self, bot: CampfireBot) -> None:
        self.bot = bot

    @app_commands.command(name="help")
    @app_commands.describe(topic="One part of the guide; leave empty for the overview")
    @app_commands.choices(topic=TOPIC_CHOICES)
    async def help(
        self, interaction: discord.Interaction, topic: app_commands.Choice[str] | None = None
    ) -> None:
        """How to play Campfire."""
        # An embed: the guide is longer than a message's 2000 characters.
        provider = self.bot.services.provider
        if topic is None:
            page = discord.Embed(title=OVERVIEW_TITLE, description=overview(provider))
        else:
            title = TOPICS[topic.value].title
            page = discord.Embed(title=title, description=topic_text(topic.value, provider))
        await interaction.response.send_message(embed=fit_embed(page), ephemeral=True)


async def setup(bot: CampfireBot) -> None:
    await bot.add_cog(HelpCog(bot))
