"""Promoted results (editors' picks): pin documents to a query or a query pattern.

A promotion changes what every reader of the collection is shown first, so it is a
change to the collection: it needs the promotion permissions, a collection the user
may change, and seeing all of it (see :mod:`retrieval.services.access`). Searches
apply promotions in :mod:`retrieval.services.query.promotions`.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from retrieval.exceptions import AccessDenied, CollectionNotFound
from retrieval.models import Collection, Promotion

from .base import COLLECTION_FILTER, ScopedAdminMixin, scope_of


class PromotionForm(forms.ModelForm):
    class Meta:
        model = Promotion
        fields = ["collection", "query", "document", "position", "active", "note"]

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


@admin.register(Promotion)
class PromotionAdmin(ScopedAdminMixin, admin.ModelAdmin):
    document_path = "document"
    form = PromotionForm
    list_display = ["query", "document", "collection", "position", "active", "try_it"]
    list_filter = [COLLECTION_FILTER, "active"]
    list_select_related = ["collection", "document"]
    search_fields = ["query", "document__external_id", "document__title"]
    autocomplete_fields = ["document"]

    class Media:
        css = {"all": ["retrieval/admin/admin.css"]}

    def promotable_collections(self, request: HttpRequest) -> QuerySet[Collection]:
        """The collections where the user may add promotions: writable, and seen whole."""
        scope = scope_of(request)
        writable = scope.writable_collections("add", Promotion)
        if scope.documents is None:
            return writable
        return writable.filter(pk__in=scope.may_write_each("add", Promotion, writable))

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return (
            super().has_add_permission(request, *args)
            and self.promotable_collections(request).exists()
        )

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "collection":
            kwargs["queryset"] = self.promotable_collections(request)
            return super(ScopedAdminMixin, self).formfield_for_foreignkey(
                db_field, request, **kwargs
            )
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def save_model(self, request: HttpRequest, obj: Promotion, form: Any, change: bool) -> None:
        scope = scope_of(request)
        try:
            scope.authorize("change" if change else "add", Promotion, obj.collection)
        except (AccessDenied, CollectionNotFound) as e:
            raise PermissionDenied from e
        if not change:
            obj.created_by = request.user
        super().save_model(request, obj, form, change)

    @admin.display(description="")
    def try_it(self, promotion: Promotion) -> str:
        query = " ".join(promotion.query.replace("*", " ").split())
        params = urlencode({"collection": promotion.collection_id, "query": query})
        return format_html(
            '<a href="{}?{}">try it</a>', reverse("admin:retrieval_playground"), params
        )
