"""The play floor: the services the front end calls to play. The play service, the adventure
shelf, plain-message actions and message links, the operator's status.

May import: ``engine.turns`` and below; nothing in the engine imports it.
"""
