"""Pieces shared by the app's admin screens."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import models
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html

from retrieval.models import Collection, Document, EvalQuery, EvalSet
from retrieval.services.access import Scope
from retrieval.validation import nesting


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
    """Return the signed-in user's :class:`Scope` (built once per request)."""
    return Scope.for_request(request)


#: Rows a form may choose, and the path from each to its collection.
CHOICE_PATHS = {
    Collection: "pk",
    Document: "collection",
    EvalSet: "collection",
    EvalQuery: "eval_set__collection",
}


class ScopedAdminMixin:
    """Show staff only what the access hooks let them see, and let them change only what
    the access policy lets them change (:mod:`retrieval.services.access`).

    ``collection_path`` and ``document_path`` lead from a row to its collection and
    document (``"pk"``: the row is one; ``None`` for ``document_path``: the row belongs
    to no single document). Django's model permissions still apply first.
    """

    collection_path: str = "collection"
    document_path: str | None = None
    formfield_overrides = {models.JSONField: {"form_class": BoundedJSONFormField}}

    def collection_of(self, obj: Any) -> Collection:
        """Return the collection a row belongs to."""
        if self.collection_path == "pk":
            return obj
        for name in self.collection_path.split("__"):
            obj = getattr(obj, name)
        return obj

    def may_write(self, request: HttpRequest, action: str, obj: Any) -> bool:
        """True if the user may ``action`` ("change", "delete") this row."""
        model = self.model  # type: ignore[attr-defined]
        return scope_of(request).may_write(action, model, self.collection_of(obj))

    def authorize_rows(self, request: HttpRequest, queryset: QuerySet, action: str) -> None:
        """Raise ``PermissionDenied`` unless the user may ``action`` every row (an action)."""
        if self.collection_path == "pk":
            collections = list(queryset.order_by())
        else:
            ids = queryset.order_by().values_list(self.collection_path, flat=True).distinct()
            collections = list(Collection.objects.filter(pk__in=list(ids)))
        scope, model = scope_of(request), self.model  # type: ignore[attr-defined]
        if not all(scope.may_write(action, model, c) for c in collections):
            raise PermissionDenied

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        if not super().has_add_permission(request, *args):  # type: ignore[misc]
            return False
        scope, model = scope_of(request), self.model  # type: ignore[attr-defined]
        if model is Collection:
            return scope.may_create_collections()
        return scope.writable_collections("add", model).exists()

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if not super().has_change_permission(request, obj):  # type: ignore[misc]
            return False
        return obj is None or self.may_write(request, "change", obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if not super().has_delete_permission(request, obj):  # type: ignore[misc]
            return False
        return obj is None or self.may_write(request, "delete", obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet) -> None:
        self.authorize_rows(request, queryset, "delete")
        super().delete_queryset(request, queryset)  # type: ignore[misc]

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return scope_of(request).restrict(
            super().get_queryset(request),  # type: ignore[misc]
            collection=self.collection_path,
            document=self.document_path,
        )

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        # A choice of a collection's row (the collection itself, a set, a query, a
        # document) offers only rows of collections the user may add this model to.
        related, scope = db_field.related_model, scope_of(request)
        path = CHOICE_PATHS.get(related)
        if path is not None:
            writable = scope.writable_collections("add", self.model)  # type: ignore[attr-defined]
            choices = related._default_manager.filter(**{f"{path}__in": writable})
            if related is Document:
                choices = scope.restrict(choices, document="pk")
            kwargs["queryset"] = choices
        return super().formfield_for_foreignkey(db_field, request, **kwargs)  # type: ignore[misc]


class QualityScopedAdminMixin(ScopedAdminMixin):
    """Golden sets, their queries, judgments and runs judge a collection's documents as a whole.

    Staff whom ``DOCUMENT_ACCESS`` restricts to some documents see none of them (403,
    absent from the admin index); other staff see those of the collections they may see.
    """

    def _document_restricted(self, request: HttpRequest) -> bool:
        return not scope_of(request).sees_quality

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
#: Editing a golden set's content (adding a query, judging a result) is changing the set:
#: one permission for both, so an editor offered the one is offered the other.
EDIT_GOLDEN = ("change", EvalSet)
