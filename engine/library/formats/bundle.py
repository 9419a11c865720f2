"""Campfire's own scenario bundle, which is also the AI-DnD scenario format it grew from.

One JSON object per scenario, snake_case, the shape of the files in
``engine/library/scenarios/builtin`` (the shipped scenarios are bundles; seeding reads them with
this module)::

    {"campfire": "scenario", "version": 1,
     "title", "icon", "description", "tags", "prompt", "plot_essentials", "authors_note",
     "ai_instructions", "stat_schema", "suggestions" (true, false: no suggested actions),
     "fallback" (lines that stand in for a failed narration),
     "story_cards": [{"title", "type", "keys", "entry", "description", "always_on",
                      "lore" (world-info options, engine.prompt.lore; only when set)}],
     "lore_defaults": {"case_sensitive", "whole_words", "scan_depth", "recurse",
                       "group_scoring"}
                     (options for the story cards that do not set them; an option's own
                      apply to its cards, else its parent's),
     "scripts": [{"name", "description", "enabled", "shared_library", "on_input",
                  "on_model_context", "on_output"}],
     "options": [<a bundle without the marker>, …],
     "openings": [{"text", "group_only"}, …]   (chosen at /start after the prompt, the first)
     "chapters": […], "nudge_after"}   (chapters and beats: engine.story.chapters.plan)

The marker names the format; without it the same reader takes AI-DnD's files, whose names
differ only in places: ``memory`` for plot essentials, cards with ``name``/``notes``, scripts
with ``library_js``/``input_js``/``context_js``/``output_js``, tags as one comma string. The
shipped files also carry ``key`` (their identity for re-seeding) and ``credits``.
"""

from __future__ import annotations

from typing import Any

from engine.library.formats.draft import ImportedCard, ImportedScript, Opening, ScenarioDraft
from engine.library.formats.lorebook_options import apply_book_defaults, book_defaults
from engine.library.reading.fields import Fields
from engine.story.chapters.plan import read_plan, write_plan
from engine.story.fallback import read_lines

MARKER = "campfire"
KIND = "scenario"
VERSION = 1
FLAT_KEYS = (
    "story_cards",
    "scripts",
    "authors_note",
    "ai_instructions",
    "plot_essentials",
    "stat_schema",
)


def is_bundle(raw: dict[str, Any]) -> bool:
    return raw.get(MARKER) == KIND


def looks_flat(raw: dict[str, Any]) -> bool:
    """AI-DnD's (and the shipped files') snake_case fields."""
    return any(key in raw for key in FLAT_KEYS)


def read_bundle(
    raw: Any,
    path: str = "",
    *,
    fallback_title: str = "",
    lore_defaults: dict[str, Any] | None = None,
) -> ScenarioDraft:
    f = Fields(raw, path)
    # Read before the cards: a wrong one refuses the file whatever else it holds.
    defaults = book_defaults(f) or dict(lore_defaults or {})
    draft = ScenarioDraft(
        title=f.text("title", "name", default=fallback_title),
        icon=f.text("icon"),
        description=f.text("description"),
        tags=[tag.strip() for tag in f.words("tags")],
        content_rating=f.text("content_rating", "contentRating"),
        prompt=f.text("prompt"),
        plot_essentials=f.text("plot_essentials", "memory"),
        authors_note=f.text("authors_note"),
        ai_instructions=f.text("ai_instructions"),
        stat_schema=f.mapping("stat_schema"),
        chapters=read_plan(raw, path),
        suggestions=f.flag("suggestions", default=True),
        # One line may come as text; a list is a list of lines (commas are no separators).
        fallback=read_lines(
            [f.text("fallback")]
            if f.has("fallback") and isinstance(f.raw["fallback"], str)
            else f.words("fallback")
        ),
    )
    for p, item in f.items("story_cards"):
        c = Fields(item, p)
        draft.cards.append(
            ImportedCard(
                title=c.text("title", "name"),
                type=c.text("type", default="custom"),
                keys=",".join(c.words("keys")),
                entry=c.text("entry", "value"),
                description=c.text("description", "notes"),
                always_on=c.flag("always_on"),
                lore=c.raw.get("lore") or {},
            )
        )
    apply_book_defaults(draft.cards, defaults)
    draft.scripts.extend(read_scripts(f))
    for p, item in f.items("openings"):
        o = Fields(item, p)
        draft.openings.append(Opening(o.text("text"), o.flag("group_only")))
    for p, item in f.items("options"):
        draft.options.append(
            read_bundle(
                item, p, fallback_title=f"Option {len(draft.options) + 1}", lore_defaults=defaults
            )
        )
    return draft


def read_scripts(f: Fields) -> list[ImportedScript]:
    """The ``scripts`` of a bundle or an adventure file (the ``*_js`` names are AI-DnD's)."""
    scripts = []
    for p, item in f.items("scripts"):
        s = Fields(item, p)
        scripts.append(
            ImportedScript(
                name=s.text("name"),
                description=s.text("description"),
                enabled=s.flag("enabled", default=True),
                shared_library=s.text("shared_library", "library_js"),
                on_input=s.text("on_input", "input_js"),
                on_model_context=s.text("on_model_context", "context_js"),
                on_output=s.text("on_output", "output_js"),
            )
        )
    return scripts


def write_bundle(draft: ScenarioDraft, *, top: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {MARKER: KIND, "version": VERSION} if top else {}
    out |= {
        "title": draft.title,
        "icon": draft.icon,
        "description": draft.description,
        "tags": list(draft.tags),
        **({"content_rating": draft.content_rating} if draft.content_rating else {}),
        "prompt": draft.prompt,
        "plot_essentials": draft.plot_essentials,
        "authors_note": draft.authors_note,
        "ai_instructions": draft.ai_instructions,
        "stat_schema": draft.stat_schema,
        "story_cards": [
            {
                "title": c.title,
                "type": c.type,
                "keys": c.keys,
                "entry": c.entry,
                "description": c.description,
                "always_on": c.always_on,
                **({"lore": c.lore} if c.lore else {}),
            }
            for c in draft.cards
        ],
        "scripts": [
            {
                "name": s.name,
                "description": s.description,
                "enabled": s.enabled,
                "shared_library": s.shared_library,
                "on_input": s.on_input,
                "on_model_context": s.on_model_context,
                "on_output": s.on_output,
            }
            for s in draft.scripts
        ],
    }
    out |= write_plan(draft.chapters)
    if not draft.suggestions:
        out["suggestions"] = False
    if draft.fallback:
        out["fallback"] = list(draft.fallback)
    if draft.openings:
        out["openings"] = [{"text": o.text, "group_only": o.group_only} for o in draft.openings]
    if draft.options:
        out["options"] = [write_bundle(option, top=False) for option in draft.options]
    return out
