"""Knowledge-graph triples: written by extraction, browsed here."""

from __future__ import annotations

from django.contrib import admin

from retrieval.models import Triple

from .base import COLLECTION_FILTER, ReadOnlyAdmin, ScopedAdminMixin


@admin.register(Triple)
class TripleAdmin(ScopedAdminMixin, ReadOnlyAdmin):
    document_path = "chunk__document"
    list_display = ["subject", "predicate", "object", "confidence", "collection"]
    list_filter = [COLLECTION_FILTER, "predicate_key"]
    search_fields = ["subject", "object"]
    list_select_related = ["collection"]
