"""What the cogs share: the Discord side of every command that is not a command itself.

From an interaction to who acts where (``interaction``), the answer (``replies``), forms, pages,
the buttons under a turn, the preflight of the bot's own permissions, threads, the streaming
editor and the narration shown from it, round panels, previews, the gate (operator and blocks).
A cog imports these; nothing here imports a cog.
"""
