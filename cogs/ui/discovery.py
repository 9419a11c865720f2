"""The cogs and their persistent buttons, found where they are declared: no list to keep by hand.

* An **extension** is a module directly in ``cogs/`` with an ``async def setup(bot)``; they load
  in name order, except that a module naming others in ``LOAD_AFTER`` loads after them (a cog
  that adds commands to another cog's group must find the group there).
* A **persistent button** is a ``discord.ui.DynamicItem`` subclass with a ``template``, declared
  in any module under ``cogs``: discord.py rebuilds it from the ``custom_id`` of whatever message
  holds it, after a restart too, but only if the bot registered its class
  (``Client.add_dynamic_items``). A class left out of a hand-kept list would load and show and
  then die at the first restart; found here, declaring it is registering it.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING, Any

import discord

import cogs

if TYPE_CHECKING:
    from cogs.ui import CampfireBot

#: The attribute discord.py sets on a ``DynamicItem`` subclass given a ``template``.
_TEMPLATE = "__discord_ui_compiled_template__"


@cache
def extension_names() -> tuple[str, ...]:
    """``cog_load_order``, found once a process: finding it imports every cog module. The
    modules are this process's code: their set and their ``LOAD_AFTER`` do not change while it
    runs."""
    return tuple(cog_load_order())


async def load_cogs(bot: CampfireBot) -> None:
    """Every cog set up on ``bot``, in load order, by its module's ``setup``.

    Not discord.py's ``load_extension``: that executes the module afresh for each bot (every
    class and command declared again) and, when the bot closes, takes the module out of
    ``sys.modules`` walking every module name; a process's cog modules are its code, the same
    for each bot it starts (tests start hundreds: it was a twentieth of the suite's time). What a
    bot holds is still its own: a cog copies its class's commands for itself (discord.py), and
    commands added to another cog's group are copied for each bot
    (``cogs.ui.adventure_group``). Closing the bot removes its cogs."""
    for name in extension_names():
        await importlib.import_module(name).setup(bot)


def cog_load_order() -> list[str]:
    """Every cog module, in load order (by name, each after those its ``LOAD_AFTER`` names)."""
    found: dict[str, ModuleType] = {}
    for info in pkgutil.iter_modules(cogs.__path__, f"{cogs.__name__}."):
        if info.ispkg:
            continue
        module = importlib.import_module(info.name)
        if callable(getattr(module, "setup", None)):
            found[info.name] = module
    ordered: list[str] = []

    def place(name: str, path: tuple[str, ...]) -> None:
        if name in ordered:
            return
        if name in path:
            raise RuntimeError(f"LOAD_AFTER loops: {' → '.join((*path, name))}")
        for before in getattr(found[name], "LOAD_AFTER", ()):
            if before not in found:
                raise RuntimeError(f"{name} loads after {before}, which is no cog")
            place(before, (*path, name))
        ordered.append(name)

    for name in sorted(found):
        place(name, ())
    return ordered


def persistent_items() -> list[type[discord.ui.DynamicItem[Any]]]:
    """Every ``DynamicItem`` class with a template declared under ``cogs``, each module of the
    package imported first, in a fixed order."""
    for info in pkgutil.walk_packages(cogs.__path__, f"{cogs.__name__}."):
        importlib.import_module(info.name)
    found: set[type[discord.ui.DynamicItem[Any]]] = set()
    todo: list[type] = [discord.ui.DynamicItem]
    while todo:
        for sub in todo.pop().__subclasses__():
            todo.append(sub)
            if sub.__module__.startswith(f"{cogs.__name__}.") and _TEMPLATE in vars(sub):
                found.add(sub)
    return sorted(found, key=lambda item: (item.__module__, item.__qualname__))
