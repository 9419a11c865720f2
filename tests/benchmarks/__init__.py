"""Benchmarks, run as scripts or with ``-m benchmark``.

Importing ``bot`` first gives a benchmark run as a script the bot's process settings (BLAS
threads among them: ``bot/__init__.py``), set before numpy is loaded.
"""

import bot  # noqa: F401
