"""A named actor's verbs made to agree with them, over the whole action.

A player types an action as they would for "You", in the verb's base form; in group play the
actor is a character, and every verb of the action takes the third person singular:
"raise my lantern and climb the steps" by Brother Tomas → "raises … and climbs the steps",
"draw, aim and fire" → "draws, aims and fires".

Written by hand, on purpose. Putting a verb known to be one in the third person is regular
English (the spelling rules below and a few irregulars: be, have, do, go); the hard part is
knowing which words are verbs, and no small, kept library says so without a tagger and its
model: ``inflect`` puts nothing in the third person, ``lemminflect`` (last released in 2022)
inflects a word it is told is a verb, spaCy and NLTK load models that cannot be fetched at run
time. An action is a short imperative, and the rules follow its shape:

1. The action's first word is its verb, past openers and adverbs ("then run", "quickly hide").
2. After "and", "or", "but", "then", a comma, a semicolon or a sentence's end, the next word
   (past adverbs) is a verb when
   a. "then" comes before it ("open the door, then step inside"),
   b. the clause before it was a verb alone, as in a list of verbs ("draw, aim and fire"),
   c. it is a common action verb seldom met bare as a noun (``ACTION_VERBS``: "climb"),
   d. or what follows it starts an object: an article, a possessive, an object pronoun, a
      quote, a name, a direction ("and light it", "and whistle a tune", "and head north").
   Otherwise it is kept as typed: "draw my sword and shield" draws the shield too.
3. "I" opening a coordinated clause is its subject, and the verb after it agrees ("… and I
   climb" → "… and Ann climbs"; ``engine.story.actions`` writes the name for the pronoun).

Limits, kept as known:
- A word of ``ACTION_VERBS`` bare after "and" as a noun is taken for a verb ("rock and roll");
  a verb outside it with nothing after it is not ("grab the rope and vault").
- "and" after an infinitive joins the action's own verb ("try to open it and step in" →
  "tries to open it and steps in"), though English allows either reading.
- "I" elsewhere past the opening is left to the pronoun rule without agreement: the rules
  cannot tell "so I climb" (present) from "what I saw" (past).
- Words in quotes are speech, never touched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["ACTION_VERBS", "third_person"]

# A verb's third person: the irregulars and contractions, then the spelling rules (_agree).
_IRREGULAR = {
    "am": "is",
    "'m": "is",
    "are": "is",
    "'re": "is",
    "be": "is",
    "were": "was",
    "have": "has",
    "'ve": "has",
    "do": "does",
    "go": "goes",
    "echo": "echoes",
    "veto": "vetoes",
    # A base form ending in a single "s", which the rule below would take for agreed already.
    "focus": "focuses",
    "don't": "doesn't",
    "haven't": "hasn't",
    "aren't": "isn't",
    "weren't": "wasn't",
}
# Words that may stand where a verb is expected but are no present-tense verb to agree:
# modals, the past, articles, prepositions, subject pronouns ("and she follows" has its own
# subject).
_KEEP_AS_TYPED = frozenset(
    "can could will would shall should may might must was did had "
    "can't couldn't won't wouldn't shouldn't mustn't didn't "
    "to the a an my his her their its this that these those with at in on into "
    "then and or but also still just again not never "
    "he she it we they you i there here".split()
)
# Where to: never a verb, though "then" may come before it ("go north and then east"), and
# after a verb as its object ("and head north"). "back", "up" and the like are left out of the
# latter: "put the sword and shield back" puts the shield back too.
_WHERE_TO = frozenset(
    "north south east west northward southward eastward westward upstairs downstairs home".split()
)
_DIRECTIONS = _WHERE_TO | frozenset("left right up down back inside outside forward".split())
# Words before a verb that leave it to agree: "then run" → "then runs".
_OPENERS = frozenset("then also still just again never always even only now first soon".split())
# Verbs ending in "ly", which the adverb rule would pass over ("reply to Mira").
_LY_VERBS = frozenset(
    "reply apply rely supply comply imply multiply ally rally tally bully sully dally".split()
)
# What joins clauses: each starts a clause whose first word may be a verb (rule 2).
_COORDINATORS = frozenset("and or but then".split())
# Words that start an object after a verb: "climb the steps", "hug her", "head north".
_OBJECT_STARTS = frozenset(
    "the a an this that these those some any every each both another "
    "my your his her its our their him them me us it".split()
)
# What may follow a verb with no object in a list of verbs ("turn around and run").
_PARTICLES = frozenset(
    "up down out off away back around aside forward forwards backward backwards over "
    "again inside outside".split()
)
# Common action verbs players type, which seldom stand bare after "and" as nouns. Words as
# often nouns ("shield", "light", "watch", "duck", "drink", "rest", "hand", "lock") are left
# out: they agree only by rules 2a, 2b or 2d.
ACTION_VERBS = frozenset(
    """
    accept agree aim answer apologise apologize approach ask attack beckon beg bend bite
    blink bless block brace break breathe bring bury burn buy call carry cast catch charge
    chase check cheer choose clap clean climb close collect conjure continue crawl creep
    crouch cry curtsy cut dash decide defend descend dig dive dodge drag draw drop eat embrace
    enter escape evade examine explain explore fall feed feel fetch fight fill find fire fix
    flee fling float focus follow forget gasp gather gaze get give glance go grab greet grin
    groan growl heal help hesitate hide hit hold hop hug hum hurry ignore inspect introduce
    investigate invoke jump keep kick kill kiss kneel knock laugh lean leap learn leave lie
    lift listen load look lower make march meditate meet mount move mutter nod notice obey
    offer open pace pause pay peek peer pick plead point pour pray prepare press pretend
    promise pull punch push put raise reach read refuse reload repair reply rescue retreat
    return reveal ride rise roll rub run rush salute say scan scream search see seize send
    set shake sheathe shoot shout shove show shrug shut sigh sing sink sip sit slam slash
    sleep slide slip smash smell smile sneak sniff speak spin spit sprint stab stand stare
    start stay steal step stomp stop strike study stumble summon surrender swallow swear
    sweep swim swing take talk tap taste tell thank think throw tie tiptoe touch toss trace
    try tug turn twist unlock unsheathe untie use vanish wait wake walk wander warn wash wave
    whisper whistle wink wipe wonder write yank yell yield
    """.split()
)

_TOKEN = re.compile(r"\"[^\"]*\"?|“[^”]*”?|[^\s\"“]+")
_TRAILING = ",;:.!?…)*"
_SIBILANT = ("s", "sh", "ch", "x", "z")


@dataclass(frozen=True, slots=True)
class _Token:
    start: int
    end: int
    text: str

    @property
    def quote(self) -> bool:
        return self.text[:1] in '"“'

    @property
    def core(self) -> str:
        return "" if self.quote else self.text.rstrip(_TRAILING)

    @property
    def lower(self) -> str:
        return self.core.lower()

    @property
    def trailing(self) -> str:
        return "" if self.quote else self.text[len(self.core) :]


@dataclass(frozen=True, slots=True)
class _Clause:
    #: What joins it to the clause before: coordinators, "," (a comma or a semicolon), "."
    #: (a sentence's end).
    links: frozenset[str]
    #: Its tokens, by index, the coordinators left out.
    tokens: tuple[int, ...]


def third_person(text: str) -> str:
    """``text``, an action in the base form, with each verb found by the rules above made to
    agree with a named actor. Words that already agree ("nocks") are kept as typed."""
    tokens = [_Token(m.start(), m.end(), m[0]) for m in _TOKEN.finditer(text)]
    verbs = _verbs(tokens, _clauses(tokens))
    if not verbs:
        return text
    out, at = [], 0
    for index in sorted(verbs):
        token = tokens[index]
        out += [text[at : token.start], _agree(token.text)]
        at = token.end
    out.append(text[at:])
    return "".join(out)


def _clauses(tokens: list[_Token]) -> list[_Clause]:
    clauses: list[_Clause] = []
    links: set[str] = set()
    current: list[int] = []
    for index, token in enumerate(tokens):
        if token.lower in _COORDINATORS and not token.trailing:
            if current:
                clauses.append(_Clause(frozenset(links), tuple(current)))
                links, current = set(), []
            links.add(token.lower)
            continue
        current.append(index)
        if any(mark in token.trailing for mark in ".!?…"):
            clauses.append(_Clause(frozenset(links), tuple(current)))
            links, current = {"."}, []
        elif any(mark in token.trailing for mark in ",;"):
            clauses.append(_Clause(frozenset(links), tuple(current)))
            links, current = {","}, []
    if current:
        clauses.append(_Clause(frozenset(links), tuple(current)))
    return clauses


def _verbs(tokens: list[_Token], clauses: list[_Clause]) -> set[int]:
    """The tokens to agree, by index."""
    verbs: set[int] = set()
    opening = True  # no verb met yet: the first word past openers is the verb (rule 1)
    lone = False  # the clause before was a verb alone: a list of verbs goes on (rule 2b)
    for clause in clauses:
        at = _past_adverbs(tokens, clause.tokens)
        first = tokens[clause.tokens[at]]
        if opening and at == len(clause.tokens) - 1 and _adverb(first) and "," in first.trailing:
            continue  # "slowly, open the door": the verb is still to come
        verb = clause.tokens[at] if opening else _coordinated_verb(tokens, clause, at, lone)
        opening = False
        lone = verb is not None and all(
            _adverb(tokens[i]) or tokens[i].lower in _PARTICLES
            for i in clause.tokens[clause.tokens.index(verb) + 1 :]
        )
        if verb is not None:
            verbs.add(verb)
    return verbs


def _past_adverbs(tokens: list[_Token], indexes: tuple[int, ...], at: int = 0) -> int:
    """Where the clause's verb may stand: past openers and adverbs, never past its last word."""
    while at < len(indexes) - 1 and _adverb(tokens[indexes[at]]):
        at += 1
    return at


