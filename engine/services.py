"""The engine's public face: every service a front end builds once and holds.

A front end (the Discord bot, the console, a test) builds one ``Services`` from its settings
(``bot.services.build_services`` for the bot) and reaches the engine through it: a cog asks
``services.play`` to act, ``services.scenarios`` for a scenario, and so on. Nothing below this
module knows it exists; it is the engine's top floor.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.library.archive import AdventureArchive
from engine.library.knowledge.library import KnowledgeLibrary
from engine.library.scenarios.library import ScenarioLibrary
from engine.library.scripting.manage import ScriptService
from engine.library.scripting.workers import close as close_script_workers
from engine.llm.model_settings import ModelSettings
from engine.llm.providers.base import ChatProvider
from engine.llm.providers.embeddings import EmbeddingClient
from engine.llm.providers.resolver import ChosenModels
from engine.people.blocks import Blocks
from engine.people.host_controls import HostControls
from engine.people.limits import UsageLimits
from engine.people.profiles import Profiles
from engine.people.servers import ServerSettings
from engine.platform.coordination.instance import Instance
from engine.platform.coordination.jobs import JobLeases
from engine.platform.coordination.leases import TurnLeases
from engine.platform.crypto import SecretBox
from engine.play.card_imports import CardImports
from engine.play.imports import AdventureImports
from engine.play.message_links import MessageLinks
from engine.play.operator_status import OperatorStatus
from engine.play.reports import TurnReports
from engine.play.round_panels import RoundPanelRecords
from engine.play.service import PlayService
from engine.play.shelf import AdventureShelf
from engine.storage.database import Database
from engine.story.chapters.service import ChapterService
from engine.story.characters import CharacterService
from engine.story.memory.bank import MemoryBank
from engine.story.memory.writer import MemoryWriter
from engine.story.narrative.service import StoryStateService
from engine.story.steering.card_proposals import CardProposals
from engine.story.steering.card_writer import CardWriter
from engine.story.steering.cards import StoryCards
from engine.story.steering.settings import GenerationSettings
from engine.story.steering.text import SteeringText
from engine.story.suggestions.service import SuggestionService
from engine.story.tree import StoryTree
from engine.story.world.service import WorldStateService
from engine.turns.engine import TurnEngine
from engine.turns.insights import Insights


@dataclass
class Services:
    db: Database
    provider: ChatProvider
    embedder: EmbeddingClient | None
    secrets: SecretBox
    turns: TurnEngine
    leases: TurnLeases
    play: PlayService
    scenarios: ScenarioLibrary
    archive: AdventureArchive
    tree: StoryTree
    memory: MemoryWriter
    #: Background jobs run once across processes through these (bot.scheduler).
    jobs: JobLeases
    # steering family (cogs: steering, memory, world_state, insights, profile, membership)
    steering_text: SteeringText
    story_cards: StoryCards
    card_writer: CardWriter
    #: Cards proposed to the host every few turns (scheduled after turns by bot.scheduler).
    card_proposals: CardProposals
    generation_settings: GenerationSettings
    memory_bank: MemoryBank
    world_state: WorldStateService
    insights: Insights
    profiles: Profiles
    # story and library family (cogs: tree, buttons, play, scenarios, scripts, adventure_files)
    scripts: ScriptService
    #: Which Discord messages show which story node (cogs: narration).
    message_links: MessageLinks
    #: Open rounds and their panels, for a restarted process (cogs: round panels).
    round_panels: RoundPanelRecords
    #: Players' characters and the party (cogs: characters).
    characters: CharacterService
    #: The host's lock, mutes, transfer and rewrite rights (cogs: host).
    host_controls: HostControls
    #: Who this process is in lease rows; held (its lock in the data folder) until closing.
    instance: Instance
    # models per server and player, the operator (cogs: model, operator)
    #: Which model each adventure uses: its player's, its server's or the operator's.
    models: ChosenModels
    #: /model: a server's or player's own model.
    model_settings: ModelSettings
    #: Blocked users and servers (/operator block), checked before every command and button.
    blocks: Blocks
    #: /operator status.
    operator_status: OperatorStatus
    #: The rate limits and the operator's budget (cogs: usage; engine.people.limits).
    limits: UsageLimits
    #: A place's adventures: listed, ended, brought back (cogs: adventure_shelf).
    shelf: AdventureShelf
    #: An adventure's chapters and their recaps (cogs: chapters).
    chapters: ChapterService
    #: The story's typed narrative state: /narrative (cogs: narrative).
    story_state: StoryStateService
    #: Suggested actions: a press's text (cogs: suggestions).
    suggestions: SuggestionService
    #: Setting files imported as Canon, Reference or Inspiration (cogs: knowledge).
    knowledge: KnowledgeLibrary
    #: Every per-server setting (cogs: server).
    servers: ServerSettings
    #: Players' reports of turns to their server's moderators (cogs: reports).
    reports: TurnReports
    #: /adventure import under the content rules: the moderation check, then the archive's
    #: write (cogs: adventure_files).
    imports: AdventureImports
    #: /card import: a story-card file merged into the adventure here or a library scenario
    #: (cogs: card_files).
    card_imports: CardImports

    async def aclose(self) -> None:
        # The script workers this process started (a later run would start new ones).
        close_script_workers()
        await self.models.aclose()
        await self.play.moderator.aclose()  # the operator's moderation check, when set
        await self.models.default.aclose()  # the operator's model, and its background client
        if self.embedder is not None:
            await self.embedder.aclose()
        await self.db.dispose()
        self.instance.close()
