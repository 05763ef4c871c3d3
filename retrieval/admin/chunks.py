"""The chunk browser: search chunk text, filter by collection, document and metadata."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.db.models import Q, QuerySet
from django.db.models.expressions import RawSQL
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.text import Truncator

from retrieval.models import Chunk, Document
from retrieval.validation import nesting

from .base import COLLECTION_FILTER, ReadOnlyAdmin, ScopedAdminMixin, pretty_json, scope_of

#: Documents offered by the document filter (narrowed by the collection filter).
DOCUMENT_CHOICES = 100


class DocumentFilter(admin.SimpleListFilter):
    """Chunks of one document; the choices follow the collection filter."""

    title = "document"
    parameter_name = "document"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple]:
        documents = scope_of(request).restrict(
            Document.objects.only("pk", "external_id", "title").order_by("external_id"),
            document="pk",
        )
        collection = request.GET.get("collection__id__exact", "")
        if collection.isdigit():
            documents = documents.filter(collection_id=int(collection))
        choices = [(str(d.pk), d.external_id) for d in documents[:DOCUMENT_CHOICES]]
        value = self.value()
        if value and value not in dict(choices) and value.isdigit():
            chosen = documents.filter(pk=int(value)).first()
            if chosen is not None:
                choices.insert(0, (value, chosen.external_id))
        return choices

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        value = self.value()
        if not value:
            return queryset
        if not value.isdigit():
            raise IncorrectLookupParameters(f"A document id is an integer, not {value!r}.")
        return queryset.filter(document_id=int(value))


class MetadataFilter(admin.SimpleListFilter):
    """Chunks whose metadata has ``key`` (``key``) or ``key`` equal to a value (``key=value``).

    The value is read as JSON when it parses (``year=2020``, ``draft=true``) and
    matched as that or as the plain string.
    """

    title = "metadata"
    parameter_name = "metadata"
    template = "retrieval/admin/chunk/metadata_filter.html"

    def __init__(self, request: HttpRequest, *args: Any) -> None:
        self.request = request
        super().__init__(request, *args)

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple]:
        return []

    def has_output(self) -> bool:
        return True

    def choices(self, changelist: Any) -> list[dict[str, Any]]:
        hidden = [
            (name, value)
            for name, values in self.request.GET.lists()
            if name not in (self.parameter_name, "p")
            for value in values
        ]
        return [{"value": self.value() or "", "hidden": hidden, "parameter": self.parameter_name}]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        value = (self.value() or "").strip()
        if not value:
            return queryset
        key, has_value, raw = value.partition("=")
        key = key.strip()
        if not key:
            raise IncorrectLookupParameters("A metadata filter is key or key=value.")
        if not has_value:
            return queryset.filter(metadata__has_key=key)
        raw = raw.strip()
        condition = Q(metadata__contains={key: raw})
        try:
            parsed = nesting.loads(raw, where="The metadata filter")
        except ValueError:  # not JSON, or nested past MAX_JSON_DEPTH: the text itself
            parsed = raw
        if parsed != raw:
            condition |= Q(metadata__contains={key: parsed})
        return queryset.filter(condition)


@admin.register(Chunk)
class ChunkAdmin(ScopedAdminMixin, ReadOnlyAdmin):
    document_path = "document"
    list_display = ["chunk", "document", "collection", "page", "headings", "token_count", "text"]
    list_filter = [COLLECTION_FILTER, DocumentFilter, MetadataFilter]
    search_fields = ["content", "document__external_id", "document__title"]
    search_help_text = "Words in the chunk's text, or its document's id or title."
    list_select_related = ["document", "collection"]
    exclude = ["embedding", "metadata"]  # metadata: shown as metadata_json (cut if too deep)
    readonly_fields = ["in_document", "indexed_as", "metadata_json"]

    class Media:
        css = {"all": ["retrieval/admin/admin.css"]}

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).defer("embedding", "document__content")

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet, search_term: str
    ) -> tuple[QuerySet, bool]:
        """Match every word as a substring, or the text by PostgreSQL full-text search.

        Full-text search stems words ("installing" finds "install") and reads
        quotes, ``or`` and ``-word`` as ``websearch_to_tsquery`` does.
        """
        found, may_have_duplicates = super().get_search_results(request, queryset, search_term)
        if search_term.strip():
            table = Chunk._meta.db_table
            stemmed = queryset.filter(
                pk__in=RawSQL(
                    f"SELECT id FROM {table} WHERE to_tsvector('english', content) "  # noqa: S608
                    "@@ websearch_to_tsquery('english', %s)",
                    [search_term],
                )
            )
            found = found | stemmed
        return found, may_have_duplicates

    @admin.display(description="chunk", ordering="index")
    def chunk(self, chunk: Chunk) -> str:
        return f"#{chunk.index}"

    @admin.display(description="headings")
    def headings(self, chunk: Chunk) -> str:
        return " › ".join(chunk.heading_path)

    @admin.display(description="text")
    def text(self, chunk: Chunk) -> str:
        return Truncator(chunk.content).chars(160)

    @admin.display(description="in its document")
    def in_document(self, chunk: Chunk) -> str:
        url = reverse("admin:retrieval_document_change", args=[chunk.document_id])
        return format_html(
            '<a href="{}#retrieval-chunk-{}">{} at {}–{}</a>',
            url,
            chunk.index,
            chunk.document,
            chunk.start,
            chunk.end,
        )

    @admin.display(description="embedded and BM25-indexed as")
    def indexed_as(self, chunk: Chunk) -> str:
        return format_html('<pre class="retrieval-indexed-text">{}</pre>', chunk.indexed_text)

    @admin.display(description="metadata")
    def metadata_json(self, chunk: Chunk) -> str:
        return format_html('<pre class="retrieval-json">{}</pre>', pretty_json(chunk.metadata))
