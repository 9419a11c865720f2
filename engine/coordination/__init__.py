"""Coordination: what keeps several processes (and several deliveries of one request) from
doing the same work twice.

* ``engine.leases``: the turn lease, one generation at a time per adventure;
* ``requests``: request identity, so the same interaction delivered twice plays once;
* ``jobs``: job leases, so each background job runs in one process at a time;
* ``instance``: who a process is in lease rows, a name that outlives its restarts;
* ``per_process``: the state each process deliberately keeps to itself, and why that is safe.
"""
