"""World state: the scenario's stats, the model's proposed delta, the engine's ruling.

``schema`` parses and validates a scenario's stat schema; ``parser`` finds the model's state
block in its reply; ``referee`` applies a delta under the rules and reports what happened;
``render`` writes the state for the model's prompt and for the players.
"""
