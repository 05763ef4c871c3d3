"""Move a collection to a new embedding space (another model or dimension count).

New vectors are built beside the old ones, in ``Chunk.embedding_next``, a group of
documents at a time and outside any long transaction; searches keep using
``embedding`` and the collection's recorded embedder all along. When every chunk
has its new vector, one transaction locks the collection row, embeds the chunks
written meanwhile, lets the collection's index prepare the swap (pgvector drops the
old HNSW index and builds the new one after commit; an external index records a
rebuild in the outbox), moves ``embedding_next`` into ``embedding`` and records the
new embedder, model and dimensions: every search sees either the old space or the
new one, never a mix.

The swap holds an exclusive lock on ``retrieval_chunk`` (``DROP INDEX``) while the
new index builds, so very large collections see a pause in searches at the end.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

import numpy as np
from django.db import connection, transaction
from django.db.models import Count

from retrieval.conf import retrieval_settings
from retrieval.exceptions import RetrievalError
from retrieval.models import Chunk, Collection, IndexRun
from retrieval.services.core.headers import indexed_text
from retrieval.services.embedders.base import BaseEmbedder
from retrieval.services.indexes import index_for
from retrieval.services.ingestion.runs import (
    RunCancelled,
    check_cancelled,
    finish_run,
    save_progress,
)
from retrieval.services.registry import embedders

logger = logging.getLogger(__name__)


def reembed(
    collection: Collection,
    embedder_alias: str,
    *,
    run: IndexRun,
    on_group: Callable[[IndexRun], None] | None = None,
) -> IndexRun:
    """Re-embed every chunk of ``collection`` with ``embedder_alias``, then switch to it.

    ``on_group`` is called after each group of documents is embedded (progress
    hooks and tests). A cancelled run drops the new vectors and keeps the old space.
    """
    embedder = embedders[embedder_alias]  # InvalidComponentError names the choices
    run.options = {
        **run.options,
        "embedder": embedder_alias,
        "from": {"embedder": collection.embedder, "dimensions": collection.dimensions},
        "to": {"model_name": embedder.model_name, "dimensions": embedder.dimension},
    }
    run.save(update_fields=["options"])
    # Vectors an interrupted re-embedding left may be of yet another space.
    Chunk.objects.filter(collection=collection, embedding_next__isnull=False).update(
        embedding_next=None
    )
    per_document = list(
        Chunk.objects.filter(collection=collection)
        .values_list("document_id")
        .annotate(n=Count("id"))
        .order_by("document_id")
    )
    run.documents_total = len(per_document)
    save_progress(run)
    try:
        for group in _groups(per_document, int(retrieval_settings.EMBED_BATCH_SIZE) * 4):
            check_cancelled(run)
            written = _embed_next(Chunk.objects.filter(document_id__in=group), embedder)
            run.documents_done += len(group)
            run.documents_indexed += len(group)
            run.chunks_written += written
            save_progress(run)
            if on_group is not None:
                on_group(run)
        check_cancelled(run)
        # Documents indexed meanwhile got chunks in the old space: catch up outside the lock.
        _embed_next(_not_yet(collection), embedder)
        _switch(collection, embedder_alias, embedder)
    except RunCancelled:
        Chunk.objects.filter(collection=collection).update(embedding_next=None)
    finish_run(run)
    return run


def _groups(per_document: list[tuple[int, int]], size: int) -> Iterator[list[int]]:
    group, chunks = [], 0
    for document_id, count in per_document:
        group.append(document_id)
        chunks += count
        if chunks >= size:
            yield group
            group, chunks = [], 0
    if group:
        yield group


def _not_yet(collection: Collection):
    return Chunk.objects.filter(collection=collection, embedding_next__isnull=True)


def _embed_next(chunks, embedder: BaseEmbedder) -> int:
    """Embed ``chunks`` into ``embedding_next``; return how many were written."""
    rows = [
        (pk, indexed_text(prefix, content))
        for pk, prefix, content in chunks.order_by("pk").values_list(
            "pk", "indexed_prefix", "content"
        )
    ]
    batch = int(retrieval_settings.EMBED_BATCH_SIZE)
    for start in range(0, len(rows), batch):
        part = rows[start : start + batch]
        vectors = np.asarray(embedder.embed_batch([content for _, content in part]))
        if vectors.shape != (len(part), embedder.dimension):
            raise RetrievalError(
                f"the embedder returned vectors of shape {vectors.shape}, "
                f"expected ({len(part)}, {embedder.dimension})"
            )
        # A chunk replaced meanwhile is simply not found: its successor is caught up later.
        updates = [
            Chunk(pk=pk, embedding_next=vector)
            for (pk, _), vector in zip(part, vectors, strict=True)
        ]
        Chunk.objects.bulk_update(updates, ["embedding_next"])
    return len(rows)


def _switch(collection: Collection, alias: str, embedder: BaseEmbedder) -> None:
    """Move the collection to its new space in one transaction."""
    with transaction.atomic():
        # Ingestion holds this row in share mode while it writes chunks: wait for it,
        # and make later writes see the new embedder.
        locked = Collection.objects.select_for_update().get(pk=collection.pk)
        _embed_next(_not_yet(locked), embedder)
        index_for(locked).swap_space(locked)  # pgvector: drops the old HNSW index
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE retrieval_chunk SET embedding = embedding_next, embedding_next = NULL "
                "WHERE collection_id = %s",
                [locked.pk],
            )
        locked.embedder = alias
        locked.model_name = embedder.model_name
        locked.dimensions = embedder.dimension
        locked.save(update_fields=["embedder", "model_name", "dimensions", "updated_at"])
    collection.refresh_from_db()
