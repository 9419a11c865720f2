"""The turn loop: players' actions in, the narrator's reply streamed out, the turn stored.

Every turn (play, continue, retry) is a plan (``plan``), one generate step (``generate``) and
one commit (``commit``), run by the ``TurnEngine`` (``engine``). On the way in, ``intake``
decides the request, the rights and the lease; ``context`` assembles the prompt; ``insights``
shows what a turn was given.
"""
