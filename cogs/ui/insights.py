"""Insights shown: what went into a narrator turn's context, privately, for /insights
(``cogs.insights``), the 🔍 button under a turn and the 🧠 Reasoning button under Insights.

One embed per turn: a table of the context's sections (tokens, a bar of their share of the
budget, why each is there), why cards and memories were included, what was left out, the
world-state report, script logs, and the model, latency and token usage in the footer. The
exact prompt comes as an attached text file. Everything is cut to Discord's embed limits; when
the lists do not fit, the whole report is attached as a second file.
"""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterable
from datetime import UTC
from typing import TYPE_CHECKING, Any

import discord

from cogs.ui import bot_of
from cogs.ui.bot_permissions import Does
from cogs.ui.content import fit_embed
from cogs.ui.interaction import channel_id_of
from cogs.ui.preflight import Preflighted
from cogs.ui.replies import reply
from cogs.ui.reports import ReportButton
from engine.errors import CampfireError, log_incident
from engine.platform.redaction import redact
from engine.platform.sanitise import ROW_ID_MAX, row_id
from engine.prompt.report import ContextReport, SectionReport
from engine.turns.insights import SCRIPT_LOG_KEYS, TurnInsights

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)

# Discord's embed limits, and the share of them each part may take (title ≤ 256, description
# ≤ 4096, field value ≤ 1024, footer ≤ 2048, ≤ 25 fields, all of it together ≤ 6000).
EMBED_TOTAL_MAX = 6000
DESCRIPTION_BUDGET = 2300
INCLUDED_BUDGET = 1024
EXCLUDED_BUDGET = 1024
STATE_BUDGET = 500
LOGS_BUDGET = 500
FOOTER_BUDGET = 200

BAR_WIDTH = 10
NAME_WIDTH = 16
REASON_WIDTH = 26
COLOR = discord.Color.from_rgb(230, 126, 34)  # campfire orange


# --- rendering -----------------------------------------------------------------------------------


def bar(tokens: int, scale: int, width: int = BAR_WIDTH) -> str:
    """``█████░░░░░``: ``tokens`` as a share of ``scale``; a sliver shows as one thin block."""
    if scale <= 0:
        return "░" * width
    filled = min(width, round(width * max(tokens, 0) / scale))
    if filled == 0 and tokens > 0:
        return "▏" + "░" * (width - 1)
    return "█" * filled + "░" * (width - filled)


