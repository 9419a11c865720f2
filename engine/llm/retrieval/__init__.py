"""Retrieval for the context: the retriever seam the context engine takes (``retriever``), the
lexical search over any table with text (``lexical``), and what retrievers share once the
candidates are found (``ranking``)."""
