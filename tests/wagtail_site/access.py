"""The Wagtail site's access hook: the editor "ed" sees two of the three collections."""

from __future__ import annotations

from typing import Any

EDITOR_COLLECTIONS = ["handbook", "pages"]


def collections(user: Any) -> list[str] | None:
    if getattr(user, "username", None) == "ed":
        return EDITOR_COLLECTIONS
    return None
