"""The knowledge library (docs/DESIGN.md §8): setting notes imported as ``.txt``/``.md`` files
(``library``), cut into passages at their headings (``chunking``), retrieved for each turn
through the retriever seam (``retrieval``) and framed in the prompt as quoted data by their
class (``classes``, ``prompt``)."""
