"""Steering an adventure: its steering texts (``text``), its story cards (``cards``) and its
generation settings (``settings``).

Every change edits the adventure's own copy (never the scenario it started from), in one
transaction, and touches nothing else: not the story version (buttons under the newest turn stay
valid), not the story. The next turn reads the new values when it builds its context.

Who may change these is ``engine.people.access.may_steer``: in a server, the adventure's host and
members who can manage the server; in a DM, its player. Anyone may read the card list and the
settings.
"""
