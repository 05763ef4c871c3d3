"""Writing the BM25 postings of chunks (document frequencies and statistics follow by trigger)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from django.db import connections

from retrieval.services.core.headers import indexed_text
from retrieval.services.sparse.analyzer import Analyzer

#: One entry per chunk: its id, term frequencies and length in terms.
ChunkTerms = tuple[int, Counter[str], int]


def bm25_text(prefix: str, content: str) -> str:
    """Return the text BM25 indexes for a chunk: its header (``Chunk.indexed_prefix``),
    then its content; the same text is embedded (services.chunk_context)."""
    return indexed_text(prefix, content)


def _has_prefix_column(cursor) -> bool:
    """Whether chunks have ``indexed_prefix`` yet (not while migration 0002 runs)."""
    cursor.execute(
        "SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() "
        "AND table_name = 'retrieval_chunk' AND column_name = 'indexed_prefix'"
    )
    return cursor.fetchone() is not None


def write_postings(
    collection_id: int, entries: Iterable[ChunkTerms], *, using: str = "default"
) -> None:
    """COPY the postings of new chunks; call inside the transaction that wrote them."""
    with connections[using].cursor() as cursor:
        with cursor.copy(
            "COPY retrieval_bm25_posting (collection_id, term, chunk_id, tf, dl) FROM STDIN"
        ) as copy:
            for chunk_id, counts, length in entries:
                for term, tf in counts.items():
                    copy.write_row((collection_id, term, chunk_id, tf, length))


def rebuild_postings(
    collection_id: int, analyzer: Analyzer, *, using: str = "default", batch: int = 2000
) -> int:
    """Re-analyse every chunk of a collection (after the analyzer changed); return the count."""
    connection = connections[using]
    with connection.cursor() as cursor:
        cursor.execute(
            "DELETE FROM retrieval_bm25_posting WHERE collection_id = %s", [collection_id]
        )
        # Before migration 0008, the document's title was what came before the content.
        prefix = "c.indexed_prefix" if _has_prefix_column(cursor) else "d.title"
        cursor.execute(
            f"SELECT c.id, {prefix}, c.content FROM retrieval_chunk c "
            "JOIN retrieval_document d ON d.id = c.document_id "
            "WHERE c.collection_id = %s ORDER BY c.id",
            [collection_id],
        )
        rows = cursor.fetchall()
    for start in range(0, len(rows), batch):
        write_postings(
            collection_id,
            (
                (chunk_id, *analyzer.term_counts(bm25_text(prefix, content)))
                for chunk_id, prefix, content in rows[start : start + batch]
            ),
            using=using,
        )
    return len(rows)
