"""KoboldAI's world info read as story cards: a saved story of KoboldAI (the original client and
KoboldAI United) or of KoboldAI Lite (koboldcpp's bundled UI), and Lite's world-info export.

The shapes, as those tools write and read them:

- KoboldAI's saved story (KoboldAI/KoboldAI-Client ``aiserver.py``, ``saveRequest`` and
  ``exportRequest``): ``{"gamestarted", "prompt", "memory", "authorsnote", "anotetemplate",
  "actions": [...], "worldinfo": [{key, keysecondary, content, comment, folder, selective,
  constant}], "wifolders_d": {uid: {"name", "collapsed"}}, "wifolders_l"}``. Keys are one
  comma-separated text. KoboldAI United's own saves (``"file_version"``) keep the entries in
  ``"worldinfo_v2": {"entries": {uid: {key: [...], keysecondary: [...], title, content,
  comment, folder, constant, selective, …}}}`` (``koboldai_settings.py``, ``add_item``).
- KoboldAI Lite (LostRuins/lite.koboldai.net ``index.html``, ``generate_base_storyobj``,
  ``save_wi`` and ``export_wi_to_file``) saves the same story object with its entries'
  ``keyanti``, ``probability``, ``wigroup`` and ``widisabled``, and the story's
  ``wisearchdepth``; its world-info export is the list of those entries alone.

How they match there (``checkworldinfo`` in ``aiserver.py``; Lite's world-info loop in
``index.html``): a key is found anywhere in the text, inside words too, ignoring case (United
and Lite; the first KoboldAI client matched case as written); a ``selective`` entry also needs
one of its secondary keys (SillyTavern's AND ANY), and in Lite none of its anti-keys; a
constant entry is always in; nothing recurses. So each card matches inside words
(``whole_words: false``) and ignores case (Campfire's default, as the newer tools do); an
anti-key list becomes secondary keys with NOT ANY when the entry has no secondary keys (a card
has one list of them: with both, the anti-keys are named in the preview as not kept). A folder
or Lite group (which only sorts entries, or switches a group on and off) becomes the card's
type.
"""

from __future__ import annotations

from typing import Any

from engine.library.formats.draft import ImportedCard, ScenarioDraft
from engine.library.formats.lorebook_options import OptionReport, kobold_options
from engine.library.reading.fields import Fields


def is_story(raw: dict[str, Any]) -> bool:
    """A saved KoboldAI or KoboldAI Lite story (``worldinfo`` beside its prompt or actions),
    or a KoboldAI United one (``worldinfo_v2``). AI Dungeon's 2020-21 exports spell theirs
    ``worldInfo``."""
    if raw.get("file_version") is not None and isinstance(raw.get("worldinfo_v2"), dict):
        return True
    return isinstance(raw.get("worldinfo"), list) and any(
        key in raw for key in ("gamestarted", "actions", "authorsnote", "prompt")
    )


def is_world_info(items: list[Any]) -> bool:
    """Lite's world-info export: a list of entries with a ``content`` and a text ``key``."""
    return any(
        isinstance(item, dict) and "content" in item and isinstance(item.get("key"), str)
        for item in items
    )


def read_story(raw: dict[str, Any], *, title: str, warnings: list[str]) -> ScenarioDraft:
    """The story's opening, memory and author's note as a scenario's, its world info as
    cards; the actions played after the opening are left out (a scenario starts anew)."""
    f = Fields(raw, "")
    draft = ScenarioDraft(
        title=title,
        prompt=f.text("prompt"),
        plot_essentials=f.text("memory"),
        authors_note=f.text("authorsnote", "authornote"),
    )
    actions = raw.get("actions")
    played = len(actions) if isinstance(actions, list | dict) else 0
    if isinstance(actions, dict) and isinstance(actions.get("actions"), dict):
        played = len(actions["actions"])  # United's: {"actions": {index: {...}}}
    if played:
        warnings.append(
            f"{played} action{'s' if played != 1 else ''} played after the story's opening "
            f"{'were' if played != 1 else 'was'} left out: a scenario begins at its opening."
        )
    depth = raw.get("wisearchdepth")
    if isinstance(depth, int) and not isinstance(depth, bool) and depth > 0:
        warnings.append(
            f"Lite's world-info search depth ({depth} characters) is not kept: cards scan "
            "the newest story entries instead."
        )
    if isinstance(raw.get("worldinfo_v2"), dict) and not f.has("worldinfo"):
        book = Fields(raw["worldinfo_v2"], "worldinfo_v2")
        draft.cards = _entries(book.items("entries"), {}, warnings)
    else:
        draft.cards = _entries(f.items("worldinfo"), _folders(raw), warnings)
    return draft


def read_world_info(items: list[Any], *, title: str, warnings: list[str]) -> ScenarioDraft:
    entries = [(f"[{i}]", item) for i, item in enumerate(items)]
    return ScenarioDraft(title=title, cards=_entries(entries, {}, warnings))


def _folders(raw: dict[str, Any]) -> dict[str, str]:
    """The client's folder names by uid (``wifolders_d``); a malformed map costs the names."""
    listed = raw.get("wifolders_d")
    if not isinstance(listed, dict):
        return {}
    return {
        str(uid): folder["name"]
        for uid, folder in listed.items()
        if isinstance(folder, dict) and isinstance(folder.get("name"), str)
    }


def _entries(
    items: list[tuple[str, Any]], folders: dict[str, str], warnings: list[str]
) -> list[ImportedCard]:
    cards: list[ImportedCard] = []
    report = OptionReport()
    disabled = keyless = 0
    for path, item in items:
        e = Fields(item, path)
        if e.flag("widisabled"):
            disabled += 1
            continue
        keys = e.words("key")
        always = e.flag("constant")
        if not keys and not always:
            # Neither tool ever inserts such an entry (the client does not even save it).
            keyless += 1
            continue
        title = e.text("title", "comment")
        where = f"Entry “{title[:40]}”" if title.strip() else path
        cards.append(
            ImportedCard(
                title=title,
                keys=",".join(keys),
                entry=e.text("content"),
                type=_type(e, folders)[:32] or "custom",
                always_on=always,
                lore=kobold_options(e.raw, report, where),
            )
        )
    if disabled:
        warnings.append(f"{_entries_were(disabled, 'disabled ')} left out.")
    if keyless:
        warnings.append(f"{_entries_were(keyless)} left out: no keys, and not constant.")
    warnings.extend(report.warnings())
    return cards


def _entries_were(count: int, kind: str = "") -> str:
    return f"{count} {kind}entr{'y was' if count == 1 else 'ies were'}"


def _type(e: Fields, folders: dict[str, str]) -> str:
    group = e.raw.get("wigroup")
    if isinstance(group, str) and group.strip():
        return group.strip()
    folder = e.raw.get("folder")
    if folder is None or folder == "root":
        return ""
    return folders.get(str(folder), folder if isinstance(folder, str) else "")
