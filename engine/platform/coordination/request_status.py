"""What became of a request: the values of ``request_records.status``.

The request log itself (``engine.turns.requests``) records a turn's requests; these values are
here, below it, because who may retry (``engine.people.access``) and what a deleted profile
drops (``engine.people.profiles``) read them too.
"""

# What became of a request (``request_records.status``).
QUEUED, RUNNING, DONE, FAILED, REFUSED, INTERRUPTED = (
    "queued",
    "running",
    "done",
    "failed",
    "refused",
    "interrupted",
)
#: What a Retry press leaves on the request whose action it plays again (under the press's own
#: request): a second press of that Retry button, a double click, plays nothing.
RETRIED = "retried"
#: What became of a request whose action was never played, so that Retry may play it.
NEVER_PLAYED = frozenset({FAILED, REFUSED, INTERRUPTED})
