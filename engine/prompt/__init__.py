"""The prompt floor: the parts a prompt is built from, with no database of their own. The
context's inputs and outputs, its sections as text, the report Insights shows, story cards and
their triggers, the cap on cards, token counting.

May import: ``engine.llm`` and below.
"""
