"""/script upload|list|enable|disable|remove|test: the adventure's AI Dungeon scripts.

Each command is one call to the script service (``engine.library.scripting.manage.ScriptService``);
every answer is for the member alone. Who may change or test scripts is the engine's rule
(server managers; in a DM, its player).
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

import discord
from discord import app_commands
from discord.ext import commands

from cogs.ui import bot_of
from cogs.ui.content import fit_text
from cogs.ui.interaction import actor_of, channel_id_of
from cogs.ui.pages import ListPage, list_source, paged, show_list
from cogs.ui.replies import reply
from engine.errors import CampfireError
from engine.library.scripting.hooks import Hook
from engine.library.scripting.manage import SCRIPT_NAME_MAX, HookTest, ScriptPart, ScriptView

if TYPE_CHECKING:
    from cogs.ui import CampfireBot

#: Longer results come as a file, not cut.
INLINE_RESULT_MAX = 900

PART_CHOICES = [
    app_commands.Choice(name="library (shared by every hook)", value="library"),
    app_commands.Choice(name="input (onInput)", value="input"),
    app_commands.Choice(name="context (onModelContext)", value="context"),
    app_commands.Choice(name="output (onOutput)", value="output"),
]
HOOK_CHOICES = PART_CHOICES[1:]


def view_line(view: ScriptView) -> str:
    state = "on" if view.enabled else "off"
    parts = ", ".join(f"{label} {size:,} chars" for label, size in view.sizes.items()) or "empty"
    return f"**{discord.utils.escape_markdown(view.name)}** ({state}): {parts}"


def test_report(result: HookTest) -> str:
    """The whole run as text: what went in, what came out, each script's logs and errors."""
    lines = [f"# {result.hook.label} test", "", "## Text in", result.text_in, ""]
    lines += ["## Text out" + (" (stop)" if result.stop else ""), result.text_out, ""]
    if result.message:
        lines += ["## state.message", result.message, ""]
    for report in result.reports:
        lines.append(
            f"## {report.script}: {report.ms} ms" + (f", {report.note}" if report.note else "")
        )
        if report.error:
            lines += ["error:", report.error]
        lines += [f"log: {line}" for line in report.logs] or ["(no logs)"]
        lines.append("")
    return "\n".join(lines)


def test_summary(result: HookTest) -> str:
    errors = [r.error for r in result.reports if r.error]
    logs = sum(len(r.logs) for r in result.reports)
    ms = sum(r.ms for r in result.reports)
    head = f"🧪 **{result.hook.label}** ran {len(result.reports)} script(s) in {ms} ms"
    head += f", {logs} log line(s)"
    if errors:
        head += f", ⚠ {len(errors)} error(s): {errors[0].splitlines()[0]}"[:300]
    if result.stop:
        head += "; the script stopped the turn"
    out = result.text_out
    if result.text_out == result.text_in:
        head += "; the text is unchanged"
    elif len(out) <= INLINE_RESULT_MAX and "```" not in out:
        head += f"\n```\n{out}\n```"
    return head


@list_source("scripts")
async def script_page(interaction: discord.Interaction, page: int) -> ListPage:
    views = await bot_of(interaction).services.scripts.scripts(channel_id_of(interaction))
    return paged(
        [f"{i}. {view_line(view)}" for i, view in enumerate(views, 1)],
        page,
        title="📜 Scripts, in the order they run",
        empty="This adventure has no scripts. `/script upload` adds one (server managers).",
    )