def _adverb(token: _Token) -> bool:
    word = token.lower
    return word in _OPENERS or (len(word) > 3 and word.endswith("ly") and word not in _LY_VERBS)


def _coordinated_verb(tokens: list[_Token], clause: _Clause, at: int, lone: bool) -> int | None:
    """The verb opening a coordinated clause (rules 2 and 3), or None."""
    index = clause.tokens[at]
    word = tokens[index]
    if word.quote or not word.core:
        return None
    if word.lower == "i" and at + 1 < len(clause.tokens):
        # "… and I climb": the clause's own subject; the word after it is its verb.
        after = _past_adverbs(tokens, clause.tokens, at + 1)
        return clause.tokens[after]
    if word.lower in _KEEP_AS_TYPED or word.lower in _DIRECTIONS:
        return None
    # A capitalised word inside a sentence is a name ("and Mira follows"), not a verb.
    if word.core[:1].isupper() and "." not in clause.links:
        return None
    if "then" in clause.links or lone or word.lower in ACTION_VERBS:
        return index
    following = tokens[clause.tokens[at + 1]] if at + 1 < len(clause.tokens) else None
    if following is not None and not word.trailing and _starts_object(following):
        return index
    return None


def _starts_object(token: _Token) -> bool:
    if token.quote:
        return True
    if token.lower in _OBJECT_STARTS or token.lower in _WHERE_TO:
        return True
    # A name: "and ask Wren".
    return token.core[:1].isupper() and token.lower != "i"


def _agree(word: str) -> str:
    core = word.rstrip(_TRAILING)
    end = word[len(core) :]
    lower = core.lower()
    if lower in _IRREGULAR:
        agreed = _IRREGULAR[lower]
    elif (
        not core.isalpha()
        or lower in _KEEP_AS_TYPED
        or core.isupper()
        or (lower.endswith("s") and lower[-2:] != "ss")
    ):
        # No word, no verb to agree, an acronym, or agreed already ("nocks").
        return word
    elif lower.endswith(_SIBILANT):
        agreed = f"{lower}es"
    elif lower.endswith("y") and len(lower) > 1 and lower[-2] not in "aeiou":
        agreed = f"{lower[:-1]}ies"
    else:
        agreed = f"{lower}s"
    if core[:1].isupper():
        agreed = agreed[:1].upper() + agreed[1:]
    return agreed + end
