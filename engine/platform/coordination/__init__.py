"""Coordination: what keeps several processes (and several deliveries of one request) from
doing the same work twice.

* ``leases``: the turn lease, one generation at a time per adventure;
* ``request_status``: what became of a request; the request log itself, request identity (the
  same interaction delivered twice plays once), is the turns' (``engine.turns.requests``);
* ``jobs``: job leases, so each background job runs in one process at a time;
* ``instance``: who a process is in lease rows, a name that outlives its restarts;
* ``per_process``: the state each process deliberately keeps to itself, and why that is safe.
"""