class ScriptsCog(commands.Cog):
    script = app_commands.Group(name="script", description="The scripts of the adventure here")

    def __init__(self, bot: CampfireBot) -> None:
        self.bot = bot

    @script.command(name="upload")
    @app_commands.describe(
        hook="Which code this file holds",
        file="The script, a .js or .txt file",
        name="The script to put it in (default: main); a new name adds a script",
    )
    @app_commands.choices(hook=PART_CHOICES)
    async def upload(
        self,
        interaction: discord.Interaction,
        hook: str,
        file: discord.Attachment,
        name: app_commands.Range[str, 1, SCRIPT_NAME_MAX] | None = None,
    ) -> None:
        """Upload one part of a script (AI Dungeon's library, input, context or output tab)."""
        scripts = self.bot.services.scripts
        # A huge file is refused before it is read.
        scripts.check_size(file.filename, file.size)
        await interaction.response.defer(ephemeral=True, thinking=True)
        view, created = await scripts.upload(
            channel_id_of(interaction),
            actor_of(interaction),
            hook,
            await file.read(),
            file.filename,
            name=name,
        )
        what = ScriptPart(hook).label
        done = "added as a new script" if created else "saved"
        await reply(
            interaction,
            f"📜 The {what} code of **{discord.utils.escape_markdown(view.name)}** was {done}; "
            f"it runs from the next turn.\n{view_line(view)}",
        )

    @script.command(name="list")
    async def list_scripts(self, interaction: discord.Interaction) -> None:
        """The adventure's scripts, in the order they run."""
        await show_list(interaction, "scripts")

    @script.command(name="enable")
    @app_commands.describe(name="The script to turn on")
    async def enable(self, interaction: discord.Interaction, name: str) -> None:
        """Turn a script on: it runs from the next turn."""
        await self._set_enabled(interaction, name, True)

    @script.command(name="disable")
    @app_commands.describe(name="The script to turn off")
    async def disable(self, interaction: discord.Interaction, name: str) -> None:
        """Turn a script off without removing it."""
        await self._set_enabled(interaction, name, False)

    async def _set_enabled(self, interaction: discord.Interaction, name: str, on: bool) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        view = await self.bot.services.scripts.set_enabled(
            channel_id_of(interaction), actor_of(interaction), name, on
        )
        state = "on: it runs from the next turn" if on else "off"
        await reply(interaction, f"📜 **{discord.utils.escape_markdown(view.name)}** is {state}.")

    @script.command(name="remove")
    @app_commands.describe(
        name="The script", hook="Remove only this part; leave empty to remove the whole script"
    )
    @app_commands.choices(hook=PART_CHOICES)
    async def remove(
        self, interaction: discord.Interaction, name: str, hook: str | None = None
    ) -> None:
        """Remove a script, or one part of it."""
        await interaction.response.defer(ephemeral=True, thinking=True)
        left = await self.bot.services.scripts.remove(
            channel_id_of(interaction), actor_of(interaction), name, hook
        )
        if left is None:
            await reply(
                interaction, f"🗑 The script **{discord.utils.escape_markdown(name)}** was removed."
            )
        else:
            await reply(
                interaction,
                f"🗑 The {ScriptPart(hook).label} code was removed.\n{view_line(left)}",
            )

    @script.command(name="test")
    @app_commands.describe(
        hook="The hook to run",
        text="onInput: the action to try; onOutput: the narration to try (default the newest)",
    )
    @app_commands.choices(hook=HOOK_CHOICES)
    async def test(
        self,
        interaction: discord.Interaction,
        hook: str,
        text: app_commands.Range[str, 1, 4000] | None = None,
    ) -> None:
        """Run a hook against this adventure without saving anything; see its result and logs."""
        await interaction.response.defer(ephemeral=True, thinking=True)
        result = await self.bot.services.scripts.test_hook(
            channel_id_of(interaction), actor_of(interaction), Hook(hook), text=text
        )
        report = discord.File(
            fp=io.BytesIO(test_report(result).encode()),
            filename=f"script-test-{hook}.md",
        )
        await interaction.followup.send(fit_text(test_summary(result)), file=report, ephemeral=True)

    @enable.autocomplete("name")
    @disable.autocomplete("name")
    @remove.autocomplete("name")
    async def name_choices(
        self, interaction: discord.Interaction, current: str
    ) -> list[app_commands.Choice[str]]:
        try:
            names = await self.bot.services.scripts.names(channel_id_of(interaction), current)
        except CampfireError:
            return []
        return [app_commands.Choice(name=name[:100], value=name[:100]) for name in names]


async def setup(bot: CampfireBot) -> None:
    await bot.add_cog(ScriptsCog(bot))
