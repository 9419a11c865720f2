"""Discord's limits on what a bot sends, answered with Discord's own error bodies, and its
rate-limit windows.

Every number here is documented in discord-api-docs unless its comment says otherwise: message
content and embeds in "Message" (Create Message, Embed Limits), components and modals in
"Component Reference" and "Receiving and Responding" (Interaction Response Object), uploads in
"Reference" (Uploading Files), error codes in "Opcodes and Status Codes" (JSON Error Codes).
Application command definitions are checked in ``command_schema``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .rest import FileUpload

CONTENT_MAX = 2000
NONCE_MAX = 25
EMBED_DESCRIPTION_MAX = 4096
EMBED_TITLE_MAX = 256
EMBED_FIELDS_MAX = 25
EMBED_FIELD_NAME_MAX = 256
EMBED_FIELD_VALUE_MAX = 1024
EMBED_FOOTER_TEXT_MAX = 2048
EMBED_AUTHOR_NAME_MAX = 256
EMBED_TOTAL_MAX = 6000
EMBEDS_MAX = 10
ACTION_ROWS_MAX = 5
ROW_BUTTONS_MAX = 5
CUSTOM_ID_MAX = 100
BUTTON_LABEL_MAX = 80
MODAL_TITLE_MAX = 45
MODAL_COMPONENTS_MAX = 5
MODAL_LABEL_MAX = 45
LABEL_DESCRIPTION_MAX = 100
TEXT_INPUT_MAX = 4000
TEXT_INPUT_PLACEHOLDER_MAX = 100
AUTOCOMPLETE_CHOICES_MAX = 25
CHOICE_NAME_MAX = 100
CHOICE_VALUE_MAX = 100
COMPONENTS_V2_FLAG = 1 << 15
# "The default limit is 10 MiB for all users" (Reference, Uploading Files): a bot's uploads get
# the default unless the server is boosted, so the stand-in holds every file to it, and tells
# the bot so in each interaction's ``attachment_size_limit``.
UPLOAD_FILE_MAX = 10 * 1024 * 1024
# "The maximum request size when sending a message is 25 MiB" (Message, Create Message).
UPLOAD_REQUEST_MAX = 25 * 1024 * 1024
# "description (alt text) for the file (max 1024 characters)" (Message, Attachment Object).
ATTACHMENT_DESCRIPTION_MAX = 1024


class FormErrors:
    """Collects field errors into the nested ``errors`` object of a 50035 answer."""

    def __init__(self) -> None:
        self.errors: dict[str, Any] = {}

    def add(self, path: list[str | int], code: str, message: str) -> None:
        node = self.errors
        for key in path:
            node = node.setdefault(str(key), {})
        node.setdefault("_errors", []).append({"code": code, "message": message})

    def max_length(self, path: list[str | int], value: Any, limit: int) -> None:
        if isinstance(value, str | list) and len(value) > limit:
            self.add(path, "BASE_TYPE_MAX_LENGTH", f"Must be {limit} or fewer in length.")

    def length_between(self, path: list[str | int], value: Any, low: int, high: int) -> None:
        if isinstance(value, str | list) and not low <= len(value) <= high:
            self.add(path, "BASE_TYPE_BAD_LENGTH", f"Must be between {low} and {high} in length.")

    def number_between(self, path: list[str | int], value: Any, low: int, high: int) -> None:
        if isinstance(value, int) and value < low:
            self.add(
                path, "NUMBER_TYPE_MIN", f"int value should be greater than or equal to {low}."
            )
        elif isinstance(value, int) and value > high:
            self.add(path, "NUMBER_TYPE_MAX", f"int value should be less than or equal to {high}.")

    def body(self) -> dict[str, Any] | None:
        if not self.errors:
            return None
        return {"code": 50035, "message": "Invalid Form Body", "errors": self.errors}


def empty_message_body() -> dict[str, Any]:
    return {"code": 50006, "message": "Cannot send an empty message"}


def too_large_body() -> dict[str, Any]:
    return {"code": 40005, "message": "Request entity too large"}


def check_uploads(files: Sequence[FileUpload]) -> tuple[int, dict[str, Any]] | None:
    """413 with 40005 ("Request entity too large. Try sending something smaller in size") for a
    file over the per-file limit or a request over the per-request limit."""
    sizes = [len(f.content) for f in files]
    if any(size > UPLOAD_FILE_MAX for size in sizes) or sum(sizes) > UPLOAD_REQUEST_MAX:
        return 413, too_large_body()
    return None


def _text(value: Any) -> str:
    # "Leading and trailing whitespace characters are not included (they are trimmed
    # automatically)" (Message, Embed Limits).
    return value.strip() if isinstance(value, str) else ""


def _embed_size(embed: dict[str, Any]) -> int:
    size = len(_text(embed.get("title"))) + len(_text(embed.get("description")))
    size += len(_text((embed.get("footer") or {}).get("text")))
    size += len(_text((embed.get("author") or {}).get("name")))
    for f in embed.get("fields") or []:
        size += len(_text(f.get("name"))) + len(_text(f.get("value")))
    return size


def _check_embed(errors: FormErrors, path: list[str | int], embed: dict[str, Any]) -> None:
    """Each field of Message's Embed Limits table."""
    errors.max_length([*path, "title"], _text(embed.get("title")), EMBED_TITLE_MAX)
    description = _text(embed.get("description"))
    errors.max_length([*path, "description"], description, EMBED_DESCRIPTION_MAX)
    fields = embed.get("fields") or []
    errors.max_length([*path, "fields"], fields, EMBED_FIELDS_MAX)
    for j, f in enumerate(fields):
        errors.max_length([*path, "fields", j, "name"], _text(f.get("name")), EMBED_FIELD_NAME_MAX)
        value = _text(f.get("value"))
        errors.max_length([*path, "fields", j, "value"], value, EMBED_FIELD_VALUE_MAX)
    footer = _text((embed.get("footer") or {}).get("text"))
    errors.max_length([*path, "footer", "text"], footer, EMBED_FOOTER_TEXT_MAX)
    author = _text((embed.get("author") or {}).get("name"))
    errors.max_length([*path, "author", "name"], author, EMBED_AUTHOR_NAME_MAX)


