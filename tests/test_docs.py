"""The README and the pages under docs/: the README starts short and its commands stay true,
every link between the pages leads somewhere, and the pages that hold a table hold all of it
(every setting: ``test_config.py``; every slash command here)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md")), ROOT / "tests" / "README.md"]
#: A link in Markdown: ``[text](target)``; the target's own parentheses are never nested here.
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    headings = re.findall(r"^#+ (.+)$", page.read_text(), flags=re.MULTILINE)
    return {_anchor(heading) for heading in headings}


def test_every_link_between_the_pages_leads_somewhere():
    broken = []
    for page in PAGES:
        for target in LINK.findall(page.read_text()):
            if re.match(r"[a-z]+:", target):
                continue  # a web address
            path, _, anchor = target.partition("#")
            where = (page.parent / path).resolve() if path else page
            if not where.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
            elif anchor and where.suffix == ".md" and anchor not in _anchors(where):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert broken == []


def test_the_readme_starts_with_a_short_quick_start_whose_commands_are_true():
    text = README.read_text()
    quick = text[text.index("## Quick start") : text.index("\n## ", text.index("## Quick start"))]
    assert len(quick.strip().splitlines()) <= 30
    # One command runs Campfire, one runs the tests, as CI runs them.
    for script in ("scripts/run", "scripts/test"):
        assert f"\n{script} " in quick
        assert os.access(ROOT / script, os.X_OK)
    assert "exec scripts/test" in (ROOT / ".ci" / "run").read_text()
    assert "CAMPFIRE_MODEL_URL=http://localhost:11434/v1 CAMPFIRE_MODEL_NAME=" in quick
    assert "CAMPFIRE_DATA_DIR" in quick and "--data-dir" in quick
    for step in ("scripts/run invite", "scripts/run sync", "DISCORD_TOKEN"):
        assert step in quick
    # Each page the long parts moved to is linked from the README.
    for page in ("commands", "configuration", "console", "operations", "testing"):
        assert f"(docs/{page}.md)" in text


def test_the_readme_and_the_command_page_name_every_shipped_scenario():
    builtin = ROOT / "engine" / "library" / "scenarios" / "builtin"
    titles = [json.loads(path.read_text())["title"] for path in sorted(builtin.glob("*.json"))]
    # A title's words, without what it says in brackets ("The Bandit Camp (RPG world state)").
    names = [title.split(" (")[0] for title in titles]
    numbers = {2: "Two", 3: "Three", 4: "Four", 5: "Five", 6: "Six"}
    for page in (README, ROOT / "docs" / "commands.md"):
        text = " ".join(page.read_text().split())  # as read, wherever a line breaks
        assert [name for name in names if f"*{name}*" not in text] == [], page.name
        assert f"{numbers[len(names)]} scenarios ship" in text, page.name


async def test_every_slash_command_has_its_row_in_the_command_page(env):
    rows = [
        line
        for line in (ROOT / "docs" / "commands.md").read_text().splitlines()
        if line.startswith("| `/")
    ]
    missing = [
        command.name
        for command in env.bot.tree.get_commands()
        if not any(f"/{command.name}" in row.split(" | ")[0] for row in rows)
    ]
    assert missing == []
