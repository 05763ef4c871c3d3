"""Editors' relevance rules beside promotions: synonyms, hidden results, blocked suggestions.

Each changes what every reader of a collection is shown, so it is a change to the
collection, as a promotion is: it needs the rule's model permissions, a collection the
user may change, and seeing all of it (see :mod:`retrieval.services.access`). A rule of
no collection (synonyms, blocked suggestions) changes every collection: only staff who
see and may change every collection may write one. Searches apply the rules in
:mod:`retrieval.services.sparse.synonyms`, :mod:`retrieval.services.query.hiding` and
:mod:`retrieval.services.query.suggestions`.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest

from retrieval.exceptions import AccessDenied, CollectionNotFound
from retrieval.models import BlockedSuggestion, Collection, HiddenResult, Synonym
from retrieval.services.registry import analyzers
from retrieval.services.sparse.synonyms import rule_terms

from .base import COLLECTION_FILTER, ScopedAdminMixin, scope_of


class QueryRuleForm(forms.ModelForm):
    """A rule for a query or a ``*`` pattern, and (if it names one) a document of its
    collection."""

    def clean_query(self) -> str:
        query = " ".join(self.cleaned_data["query"].split())
        if not query.replace("*", "").strip():
            raise forms.ValidationError("Give a query or a pattern with words, not only “*”.")
        return query

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        collection, document = data.get("collection"), data.get("document")
        if collection is not None and document is not None:
            if document.collection_id != collection.pk:
                self.add_error("document", f"{document} is not a document of {collection}.")
        return data


class RuleAdminMixin(ScopedAdminMixin):
    """Write a rule only in a collection the user may change and sees whole; a rule of
    no collection only when the user sees and may change every collection."""

    def rule_collections(self, request: HttpRequest) -> QuerySet[Collection]:
        """The collections where the user may add rules: writable, and seen whole."""
        scope, model = scope_of(request), self.model  # type: ignore[attr-defined]
        writable = scope.writable_collections("add", model)
        if scope.documents is None:
            return writable
        return writable.filter(pk__in=scope.may_write_each("add", model, writable))

    def may_write_everywhere(self, request: HttpRequest, action: str) -> bool:
        """True if the user may ``action`` a rule of no collection."""
        scope, model = scope_of(request), self.model  # type: ignore[attr-defined]
        return scope.may_write(action, model, None) and scope.writable is None

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return super().has_add_permission(request, *args) and (
            self.rule_collections(request).exists() or self.may_write_everywhere(request, "add")
        )

    def may_write(self, request: HttpRequest, action: str, obj: Any) -> bool:
        if obj.collection_id is None:
            return self.may_write_everywhere(request, action)
        return super().may_write(request, action, obj)

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "collection":
            kwargs["queryset"] = self.rule_collections(request)
            if db_field.null:  # blank (every collection) only for who may write there
                kwargs["required"] = not self.may_write_everywhere(request, "add")
            return super(ScopedAdminMixin, self).formfield_for_foreignkey(  # type: ignore[misc]
                db_field, request, **kwargs
            )
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        action = "change" if change else "add"
        if obj.collection_id is None:
            if not self.may_write_everywhere(request, action):
                raise PermissionDenied
        else:
            try:
                scope_of(request).authorize(action, self.model, obj.collection)  # type: ignore[attr-defined]
            except (AccessDenied, CollectionNotFound) as e:
                raise PermissionDenied from e
        if not change:
            obj.created_by = request.user
        super().save_model(request, obj, form, change)  # type: ignore[misc]


class SynonymForm(forms.ModelForm):
    class Meta:
        model = Synonym
        fields = ["collection", "rule", "active", "note"]

    def clean_rule(self) -> str:
        rule = " ".join(self.cleaned_data["rule"].split())
        try:
            rule_terms(rule, analyzers["default"])
        except ValueError as e:
            raise forms.ValidationError(str(e)) from None
        return rule


@admin.register(Synonym)
class SynonymAdmin(RuleAdminMixin, admin.ModelAdmin):
    form = SynonymForm
    list_display = ["rule", "collection", "active", "note"]
    list_filter = [COLLECTION_FILTER, "active"]
    list_select_related = ["collection"]
    search_fields = ["rule", "note"]


class HiddenResultForm(QueryRuleForm):
    class Meta:
        model = HiddenResult
        fields = ["collection", "query", "document", "active", "note"]


@admin.register(HiddenResult)
class HiddenResultAdmin(RuleAdminMixin, admin.ModelAdmin):
    document_path = "document"
    form = HiddenResultForm
    list_display = ["query", "document", "collection", "active"]
    list_filter = [COLLECTION_FILTER, "active"]
    list_select_related = ["collection", "document"]
    search_fields = ["query", "document__external_id", "document__title"]
    autocomplete_fields = ["document"]


class BlockedSuggestionForm(QueryRuleForm):
    class Meta:
        model = BlockedSuggestion
        fields = ["collection", "query", "note"]


@admin.register(BlockedSuggestion)
class BlockedSuggestionAdmin(RuleAdminMixin, admin.ModelAdmin):
    form = BlockedSuggestionForm
    list_display = ["query", "collection", "note"]
    list_filter = [COLLECTION_FILTER]
    list_select_related = ["collection"]
    search_fields = ["query", "note"]