def check_components(errors: FormErrors, components: list[dict[str, Any]], flags: int) -> None:
    """Action rows, buttons per row, custom_id and label lengths (classic layout);
    for components-v2 messages only the per-component lengths."""
    if not (flags & COMPONENTS_V2_FLAG) and len(components) > ACTION_ROWS_MAX:
        errors.add(
            ["components"],
            "BASE_TYPE_BAD_LENGTH",
            f"Must be between 1 and {ACTION_ROWS_MAX} in length.",
        )
    for i, row in enumerate(components):
        children = row.get("components") or []
        if row.get("type") == 1 and len(children) > ROW_BUTTONS_MAX:
            errors.add(
                ["components", i, "components"],
                "BASE_TYPE_BAD_LENGTH",
                f"Must be between 1 and {ROW_BUTTONS_MAX} in length.",
            )
        _check_leaves(errors, ["components", i], row)


def _check_leaves(errors: FormErrors, path: list[str | int], comp: dict[str, Any]) -> None:
    errors.max_length([*path, "custom_id"], comp.get("custom_id"), CUSTOM_ID_MAX)
    if comp.get("type") == 2:
        errors.max_length([*path, "label"], comp.get("label"), BUTTON_LABEL_MAX)
    for j, child in enumerate(comp.get("components") or []):
        _check_leaves(errors, [*path, "components", j], child)
    for key in ("component", "accessory"):
        if isinstance(comp.get(key), dict):
            _check_leaves(errors, [*path, key], comp[key])


def check_message(
    payload: dict[str, Any], files: Sequence[FileUpload], *, partial: bool = False
) -> tuple[int, dict[str, Any]] | None:
    """Validate a message create/edit body and its uploads; returns (status, error body) or
    None.

    ``partial`` is for edits: the empty-message check is done by the caller on the result.
    """
    too_large = check_uploads(files)
    if too_large is not None:
        return too_large
    errors = FormErrors()
    errors.max_length(["content"], payload.get("content"), CONTENT_MAX)
    nonce = payload.get("nonce")
    if nonce is not None:
        errors.max_length(["nonce"], str(nonce), NONCE_MAX)
    embeds = payload.get("embeds") or []
    errors.max_length(["embeds"], embeds, EMBEDS_MAX)
    total = 0
    for i, embed in enumerate(embeds):
        _check_embed(errors, ["embeds", i], embed)
        total += _embed_size(embed)
    if total > EMBED_TOTAL_MAX:
        errors.add(
            ["embeds"],
            "MAX_EMBED_SIZE_EXCEEDED",
            f"Embed size exceeds maximum size of {EMBED_TOTAL_MAX}",
        )
    check_components(errors, payload.get("components") or [], int(payload.get("flags") or 0))
    for i, attachment in enumerate(payload.get("attachments") or []):
        if isinstance(attachment, dict):
            errors.max_length(
                ["attachments", i, "description"],
                attachment.get("description"),
                ATTACHMENT_DESCRIPTION_MAX,
            )
    body = errors.body()
    if body is not None:
        return 400, body
    if not partial and not message_has_body(payload, len(files)):
        return 400, empty_message_body()
    return None


def message_has_body(payload: dict[str, Any], file_count: int) -> bool:
    return bool(
        payload.get("content")
        or payload.get("embeds")
        or payload.get("components")
        or payload.get("sticker_ids")
        or payload.get("poll")
        or file_count
    )


