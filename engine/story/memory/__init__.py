"""The memory bank: memories and the story summary, their cursors, retrieval and jobs."""
