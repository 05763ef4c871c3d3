"""Keep a re-indexed document's knowledge-graph triples on its new chunks of the same text.

Indexing a document again replaces all its chunks, and ``Triple.chunk`` cascades. An
extractor reads nothing but a chunk's text, so the triples of an old chunk hold for a new
chunk of the same document with the same text: they move to it (the same rows) instead
of going with the old chunk. Chunks whose text changed lose theirs; a changed-only graph
extraction finds them (:mod:`retrieval.services.graph.extraction`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from django.db import connection
from django.db.models import Exists, OuterRef

from retrieval.models import Chunk, Triple

#: (triple ids, the new chunk they belong to once it is saved)
Move = tuple[list[int], Chunk]


def detach_kept_triples(new_chunks: Mapping[int, Sequence[Chunk]]) -> list[Move]:
    """Detach the triples of old chunks whose text a new chunk of their document repeats.

    ``new_chunks`` maps each document whose chunks are being replaced to its new, unsaved
    chunks. Old and new chunks of the same text pair up in order. Call inside the
    transaction that replaces the chunks, before the old ones are deleted; hand the
    result to :func:`attach_kept_triples` once the new chunks are saved.
    """
    if not new_chunks:
        return []
    free: dict[tuple[int, str], list[Chunk]] = {}
    for document_id, chunks in new_chunks.items():
        for chunk in chunks:
            free.setdefault((document_id, chunk.content), []).append(chunk)
    old = (
        Chunk.objects.filter(document_id__in=list(new_chunks))
        .filter(Exists(Triple.objects.filter(chunk=OuterRef("pk"))))
        .order_by("document_id", "index")
        .values_list("pk", "document_id", "content")
    )
    heirs = {}
    for pk, document_id, content in old:
        if candidates := free.get((document_id, content)):
            heirs[pk] = candidates.pop(0)
    triples: dict[int, list[int]] = {}
    for pk, chunk_id in Triple.objects.filter(chunk_id__in=list(heirs)).values_list(
        "pk", "chunk_id"
    ):
        triples.setdefault(chunk_id, []).append(pk)
    # Unlinked, they escape the cascade of their old chunk's delete.
    Triple.objects.filter(pk__in=[pk for ids in triples.values() for pk in ids]).update(chunk=None)
    return [(ids, heirs[chunk_id]) for chunk_id, ids in triples.items()]


def attach_kept_triples(moves: Sequence[Move]) -> None:
    """Link the triples :func:`detach_kept_triples` detached to their saved new chunks."""
    pairs = [(pk, chunk.pk) for ids, chunk in moves for pk in ids]
    if not pairs:
        return
    triple_ids, chunk_ids = zip(*pairs, strict=True)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {Triple._meta.db_table} t SET chunk_id = m.chunk_id "
            "FROM unnest(%s::bigint[], %s::bigint[]) AS m(id, chunk_id) WHERE t.id = m.id",
            [list(triple_ids), list(chunk_ids)],
        )
