"""The story floor: what an adventure is made of and remembers. Its line and tree (takes,
branches, undo) and the version guard every change passes, world state, narrative state,
chapters, the memory bank, steering, suggested actions, characters, claims, snapshots, rounds of
group play, authored fallback, narration hygiene, player actions.

May import: ``engine.prompt`` and below.
"""
