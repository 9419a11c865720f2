"""Which sampling settings each kind of model server accepts, and under what name.

A turn's sampling settings (``GenerationParams``: top-p, min-p, the three penalties, the stop
strings) go only to a server that accepts them: OpenAI's API refuses a request with a field
it does not know ("Unrecognized request argument supplied", a 400, so the turn would fail),
and a server that ignores one would leave a player believing a setting works that does not.
What is left out is said in Insights (``SamplingSent.left_out``) and in ``/adventure settings``.

What each accepts, from its own documentation or source:

* **OpenAI** (https://platform.openai.com/docs/api-reference/chat/create): ``top_p``,
  ``presence_penalty``, ``frequency_penalty``, ``stop`` of up to 4 sequences. Neither min-p nor
  a repetition penalty.
* **llama.cpp's server** (``tools/server/README.md``: ``/v1/chat/completions`` takes the
  ``/completion`` options too): ``top_p``, ``min_p``, ``repeat_penalty``, ``presence_penalty``,
  ``frequency_penalty``, ``stop`` (a list of any length).
* **vLLM** (https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html, "Extra
  parameters"): OpenAI's, and ``repetition_penalty`` and ``min_p``.
* **KoboldCpp** (``koboldcpp.py``, ``transform_genparams``): ``repetition_penalty`` (or
  ``repeat_penalty``, ``rep_pen``), ``min_p``, ``top_p``, ``presence_penalty`` and ``stop``;
  ``frequency_penalty`` only stands in for a missing presence penalty, so it is not sent.
* **OpenRouter** (https://openrouter.ai/docs/api-reference/parameters): OpenAI's, and
  ``repetition_penalty`` and ``min_p``.
* **Ollama** (https://docs.ollama.com/api/openai-compatibility): ``top_p``,
  ``presence_penalty``, ``frequency_penalty``, ``stop``; its ``/v1`` takes no repetition penalty
  or min-p.
* **The embedded model** (llama-cpp-python's ``Llama.create_chat_completion``): ``top_p``,
  ``min_p``, ``repeat_penalty``, ``presence_penalty``, ``frequency_penalty``, ``stop``.

An endpoint Campfire does not recognise is sent OpenAI's own fields only, stop strings held to
OpenAI's four: any server that speaks the dialect takes those. The operator names their
server's kind (``CAMPFIRE_MODEL_KIND``) to have the rest sent; a player's own endpoint is known
by its host (OpenAI's, OpenRouter's).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from engine.llm.sampling import number, shown_stop


@dataclass(frozen=True, slots=True)
class Dialect:
    """What one kind of server accepts of the sampling settings."""

    #: As players read it: "OpenAI", "llama.cpp's server".
    name: str
    #: The field its repetition penalty goes in; None: it takes none.
    repetition: str | None = None
    min_p: bool = False
    presence: bool = True
    frequency: bool = True
    #: The most stop strings it takes; None: as many as a turn has.
    max_stop: int | None = None


DIALECTS: dict[str, Dialect] = {
    "openai": Dialect("OpenAI", max_stop=4),
    "llama.cpp": Dialect("llama.cpp's server", repetition="repeat_penalty", min_p=True),
    "vllm": Dialect("vLLM", repetition="repetition_penalty", min_p=True),
    "koboldcpp": Dialect("KoboldCpp", repetition="repetition_penalty", min_p=True, frequency=False),
    "openrouter": Dialect("OpenRouter", repetition="repetition_penalty", min_p=True),
    "ollama": Dialect("Ollama"),
    "compatible": Dialect("an OpenAI-compatible server", max_stop=4),
}
#: The kinds an operator may name (``CAMPFIRE_MODEL_KIND``).
KINDS = tuple(DIALECTS)
#: The embedded model: llama-cpp-python's own names.
EMBEDDED = Dialect("the embedded model", repetition="repeat_penalty", min_p=True)

#: Hosts whose kind is known: a player's own endpoint is recognised by them.
_KNOWN_HOSTS = {"api.openai.com": "openai", "openrouter.ai": "openrouter"}


def dialect_for(url: str, kind: str | None = None) -> Dialect:
    """The dialect of the server at ``url``: ``kind`` when the operator named one, else its
    host's when known, else OpenAI's own fields only."""
    if kind:
        return DIALECTS[kind]
    host = (urlsplit(url).hostname or "").lower()
    return DIALECTS[_KNOWN_HOSTS.get(host, "compatible")]


@dataclass(frozen=True, slots=True)
class SamplingSent:
    """A turn's sampling settings as one server takes them."""

    #: The request's fields, under the server's names.
    fields: dict[str, Any]
    #: What was sent, in words ("top_p 0.9", "repetition penalty 1.1 (repeat_penalty)").
    sent: tuple[str, ...]
    #: What was not, and why, in words.
    left_out: tuple[str, ...]


def sampling_for(
    dialect: Dialect,
    *,
    top_p: float | None = None,
    min_p: float | None = None,
    repetition_penalty: float | None = None,
    presence_penalty: float | None = None,
    frequency_penalty: float | None = None,
    stop: tuple[str, ...] = (),
) -> SamplingSent:
    """The settings a turn has (None: unset, the server's own default) as ``dialect`` takes
    them: the fields to send and, in words, what went and what was left out."""
    fields: dict[str, Any] = {}
    sent: list[str] = []
    left_out: list[str] = []

    def offer(label: str, field: str | None, value: float | None) -> None:
        if value is None:
            return
        if field is None:
            left_out.append(f"{label} {number(value)} ({dialect.name} does not take it)")
            return
        fields[field] = value
        sent.append(f"{label} {number(value)}" + (f" ({field})" if field != label else ""))

    offer("top_p", "top_p", top_p)
    offer("min_p", "min_p" if dialect.min_p else None, min_p)
    offer("repetition penalty", dialect.repetition, repetition_penalty)
    offer("presence_penalty", "presence_penalty" if dialect.presence else None, presence_penalty)
    offer(
        "frequency_penalty", "frequency_penalty" if dialect.frequency else None, frequency_penalty
    )
    if stop:
        kept = stop if dialect.max_stop is None else stop[: dialect.max_stop]
        fields["stop"] = list(kept)
        sent.append("stop " + ", ".join(f"“{shown_stop(s)}”" for s in kept))
        if len(kept) < len(stop):
            # The sent ones are listed; a long list of the others would only repeat them.
            dropped = stop[len(kept) :]
            what = (
                f"stop “{shown_stop(dropped[0])}”"
                if len(dropped) == 1
                else (f"the last {len(dropped)} stop strings")
            )
            left_out.append(f"{what} ({dialect.name} takes at most {dialect.max_stop})")
    return SamplingSent(fields, tuple(sent), tuple(left_out))
