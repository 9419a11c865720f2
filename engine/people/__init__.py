"""The people floor: who may do what, and what each person or server is allowed. Rights
(``access``, the one place that decides them), accounts, profiles and guests, blocks, the rate
and spend limits, the caps on adventures, the party and the host's controls.

May import: ``engine.platform`` and below.
"""
