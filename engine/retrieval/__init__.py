"""Retrieval for the context: the lexical search over any table with text (``lexical``)."""
