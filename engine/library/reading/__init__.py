"""Reading a file's fields, and refusing one with a message that says what was wrong: shared
by every reader of files (``engine.library.formats``, ``engine.library.knowledge``), below
both."""