def _clip(text: str, width: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def _code(text: str) -> str:
    """Text safe inside a code block (no closing fence)."""
    return text.replace("`", "ˋ")


def _plain(text: str) -> str:
    return discord.utils.escape_markdown(" ".join(str(text).split()))


def fit_lines(lines: list[str], limit: int, *, noun: str = "more") -> tuple[str, int]:
    """Join as many lines as fit in ``limit`` characters, then "…and N more".

    Returns the text and how many lines were left out.
    """
    out: list[str] = []
    size = 0
    for i, line in enumerate(lines):
        sep = 1 if out else 0
        after = len(lines) - i - 1
        reserve = len(f"\n…and {after} {noun}") if after else 0
        if size + sep + len(line) + reserve <= limit:
            out.append(line)
            size += sep + len(line)
            continue
        omitted = len(lines) - i
        if not out:  # not even the first line fits: cut it rather than show nothing
            rest = omitted - 1
            tail = f"\n…and {rest} {noun}" if rest else ""
            out.append(_clip(line, limit - len(tail)))
            if rest:
                out.append(f"…and {rest} {noun}")
            return "\n".join(out), rest
        # The reserve kept on the previous line leaves room for this.
        out.append(f"…and {omitted} {noun}")
        return "\n".join(out), omitted
    return "\n".join(out), 0


def _section_rows(report: ContextReport) -> list[str]:
    # Each section's bar is its share of what was sent; the total's, of what could be.
    scale = max(report.used, sum(section.tokens for section in report.sections), 1)
    rows = []
    for section in report.sections:
        reason = section.reason + (" (truncated)" if section.truncated else "")
        rows.append(
            f"{_clip(_code(section.title or section.key), NAME_WIDTH):<{NAME_WIDTH}} "
            f"{section.tokens:>6} {bar(section.tokens, scale)} "
            f"{_clip(_code(reason), REASON_WIDTH)}".rstrip()
        )
    return rows


def cache_line(insights: TurnInsights) -> str | None:
    """How much of the prompt the model did not read again, in the words of where it was kept:
    a hosted provider's prompt cache, or the embedded model's prefix from the last turn."""
    cached, prompt = insights.cached_tokens, insights.prompt_tokens
    if cached is None or not prompt:
        return None
    where = "reused from the last turn" if insights.embedded else "cached by the provider"
    return f"{cached:,} of {prompt:,} prompt tokens {where} ({cached / prompt:.0%})"


def _summary(report: ContextReport, cache: str | None = None) -> str:
    line = (
        f"**Context:** {report.used:,} of {report.available:,} tokens available "
        f"(budget {report.budget:,}, {report.reserved:,} kept for the reply)"
    )
    if report.output_words:
        line += f" · length ceiling {report.output_words} words"
    if cache:
        line += f"\n**Prompt read before:** {cache}"
    if report.clamped:
        # The adventure's own settings asked for more than the operator allows on its model.
        line += "\n**Held to the operator's ceilings:** " + "; ".join(report.clamped)
    if report.checks:
        line += "\n**Content checks:** " + "; ".join(report.checks)
    # Stop strings are the players' text: shown as written, not as Markdown.
    if report.sampling:
        line += "\n**Sampling sent:** " + discord.utils.escape_markdown(", ".join(report.sampling))
    if report.sampling_left_out:
        # The adventure set them; its model's server does not take them (engine.llm.providers).
        left_out = "; ".join(report.sampling_left_out)
        line += "\n**Not sent:** " + discord.utils.escape_markdown(left_out)
    return line


def _description(report: ContextReport | None, cache: str | None = None) -> tuple[str, bool]:
    if report is None:
        return (
            "*No context report for this turn.* It was played before Campfire recorded what "
            "went into each turn's context; the prompt it was sent is attached when stored.",
            False,
        )
    head = _summary(report, cache)
    scale = max(report.available, report.used, 1)
    header = f"{'section':<{NAME_WIDTH}} {'tokens':>6} {'share':<{BAR_WIDTH}} why"
    total = f"{'total':<{NAME_WIDTH}} {report.used:>6} {bar(report.used, scale)}"
    room = DESCRIPTION_BUDGET - len(head) - len(header) - len(total) - 12
    rows, omitted = fit_lines(_section_rows(report), room, noun="more sections")
    if not report.sections:
        rows = "(no sections)"
    return f"{head}\n```\n{header}\n{rows}\n{total}\n```", omitted > 0


def _included_lines(sections: Iterable[SectionReport]) -> list[str]:
    lines = []
    for section in sections:
        for item in section.items:
            if item.included:
                why = f" — {_plain(item.reason)}" if item.reason else ""
                lines.append(
                    f"• {_plain(section.title)}: **{_plain(_clip(item.label, 60))}** "
                    f"({item.tokens:,}){why}"
                )
    return lines


def _excluded_lines(sections: Iterable[SectionReport]) -> list[str]:
    lines = []
    for section in sections:
        for item in section.items:
            if not item.included:
                why = f" — {_plain(item.reason)}" if item.reason else ""
                lines.append(
                    f"• **{_plain(_clip(item.label, 60))}** ({_plain(section.title)}, "
                    f"{item.tokens:,}){why}"
                )
    return lines


def _value(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} → {_value(v)}" for k, v in value.items()) or "—"
    if isinstance(value, list):
        return ", ".join(_value(v) for v in value) or "—"
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _state_lines(state_report: dict[str, Any] | None) -> list[str]:
    if not state_report:
        return []
    return [
        f"**{_plain(key)}:** {_plain(_clip(_value(value), 300))}"
        for key, value in state_report.items()
        if key not in SCRIPT_LOG_KEYS and value not in (None, {}, [], "")
    ]


def _footer(insights: TurnInsights) -> str:
    # The label names the model's host; one stored by an older version may hold the URL's
    # credentials, which players never see.
    parts = [redact(insights.model) if insights.model else "model unknown"]
    if insights.latency_ms is not None:
        parts.append(f"{insights.latency_ms / 1000:.1f} s")
    tokens = []
    if insights.prompt_tokens is not None:
        cached = insights.cached_tokens
        tokens.append(
            f"{insights.prompt_tokens:,} prompt"
            + (f" ({cached:,} cached)" if cached is not None and insights.prompt_tokens else "")
        )
    if insights.completion_tokens is not None:
        tokens.append(f"{insights.completion_tokens:,} reply")
    if tokens:
        parts.append(" + ".join(tokens) + " tokens")
    parts.append(f"node {insights.node_id}")
    return _clip(" · ".join(parts), FOOTER_BUDGET)


def insights_embed(insights: TurnInsights) -> tuple[discord.Embed, bool]:
    """The turn's Insights embed, within Discord's limits, and whether anything was cut."""
    description, cut = _description(insights.report, cache_line(insights))
    embed = discord.Embed(
        title=f"🔍 Insights · turn {insights.number}", description=description, color=COLOR
    )
    report = insights.report
    if report is not None:
        included = _included_lines(report.sections)
        if included:
            text, omitted = fit_lines(included, INCLUDED_BUDGET)
            embed.add_field(name="Why included", value=text, inline=False)
            cut = cut or omitted > 0
        excluded = _excluded_lines(report.sections) or ["Nothing: everything considered fit."]
        text, omitted = fit_lines(excluded, EXCLUDED_BUDGET)
        embed.add_field(name="Left out", value=text, inline=False)
        cut = cut or omitted > 0
    state = _state_lines(insights.state_report)
    if state:
        text, omitted = fit_lines(state, STATE_BUDGET)
        embed.add_field(name="World state", value=text, inline=False)
        cut = cut or omitted > 0
    if insights.script_logs:
        lines = [_code(_clip(line, 200)) for line in insights.script_logs]
        text, omitted = fit_lines(lines, LOGS_BUDGET - 8)
        embed.add_field(name="Script logs", value=f"```\n{text}\n```", inline=False)
        cut = cut or omitted > 0
    if not insights.has_prompt:
        embed.add_field(name="Prompt", value="No prompt was stored for this turn.", inline=False)
    embed.set_footer(text=_footer(insights))
    if insights.created_at is not None:
        created = insights.created_at
        embed.timestamp = created if created.tzinfo else created.replace(tzinfo=UTC)
    _shrink(embed)
    return embed, cut


def _shrink(embed: discord.Embed) -> None:
    """A last guard on the 6000-character total: shorten the longest field until it fits."""
    while len(embed) > EMBED_TOTAL_MAX and embed.fields:
        over = len(embed) - EMBED_TOTAL_MAX
        index, longest = max(enumerate(embed.fields), key=lambda pair: len(pair[1].value or ""))
        value = longest.value or ""
        keep = max(len(value) - over - 2, 0)
        if keep < 20:
            embed.remove_field(index)
            continue
        embed.set_field_at(index, name=longest.name, value=value[:keep] + " …", inline=False)


def report_text(insights: TurnInsights) -> str:
    """The whole report as plain text, for when the embed had to leave some of it out."""
    lines = [f"Insights · turn {insights.number} (node {insights.node_id})", ""]
    report = insights.report
    if report is not None:
        lines.append(
            f"Context: {report.used} of {report.available} tokens available "
            f"(budget {report.budget}, {report.reserved} kept for the reply)"
        )
        if report.output_words:
            lines.append(f"Length ceiling: {report.output_words} words")
        if cache := cache_line(insights):
            lines.append(f"Prompt read before: {cache}")
        if report.clamped:
            lines.append("Held to the operator's ceilings: " + "; ".join(report.clamped))
        if report.sampling:
            lines.append("Sampling sent: " + ", ".join(report.sampling))
        if report.sampling_left_out:
            lines.append("Not sent: " + "; ".join(report.sampling_left_out))
        scale = max(report.used, sum(section.tokens for section in report.sections), 1)
        for section in report.sections:
            lines.append("")
            lines.append(
                f"## {section.title or section.key} — {section.tokens} tokens "
                f"{bar(section.tokens, scale)}"
                + (f" — {section.reason}" if section.reason else "")
                + (" (truncated)" if section.truncated else "")
            )
            for item in section.items:
                mark = "+" if item.included else "-"
                why = f" — {item.reason}" if item.reason else ""
                lines.append(f"  {mark} {item.label} ({item.tokens}){why}")
    if insights.state_report:
        lines += ["", "## State report", json.dumps(insights.state_report, indent=2, default=str)]
    if insights.script_logs:
        lines += ["", "## Script logs", *insights.script_logs]
    return "\n".join(lines) + "\n"


def insights_files(insights: TurnInsights, *, full_report: bool) -> list[discord.File]:
    files = []
    if insights.has_prompt:
        files.append(
            discord.File(
                io.BytesIO(insights.prompt_text.encode()),
                filename=f"turn-{insights.number}-prompt.txt",
                description=f"The prompt sent for turn {insights.number}",
            )
        )
    if full_report:
        files.append(
            discord.File(
                io.BytesIO(report_text(insights).encode()),
                filename=f"turn-{insights.number}-context.txt",
                description=f"Everything considered for turn {insights.number}'s context",
            )
        )
    return files


# --- answering -----------------------------------------------------------------------------------


async def show_insights(
    interaction: discord.Interaction,
    *,
    turn: int | None = None,
    node_id: int | None = None,
) -> None:
    """Answer ``interaction`` privately with a turn's Insights (by number or node id)."""
    if not interaction.response.is_done():
        await interaction.response.defer(ephemeral=True, thinking=True)
    try:
        insights = await bot_of(interaction).services.insights.for_turn(
            channel_id_of(interaction), turn=turn, node_id=node_id
        )
    except CampfireError as error:
        await reply(interaction, f"⚠ {error.message}")
        return
    embed, cut = insights_embed(insights)
    extra: dict[str, Any] = {}
    view = discord.ui.View(timeout=None)
    if insights.has_reasoning:
        # The model's reasoning, on demand and to the asker alone: never in the story.
        view.add_item(ReasoningButton(insights.node_id))
    if interaction.guild_id is not None:
        # The turn, to the server's moderators (``cogs.ui.reports``); a DM's story is the
        # player's own to undo.
        view.add_item(ReportButton(insights.node_id))
    if view.children:
        extra["view"] = view
    await interaction.followup.send(
        embed=fit_embed(embed),
        files=insights_files(insights, full_report=cut),
        ephemeral=True,
        **extra,
    )


async def show_insights_safely(interaction: discord.Interaction, *, node_id: int) -> None:
    """For the button: an unexpected error is logged and answered, never left hanging."""
    try:
        await show_insights(interaction, node_id=node_id)
    except Exception as error:
        reference = log_incident(f"insights for node {node_id} failed", error)
        await reply(
            interaction,
            f"Sorry, something went wrong on Campfire's side (reference `{reference}`).",
        )


#: A reasoning trace longer than this comes as a file rather than in the message.
REASONING_INLINE_CHARS = 1800


def reasoning_answer(number: int, text: str) -> dict[str, Any]:
    """The Reasoning view's answer: the trace quoted, or as a file when long."""
    if not text:
        return {"content": f"The model gave no reasoning for turn {number}."}
    heading = f"🧠 **Reasoning** · turn {number} (the model's own notes; not part of the story)"
    if len(text) <= REASONING_INLINE_CHARS:
        return {"content": f"{heading}\n>>> {discord.utils.escape_markdown(text)}"}
    return {
        "content": f"{heading}: {len(text):,} characters, in the file.",
        "file": discord.File(
            io.BytesIO(text.encode()),
            filename=f"turn-{number}-reasoning.txt",
            description=f"The model's reasoning for turn {number}",
        ),
    }


class ReasoningButton(
    Preflighted, discord.ui.DynamicItem[discord.ui.Button], template=r"cf:reasoning:(?P<node>\d+)"
):
    """Under a turn's Insights: that turn's reasoning trace, privately, to whoever presses."""

    DOES = Does.ANSWERS

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        super().__init__(  # type: ignore[call-arg]  # DynamicItem's, after the mixin
            discord.ui.Button(
                label="Reasoning",
                emoji="🧠",
                style=discord.ButtonStyle.secondary,
                custom_id=f"cf:reasoning:{node_id}",
            )
        )

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: re.Match[str]
    ) -> ReasoningButton:
        return cls(row_id(match["node"], ROW_ID_MAX) or 0)

    async def callback(self, interaction: discord.Interaction) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        try:
            number, text = await bot_of(interaction).services.insights.reasoning(
                channel_id_of(interaction), self.node_id
            )
        except CampfireError as error:
            await reply(interaction, f"⚠ {error.message}")
            return
        await interaction.followup.send(ephemeral=True, **reasoning_answer(number, text))
