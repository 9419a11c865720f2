"""The console check of the knowledge library: import a Markdown setting file as Canon, play,
and see its passages in Insights with their source (``python -m bot`` with no token, driven by
a scripted standard input, the fake model behind it)."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.test_console import run_console

SETTING = Path(__file__).parent / "data" / "brindlemoor.md"


def test_a_canon_file_imported_in_the_console_shows_in_insights_with_its_source(
    tmp_path, fake_model
):
    setting = tmp_path / "brindlemoor.md"
    shutil.copy(SETTING, setting)
    fake_model.queue("Mira Quell looks up from her ledger.")
    done = run_console(
        tmp_path,
        fake_model,
        f"/knowledge import file:@{setting} class:canon\n!Confirm\n/knowledge list\n"
        "/do ask Mira Quell about the harbour ledger\n/insights\n/quit\n",
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "Canon — establishes what is true. Goes into your library." in out
    assert "✅ Imported brindlemoor.md as Canon into your library (4 passages)." in out
    assert "• brindlemoor.md · Canon · 4 passages · yours" in out
    insights = out[out.index("› /insights") :]
    assert "Knowledge: Canon · brindlemoor.md › Brindlemoor › The Harbour" in insights
    assert "rare term mira · ×1.5 Canon" in insights
    saved = next((tmp_path / "data" / "console-files").glob("*-turn-1-prompt.txt"))
    assert "| The harbour of Brindlemoor is a ring of reed boats" in saved.read_text()
