"""Command line: ``python -m bot`` and its subcommands.

python -m bot              Discord when DISCORD_TOKEN is set, otherwise the console
python -m bot console      the console, even with a token set (--server: as a group;
                           --data-dir PATH: another data folder)
python -m bot db upgrade   bring the database to the newest schema and exit
python -m bot invite       print the link that adds the bot to a server, and its permissions
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from bot.config import ConfigError, Settings, load_settings
from bot.logs import configure_logging


async def _console(settings: Settings, *, server: bool) -> None:
    from bot.console import run_console

    await run_console(settings, server=server)


async def _discord(settings: Settings) -> None:
    import discord

    from bot.discord_bot import CampfireBot

    # main() opens the console instead when there is no token.
    assert settings.discord_token is not None
    bot = CampfireBot(settings)
    try:
        async with bot:
            await bot.start(settings.discord_token.get_secret_value())
    except discord.LoginFailure:
        raise ConfigError(
            "DISCORD_TOKEN: Discord refused this token. Copy the bot token again from the "
            "Developer Portal (Bot → Reset Token)."
        ) from None
    except discord.PrivilegedIntentsRequired:
        # Not a fault to restart on: each restart identifies again, toward Discord's 1,000
        # identifies a day (then the token is reset; discord-api-docs, Gateway, Session Start
        # Limit), and the answer stays the same until the setting changes.
        raise ConfigError(
            "CAMPFIRE_MESSAGE_CONTENT: the bot asks for the Message Content intent, which is "
            "not enabled for this application. Enable it in the Developer Portal (Bot → "
            "Privileged Gateway Intents → Message Content Intent), or set "
            "CAMPFIRE_MESSAGE_CONTENT=false."
        ) from None
    except OSError as error:
        raise ConfigError(f"Couldn't reach Discord ({error}). Is this machine online?") from None


async def _sync(settings: Settings, guild_id: int | None, *, clear_global: bool = False) -> None:
    """Register the slash commands with Discord: globally, or in one server (instant).
    ``clear_global``: with a server, remove the global commands, so that server (a
    development one) does not show each command twice, its own and the global one."""
    import discord

    from bot.discord_bot import CampfireBot

    if settings.discord_token is None:
        raise ConfigError("DISCORD_TOKEN: syncing commands needs the bot's token.")
    bot = CampfireBot(settings, commands_only=True)
    async with bot:
        try:
            await bot.login(settings.discord_token.get_secret_value())
        except discord.LoginFailure:
            raise ConfigError("DISCORD_TOKEN: Discord refused this token.") from None
        guild = discord.Object(guild_id) if guild_id else None
        if guild is not None:
            bot.tree.copy_global_to(guild=guild)
        try:
            synced = await bot.tree.sync(guild=guild)
        except discord.RateLimited as limited:
            hours = limited.retry_after / 3600
            raise ConfigError(
                "Discord allows 200 new commands a day "
                + (f"in server {guild_id}" if guild_id else "for the bot")
                + f" and has taken its fill: try again in about {hours:.1f} hours (a sync of "
                "commands already registered costs nothing)."
            ) from None
        duplicated = []
        if guild is not None:
            # A server's own commands show beside the global ones of the same name (discord-
            # api-docs, Application Commands, "Registering a Command"): each twice.
            if clear_global:
                bot.tree.clear_commands(guild=None)
                await bot.tree.sync()  # removing commands creates none: nothing of the 200
            else:
                duplicated = await bot.tree.fetch_commands()
    where = f"server {guild_id}" if guild_id else "every server (may take up to an hour)"
    print(f"Synced {len(synced)} commands to {where}: {', '.join(c.name for c in synced)}")
    if clear_global:
        print("Removed the global commands: only this server has them now.")
    elif duplicated:
        print(
            f"The bot also has {len(duplicated)} global commands, so this server shows each "
            "command twice. For a development server, run `sync --guild ID --clear-global` "
            "(and `sync` again, without --guild, before the bot goes live)."
        )


def _invite(settings: Settings, client_id: int | None) -> None:
    from bot.invite import client_id_from_token, invite_text

    if client_id is None:
        if settings.discord_token is None:
            raise ConfigError(
                "The invite link needs the application's id: set DISCORD_TOKEN, or give "
                "--client-id ID (Developer Portal → General Information → Application ID)."
            )
        client_id = client_id_from_token(settings.discord_token.get_secret_value())
    print(invite_text(client_id))


async def _db_upgrade(settings: Settings) -> None:
    from engine.storage.database import Database

    settings.ensure_data_dir()
    db = Database(settings.effective_database_url)
    await db.migrate()
    await db.dispose()
    print("The database is at the newest schema.")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bot", description="Campfire")
    sub = parser.add_subparsers(dest="command")
    console = sub.add_parser("console", help="play in this terminal")
    console.add_argument("--model-url", help="an OpenAI-compatible endpoint (else the setting)")
    console.add_argument("--model", help="the model name at that endpoint")
    console.add_argument("--database-url", help="another database (else the setting)")
    console.add_argument(
        "--data-dir",
        help="the data folder for this run, as CAMPFIRE_DATA_DIR sets it (else the setting)",
    )
    console.add_argument(
        "--server",
        action="store_true",
        help="play in a server channel, as several members (/as NAME switches who types)",
    )
    sync = sub.add_parser("sync", help="register the slash commands with Discord")
    sync.add_argument("--guild", type=int, help="only this server (takes effect at once)")
    sync.add_argument(
        "--clear-global",
        action="store_true",
        help="with --guild: remove the global commands, so that server shows each once",
    )
    db = sub.add_parser("db", help="database maintenance")
    db.add_argument("action", choices=["upgrade"])
    invite = sub.add_parser("invite", help="the link that adds the bot to a server")
    invite.add_argument(
        "--client-id", type=int, help="the application's id (else read from DISCORD_TOKEN)"
    )
    args = parser.parse_args(argv)

    try:
        overrides = {
            name: value
            for name, value in (
                ("model_url", getattr(args, "model_url", None)),
                ("model_name", getattr(args, "model", None)),
                ("database_url", getattr(args, "database_url", None)),
                ("data_dir", getattr(args, "data_dir", None)),
            )
            if value
        }
        settings = load_settings(**overrides)
        if settings.require_secret_key:
            # Before anything starts or is written: a hosted deployment must not run on a key
            # generated into its data folder.
            settings.resolve_secret_key()
        interactive = args.command == "console" or (
            args.command is None and settings.discord_token is None
        )
        configure_logging(settings, to_file=interactive)
        if args.command == "db":
            asyncio.run(_db_upgrade(settings))
        elif args.command == "sync":
            if args.clear_global and args.guild is None:
                raise ConfigError("--clear-global goes with --guild ID (the server to keep them).")
            asyncio.run(_sync(settings, args.guild, clear_global=args.clear_global))
        elif args.command == "invite":
            _invite(settings, args.client_id)
        elif interactive:
            asyncio.run(_console(settings, server=getattr(args, "server", False)))
        else:
            asyncio.run(_discord(settings))
    except ConfigError as error:
        print(error, file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
