"""AI Dungeon compatible scripting (docs/DESIGN.md §9): QuickJS sandbox, globals and hooks."""
