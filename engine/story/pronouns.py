"""A character's pronouns: what the story calls them where it does not use their name.

In group play an action is told in the third person ("raise my lantern" by Ann → "> Ann raises
her lantern."), and the party section tells the narrator each character's pronouns. A player
sets them with ``/character set pronouns:``, the way players write them: "she/her", "he/him",
"they/them", "it/its", or neopronouns in three or five forms ("xe/xem/xyr",
"ze/zir/zir/zirs/zirself"). Unset, a character is "they" (the singular they, as before).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from engine.errors import InvalidInput

PRONOUNS_MAX = 40
_FORM = re.compile(r"^[a-z][a-z'’-]{0,11}$")


@dataclass(frozen=True, slots=True)
class Pronouns:
    subject: str
    object: str
    possessive: str  # before a noun: "her lantern"
    possessive_pronoun: str  # on its own: "the lantern is hers"
    reflexive: str

    @property
    def label(self) -> str:
        """As players write them: "she/her"."""
        return f"{self.subject}/{self.object}"


THEY = Pronouns("they", "them", "their", "theirs", "themself")
_KNOWN = {
    p.subject: p
    for p in (
        Pronouns("she", "her", "her", "hers", "herself"),
        Pronouns("he", "him", "his", "his", "himself"),
        THEY,
        Pronouns("it", "it", "its", "its", "itself"),
    )
}

EXAMPLES = "she/her, he/him, they/them, it/its, or three or five forms such as xe/xem/xyr"


def parse_pronouns(typed: str) -> Pronouns:
    """The pronouns ``typed`` names; ``""`` is "they". Raises ``InvalidInput`` saying what is
    accepted for anything else."""
    text = " ".join(typed.split()).casefold()
    if not text:
        return THEY
    if len(text) > PRONOUNS_MAX:
        raise InvalidInput(f"Pronouns are at most {PRONOUNS_MAX} characters: {EXAMPLES}.")
    forms = [form.strip() for form in text.split("/") if form.strip()]
    if not forms or not all(_FORM.match(form) for form in forms):
        raise InvalidInput(f"Write pronouns as words with slashes: {EXAMPLES}.")
    known = _KNOWN.get(forms[0])
    if known is not None and len(forms) <= 2:
        if len(forms) == 2 and forms[1] not in (known.object, known.possessive):
            raise InvalidInput(
                f"“{forms[0]}/{forms[1]}” mixes two sets; write {known.label}, or all five "
                f"forms of your own (for example {'/'.join(_all(known))})."
            )
        return known
    if len(forms) == 3:
        subject, obj, possessive = forms
        return Pronouns(subject, obj, possessive, f"{possessive}s", f"{obj}self")
    if len(forms) == 5:
        return Pronouns(*forms)
    raise InvalidInput(f"Name a known set or three or five forms: {EXAMPLES}.")


def kept_pronouns(typed: str) -> str:
    """What is kept of ``typed`` (``stored(parse_pronouns(typed))``); raises as that does."""
    return stored(parse_pronouns(typed))


def forms_of(kept: str) -> Pronouns:
    """A character's kept pronouns; "they" for none, or for a value no longer read (a file
    imported from elsewhere is checked as it is read, so this is a guard, not a refusal)."""
    try:
        return parse_pronouns(kept)
    except InvalidInput:
        return THEY


def stored(pronouns: Pronouns) -> str:
    """How a character's pronouns are kept: "" for they, else all five forms."""
    return "" if pronouns == THEY else "/".join(_all(pronouns))


def _all(pronouns: Pronouns) -> tuple[str, ...]:
    p = pronouns
    return (p.subject, p.object, p.possessive, p.possessive_pronoun, p.reflexive)


def shown(text: str) -> str:
    """A character's kept pronouns as players write them ("she/her"); "" for they."""
    return forms_of(text).label if text else ""


def named(name: str, kept: str) -> str:
    """A character's name with their pronouns, as the party section gives them to the narrator:
    "Ann (she/her)"; the name alone for "they" (what the narrator assumes of a name)."""
    return f"{name} ({shown(kept)})" if kept else name
