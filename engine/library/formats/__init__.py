"""Scenario and adventure files: reading what other tools export, writing Campfire's own.

Pure functions from bytes to drafts and back (``adventure`` also reads and writes the story
tree); nothing here talks to Discord, and only ``adventure``, ``adventure_export`` and
``story_prose`` (the story read for a prose export) touch the database.
"""
