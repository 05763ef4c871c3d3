"""Knowledge-graph triples: written by extraction, browsed here."""

from __future__ import annotations

from django.contrib import admin

from retrieval.models import Triple

from .base import ReadOnlyAdmin


@admin.register(Triple)
class TripleAdmin(ReadOnlyAdmin):
    list_display = ["subject", "predicate", "object", "confidence", "collection"]
    list_filter = ["collection", "predicate_key"]
    search_fields = ["subject", "object"]
    list_select_related = ["collection"]
