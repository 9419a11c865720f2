"""Retrieval for the context: the retriever seam the context engine takes (``retriever``) and
the lexical search over any table with text (``lexical``)."""
