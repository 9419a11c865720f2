"""The story's typed narrative state: entities, where they are, what they hold, what is true,
how they relate, and the threads left open (docs/DESIGN.md §4, "Narrative state")."""