def check_modal(data: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
    """Modal body of a type-9 callback: "title: max 45 characters", "components: between 1
    and 5 (inclusive)" (Receiving and Responding, Modal), and per component the Label's
    "label: max 45 characters" and the Text Input's lengths (Component Reference)."""
    errors = FormErrors()
    errors.max_length(["data", "title"], data.get("title"), MODAL_TITLE_MAX)
    errors.max_length(["data", "custom_id"], data.get("custom_id"), CUSTOM_ID_MAX)
    components = data.get("components") or []
    errors.length_between(["data", "components"], components, 1, MODAL_COMPONENTS_MAX)
    for i, comp in enumerate(components):
        _check_modal_leaf(errors, ["data", "components", i], comp)
    body = errors.body()
    return (400, body) if body is not None else None


def _check_modal_leaf(errors: FormErrors, path: list[str | int], comp: dict[str, Any]) -> None:
    errors.max_length([*path, "custom_id"], comp.get("custom_id"), CUSTOM_ID_MAX)
    if comp.get("type") == 18:  # Label
        errors.max_length([*path, "label"], comp.get("label"), MODAL_LABEL_MAX)
        errors.max_length([*path, "description"], comp.get("description"), LABEL_DESCRIPTION_MAX)
    if comp.get("type") == 4:  # Text Input; its own label is the deprecated form of a Label's
        errors.max_length([*path, "label"], comp.get("label"), MODAL_LABEL_MAX)
        errors.max_length([*path, "value"], comp.get("value"), TEXT_INPUT_MAX)
        errors.max_length(
            [*path, "placeholder"], comp.get("placeholder"), TEXT_INPUT_PLACEHOLDER_MAX
        )
        errors.number_between([*path, "min_length"], comp.get("min_length"), 0, TEXT_INPUT_MAX)
        errors.number_between([*path, "max_length"], comp.get("max_length"), 1, TEXT_INPUT_MAX)
    for j, child in enumerate(comp.get("components") or []):
        _check_modal_leaf(errors, [*path, "components", j], child)
    if isinstance(comp.get("component"), dict):
        _check_modal_leaf(errors, [*path, "component"], comp["component"])


def check_autocomplete(data: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
    """Choices of a type-8 callback: "max of 25 choices" (Receiving and Responding,
    Autocomplete), each a choice as in Application Commands: "1-100 character choice name",
    "value … up to 100 characters if string"."""
    errors = FormErrors()
    choices = data.get("choices") or []
    errors.max_length(["data", "choices"], choices, AUTOCOMPLETE_CHOICES_MAX)
    for i, choice in enumerate(choices):
        errors.length_between(
            ["data", "choices", i, "name"], choice.get("name"), 1, CHOICE_NAME_MAX
        )
        errors.max_length(["data", "choices", i, "value"], choice.get("value"), CHOICE_VALUE_MAX)
    body = errors.body()
    return (400, body) if body is not None else None


class SlidingWindow:
    """At most ``limit`` hits in any ``period`` seconds (how Discord's buckets behave)."""

    def __init__(self, limit: int, period: float) -> None:
        self.limit = limit
        self.period = period
        self.hits: deque[float] = deque()

    def _trim(self, now: float) -> None:
        while self.hits and now - self.hits[0] >= self.period:
            self.hits.popleft()

    def try_hit(self, now: float) -> float | None:
        """Record a hit and return None, or return the seconds until one would be allowed."""
        self._trim(now)
        if len(self.hits) >= self.limit:
            return max(self.hits[0] + self.period - now, 0.001)
        self.hits.append(now)
        return None

    def remaining(self, now: float) -> int:
        self._trim(now)
        return max(self.limit - len(self.hits), 0)

    def reset_after(self, now: float) -> float:
        """Seconds until the oldest hit leaves the window (a slot frees up)."""
        self._trim(now)
        if not self.hits:
            return 0.0
        return max(self.hits[0] + self.period - now, 0.001)


# Edits of messages older than an hour: "30046 Maximum number of edits to messages older than 1
# hour reached. Try again later" (Opcodes and Status Codes). The docs give neither the number
# nor the window (Discord does not document it; discord-api-docs issue 4413), and bot authors
# report about three per channel in 20 s. The stand-in holds a bot to fewer: three such edits
# per channel in any 60 s. Bots see it as a 429 carrying code 30046 and the rate-limit headers
# with Via, as a pacing 429 (``routes_messages.old_message_refusal``): discord.py sleeps its
# retry_after and retries up to five times unless the bot gives up first.
OLD_MESSAGE_AGE_S = 3600.0
OLD_MESSAGE_EDITS = 3
OLD_MESSAGE_EDIT_PERIOD_S = 60.0


class OldMessageEdits:
    """Counts edits of messages older than an hour, per channel."""

    def __init__(self) -> None:
        self.windows: dict[int, SlidingWindow] = {}

    def check(
        self, channel_id: int, created: float, now: float
    ) -> tuple[int, dict[str, Any]] | None:
        """Record an edit of a message made at ``created``; the refusal when over the limit."""
        if now - created < OLD_MESSAGE_AGE_S:
            return None
        window = self.windows.setdefault(
            channel_id, SlidingWindow(OLD_MESSAGE_EDITS, OLD_MESSAGE_EDIT_PERIOD_S)
        )
        retry = window.try_hit(now)
        if retry is None:
            return None
        return 429, {
            "message": "Maximum number of edits to messages older than 1 hour reached. "
            "Try again later",
            "code": 30046,
            "retry_after": round(retry, 3),
            "global": False,
        }
