"""The three classes of imported text, and what each class decides.

The class is load-bearing: it chooses the words a passage is framed with in the prompt, the
multiplier on its relevance (a multiplier, never an additive bonus: a passage that was not
admitted scores nothing, and nothing times a weight is still nothing, so irrelevant Canon stays
out), and the most of the knowledge section's budget its passages may take.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class KnowledgeClass(StrEnum):
    CANON = "canon"
    REFERENCE = "reference"
    INSPIRATION = "inspiration"


@dataclass(frozen=True, slots=True)
class ClassRules:
    #: How the class is named to people and in the prompt.
    name: str
    #: What a passage of this class is, as the prompt frames it.
    framing: str
    #: The multiplier on an admitted passage's relevance.
    weight: float
    #: The most of the knowledge section's budget this class's passages may take.
    budget_share: float
    #: What /knowledge import and list say of the class.
    meaning: str


RULES: dict[KnowledgeClass, ClassRules] = {
    KnowledgeClass.CANON: ClassRules(
        "Canon",
        "true in this world; the story must not contradict it",
        1.5,
        1.0,
        "establishes what is true",
    ),
    KnowledgeClass.REFERENCE: ClassRules(
        "Reference",
        "background for detail; it establishes nothing",
        1.0,
        0.6,
        "informs detail without establishing anything",
    ),
    KnowledgeClass.INSPIRATION: ClassRules(
        "Inspiration",
        "for tone and style only; take no facts from it",
        0.75,
        0.25,
        "sets tone and introduces no facts",
    ),
}


def class_named(name: str) -> KnowledgeClass | None:
    """The class a label or an option names ("Canon", "canon"), or None."""
    try:
        return KnowledgeClass(name.strip().lower())
    except ValueError:
        return None
