"""The story's line, read and written in one place.

``read``: a line's tail or token-sized window, ancestries, where two lines part, the state a
position leaves. ``write``: the version guard (``advance_version``, the one guarded UPDATE of an
adventure's head and version) and where a new turn lands (the line extended, or a fork).
"""
