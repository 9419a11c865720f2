"""The language-model floor: the providers (OpenAI-compatible, embedded), the choice of model
per adventure and per server with its settings, and retrieval with its embeddings.

May import: ``engine.people`` and below.
"""
