"""Pieces shared by the app's admin screens."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html

from retrieval.services import nesting
from retrieval.services.scope import Scope


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


#: Levels of JSON the admin shows; deeper values (stored before ``MAX_JSON_DEPTH``
#: refused them) are cut there, since ``json.dumps`` recurses once per level.
SHOWN_JSON_DEPTH = 50


def pretty_json(value: Any) -> str:
    """Return ``value`` as indented JSON for a ``<pre>`` block, cut past ``SHOWN_JSON_DEPTH``."""
    return json.dumps(_shown(value), indent=2, ensure_ascii=False, sort_keys=True, default=str)


def _shown(value: Any) -> Any:
    if nesting.depth(value, stop_after=SHOWN_JSON_DEPTH) > SHOWN_JSON_DEPTH:
        return nesting.clipped(value, SHOWN_JSON_DEPTH)
    return value


class BoundedJSONFormField(forms.JSONField):
    """Django's JSON form field, neither reading nor showing JSON nested without bound.

    A value stored too deep is shown cut (its model validator then refuses it as it
    is); typed JSON too deep for Python's parser is a form error, not a 500.
    """

    def to_python(self, value: Any) -> Any:
        try:
            return super().to_python(value)
        except RecursionError:
            limit = nesting.max_json_depth()
            raise ValidationError(nesting.too_deep_message("The value", limit)) from None

    def prepare_value(self, value: Any) -> Any:
        return super().prepare_value(_shown(value))

    def has_changed(self, initial: Any, data: Any) -> bool:
        return super().has_changed(_shown(initial), data)


def scope_of(request: HttpRequest) -> Scope:
    """Return the signed-in user's :class:`Scope` (superusers see everything)."""
    cached = getattr(request, "_retrieval_scope", None)
    if cached is None:
        cached = request._retrieval_scope = Scope.for_user(request.user)
    return cached


class ScopedAdminMixin:
    """Show staff only what the access hooks let them see; superusers see all.

    ``collection_path`` and ``document_path`` lead from a row to its collection and
    document (``None``: the row belongs to no single document).
    """

    collection_path: str = "collection"
    document_path: str | None = None
    formfield_overrides = {models.JSONField: {"form_class": BoundedJSONFormField}}
    #: Rows that stand for many documents (a collection): a user restricted to some
    #: documents may neither delete them (the confirmation lists every document) nor
    #: run actions on them (they would touch hidden documents).
    spans_documents: bool = False

    def _partial(self, request: HttpRequest) -> bool:
        return self.spans_documents and scope_of(request).documents is not None

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if self._partial(request):
            return False
        return super().has_delete_permission(request, obj)  # type: ignore[misc]

    def get_actions(self, request: HttpRequest, action_location: Any = None) -> dict[str, Any]:
        if self._partial(request):
            return {}
        # Django 6.1 passes where the actions show (list or change form); 5.2 does not.
        where = {} if action_location is None else {"action_location": action_location}
        return super().get_actions(request, **where)  # type: ignore[misc]

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return scope_of(request).restrict(
            super().get_queryset(request),  # type: ignore[misc]
            collection=self.collection_path,
            document=self.document_path,
        )

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "collection":
            kwargs["queryset"] = scope_of(request).visible_collections()
        return super().formfield_for_foreignkey(db_field, request, **kwargs)  # type: ignore[misc]


class QualityScopedAdminMixin(ScopedAdminMixin):
    """Golden sets, their queries, judgments and runs judge a collection's documents as a whole.

    Staff whom ``DOCUMENT_ACCESS`` restricts to some documents see none of them (403,
    absent from the admin index); other staff see those of the collections they may see.
    """

    def _document_restricted(self, request: HttpRequest) -> bool:
        return scope_of(request).documents is not None

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if self._document_restricted(request):
            return False
        return super().has_view_permission(request, obj)  # type: ignore[misc]

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        if self._document_restricted(request):
            return False
        return super().has_add_permission(request, *args)  # type: ignore[misc]

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if self._document_restricted(request):
            return False
        return super().has_change_permission(request, obj)  # type: ignore[misc]

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if self._document_restricted(request):
            return False
        return super().has_delete_permission(request, obj)


#: A collection filter listing only the collections of the rows shown (never hidden ones).
COLLECTION_FILTER = ("collection", admin.RelatedOnlyFieldListFilter)
