"""Ask before reindexing: what a reindex of collections or documents replaces and keeps.

A reindex replaces every chunk of the documents it reads (the collections' and documents'
reindex actions, also posted from the dashboard); the page says so, with the counts of
documents, chunks and knowledge-graph triples at stake, before anything is enqueued.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.contrib import admin
from django.db.models import Count, Model, QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils.http import url_has_allowed_host_and_scheme

from retrieval.models import Chunk, Collection, Document, GraphExtraction, Triple


@dataclass(frozen=True)
class ReindexRow:
    """One collection or document to reindex, with what it holds now."""

    pk: int
    collection: str
    document: str
    documents: int
    chunks: int
    triples: int
    graph: bool  # the collection has a knowledge graph: new texts will be extracted


def reindex_confirmed(request: HttpRequest) -> bool:
    """Return whether the reindex was confirmed on the page :func:`confirm_reindex` shows."""
    return request.POST.get("confirm") == "yes"


def confirm_reindex(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet, *, action: str
) -> TemplateResponse:
    """Show what reindexing the selected rows replaces and keeps, with a button to go on."""
    if queryset.model is Collection:
        rows, title = collection_rows(queryset), "Reindex collections?"
    else:
        rows, title = document_rows(queryset), "Reindex documents?"
    back = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(
        back, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        back = ""
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": title,
        "opts": modeladmin.model._meta,
        "rows": rows,
        "per_document": queryset.model is Document,
        "triples": sum(row.triples for row in rows),
        "graph": any(row.graph for row in rows),
        "action": action,
        "next": back,
        "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME,
    }
    return TemplateResponse(request, "retrieval/admin/reindex.html", context)


def collection_rows(collections: QuerySet) -> list[ReindexRow]:
    listed = list(collections.only("pk", "name").order_by("name"))
    ids = [c.pk for c in listed]
    documents = _counts(Document, "collection", ids)
    chunks = _counts(Chunk, "collection", ids)
    triples = _counts(Triple, "collection", ids)
    graphs = _graphs(ids)
    return [
        ReindexRow(
            pk=c.pk,
            collection=c.name,
            document="",
            documents=documents.get(c.pk, 0),
            chunks=chunks.get(c.pk, 0),
            triples=triples.get(c.pk, 0),
            graph=c.pk in graphs,
        )
        for c in listed
    ]


def document_rows(documents: QuerySet) -> list[ReindexRow]:
    listed = list(
        documents.select_related("collection")
        .only("pk", "external_id", "collection__name")
        .order_by("collection__name", "external_id")
    )
    ids = [d.pk for d in listed]
    chunks = _counts(Chunk, "document", ids)
    triples = _counts(Triple, "chunk__document", ids)
    graphs = _graphs({d.collection_id for d in listed})
    return [
        ReindexRow(
            pk=d.pk,
            collection=d.collection.name,
            document=d.external_id,
            documents=1,
            chunks=chunks.get(d.pk, 0),
            triples=triples.get(d.pk, 0),
            graph=d.collection_id in graphs,
        )
        for d in listed
    ]


def _counts(model: type[Model], path: str, ids: Iterable[int]) -> dict[int, int]:
    """Rows of ``model`` per value of ``path`` (a foreign key), for the values ``ids``."""
    return dict(
        model.objects.filter(**{f"{path}__in": list(ids)})
        .values_list(path)
        .annotate(n=Count("pk"))
        .order_by()
    )


def _graphs(collection_ids: Iterable[int]) -> set[int]:
    """The collections, among ``collection_ids``, that have a knowledge graph."""
    return set(
        GraphExtraction.objects.filter(collection__in=list(collection_ids))
        .values_list("collection_id", flat=True)
        .distinct()
    )
