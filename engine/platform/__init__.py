"""The platform floor: what every part of the engine may lean on and that knows nothing of
stories or people. What is decided once across processes (``coordination``: turn and job
leases, instances, request statuses, what each process keeps to itself), the per-adventure
action queue, what a model streams (``events``), the observer the metrics watch, text
sanitising, secret redaction, encryption.

May import: ``engine.errors``, ``engine.storage``. Nothing above.
"""
