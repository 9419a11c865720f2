"""Scenarios, and adventures begun from them.

``lookup``: what a server or a user can see, found by id or part of a title. ``library``: the
``ScenarioLibrary`` service behind ``/scenario`` (import with preview, list, show, export,
delete, the importer role). ``shipped``: the scenarios in ``builtin/``, seeded at start-up.
``start``: an adventure begun from a scenario, with its own copies of the scenario's text, cards
and scripts.
"""
