"""Pieces shared by the app's admin screens."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.utils.html import format_html


class ReadOnlyAdmin(admin.ModelAdmin):
    """Browse and delete, never hand-edit, what indexing wrote."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def status_badge(status: str, label: str, *, title: str = "") -> str:
    """Return a coloured status label (colours in ``retrieval/admin/admin.css``)."""
    return format_html(
        '<span class="retrieval-status retrieval-status-{}" title="{}">{}</span>',
        status,
        title,
        label,
    )


def pretty_json(value: Any) -> str:
    """Return ``value`` as indented JSON for a ``<pre>`` block."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)
