"""Discord's limits, answered with Discord's own error bodies, and its rate-limit windows."""

from __future__ import annotations

from collections import deque
from typing import Any

CONTENT_MAX = 2000
EMBED_DESCRIPTION_MAX = 4096
EMBED_TITLE_MAX = 256
EMBED_TOTAL_MAX = 6000
EMBEDS_MAX = 10
ACTION_ROWS_MAX = 5
ROW_BUTTONS_MAX = 5
CUSTOM_ID_MAX = 100
BUTTON_LABEL_MAX = 80
MODAL_TITLE_MAX = 45
TEXT_INPUT_MAX = 4000
COMPONENTS_V2_FLAG = 1 << 15


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
        if isinstance(value, str) and len(value) > limit:
            self.add(path, "BASE_TYPE_MAX_LENGTH", f"Must be {limit} or fewer in length.")

    def body(self) -> dict[str, Any] | None:
        if not self.errors:
            return None
        return {"code": 50035, "message": "Invalid Form Body", "errors": self.errors}


def empty_message_body() -> dict[str, Any]:
    return {"code": 50006, "message": "Cannot send an empty message"}


def _embed_size(embed: dict[str, Any]) -> int:
    size = len(embed.get("title") or "") + len(embed.get("description") or "")
    size += len((embed.get("footer") or {}).get("text") or "")
    size += len((embed.get("author") or {}).get("name") or "")
    for f in embed.get("fields") or []:
        size += len(f.get("name") or "") + len(f.get("value") or "")
    return size


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
    payload: dict[str, Any], *, file_count: int, partial: bool = False
) -> tuple[int, dict[str, Any]] | None:
    """Validate a message create/edit body; returns (status, error body) or None.

    ``partial`` is for edits: the empty-message check is done by the caller on the result.
    """
    errors = FormErrors()
    errors.max_length(["content"], payload.get("content"), CONTENT_MAX)
    embeds = payload.get("embeds") or []
    if len(embeds) > EMBEDS_MAX:
        errors.add(["embeds"], "BASE_TYPE_MAX_LENGTH", f"Must be {EMBEDS_MAX} or fewer in length.")
    total = 0
    for i, embed in enumerate(embeds):
        errors.max_length(
            ["embeds", i, "description"], embed.get("description"), EMBED_DESCRIPTION_MAX
        )
        errors.max_length(["embeds", i, "title"], embed.get("title"), EMBED_TITLE_MAX)
        total += _embed_size(embed)
    if total > EMBED_TOTAL_MAX:
        errors.add(
            ["embeds"],
            "MAX_EMBED_SIZE_EXCEEDED",
            f"Embed size exceeds maximum size of {EMBED_TOTAL_MAX}",
        )
    check_components(errors, payload.get("components") or [], int(payload.get("flags") or 0))
    body = errors.body()
    if body is not None:
        return 400, body
    if not partial and not message_has_body(payload, file_count):
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
    """Modal body of a type-9 callback: title, custom_ids, text input lengths."""
    errors = FormErrors()
    errors.max_length(["data", "title"], data.get("title"), MODAL_TITLE_MAX)
    errors.max_length(["data", "custom_id"], data.get("custom_id"), CUSTOM_ID_MAX)
    for i, comp in enumerate(data.get("components") or []):
        _check_modal_leaf(errors, ["data", "components", i], comp)
    body = errors.body()
    return (400, body) if body is not None else None


def _check_modal_leaf(errors: FormErrors, path: list[str | int], comp: dict[str, Any]) -> None:
    errors.max_length([*path, "custom_id"], comp.get("custom_id"), CUSTOM_ID_MAX)
    if comp.get("type") == 4:
        errors.max_length([*path, "value"], comp.get("value"), TEXT_INPUT_MAX)
        for key in ("max_length", "min_length"):
            value = comp.get(key)
            if isinstance(value, int) and value > TEXT_INPUT_MAX:
                errors.add(
                    [*path, key],
                    "NUMBER_TYPE_MAX",
                    f"int value should be less than or equal to {TEXT_INPUT_MAX}.",
                )
    for j, child in enumerate(comp.get("components") or []):
        _check_modal_leaf(errors, [*path, "components", j], child)
    if isinstance(comp.get("component"), dict):
        _check_modal_leaf(errors, [*path, "component"], comp["component"])


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
