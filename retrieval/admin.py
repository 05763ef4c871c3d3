"""Admin for the app's models. Records the system writes (chunks, triples, runs) are read-only."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from .models import Chunk, Collection, Document, IndexRun, Triple


class ReadOnlyAdmin(admin.ModelAdmin):
    """Browse and delete, never hand-edit, what indexing wrote."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Collection)
class CollectionAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "embedder",
        "model_name",
        "dimensions",
        "default_retriever",
        "updated_at",
    ]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}
    readonly_fields = ["model_name", "dimensions", "created_at", "updated_at"]


@admin.register(Document)
class DocumentAdmin(admin.ModelAdmin):
    list_display = ["external_id", "title", "collection", "mime_type", "status", "indexed_at"]
    list_filter = ["collection", "status", "mime_type"]
    search_fields = ["external_id", "title"]
    readonly_fields = [
        "content",
        "content_hash",
        "status",
        "error",
        "indexed_at",
        "created_at",
        "updated_at",
    ]


@admin.register(Chunk)
class ChunkAdmin(ReadOnlyAdmin):
    list_display = ["document", "index", "page", "token_count", "start", "end"]
    list_filter = ["collection"]
    search_fields = ["content", "document__external_id"]
    list_select_related = ["document"]
    exclude = ["embedding"]


@admin.register(Triple)
class TripleAdmin(ReadOnlyAdmin):
    list_display = ["subject", "predicate", "object", "confidence", "collection"]
    list_filter = ["collection", "predicate_key"]
    search_fields = ["subject", "object"]


@admin.register(IndexRun)
class IndexRunAdmin(ReadOnlyAdmin):
    list_display = [
        "pk",
        "scope",
        "collection",
        "status",
        "documents_done",
        "documents_total",
        "documents_failed",
        "chunks_written",
        "created_at",
    ]
    list_filter = ["status", "scope", "collection"]


from . import admin_graph  # noqa: E402, F401  (Entity admin and the graph explorer)
