"""The library floor: what is brought into Campfire. Scenarios (shipped and imported), the
file formats Campfire reads and writes, the knowledge library, scripting (QuickJS) and the
adventure archive.

May import: ``engine.story`` and below.
"""
