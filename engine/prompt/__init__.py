"""The prompt floor: the parts a prompt is built from. The context's inputs and outputs, its
sections as text (pure functions), the report Insights shows, story cards and their triggers
(with the one read of an adventure's cards the context makes), the cap on cards, token counting.

May import: ``engine.llm`` and below.
"""
