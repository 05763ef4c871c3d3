"""Collections and their embedding spaces: creation, embedder lookup, HNSW index."""

from __future__ import annotations

from django.db import OperationalError, connection, transaction
from django.utils.text import slugify

from retrieval.conf import retrieval_settings
from retrieval.exceptions import DimensionMismatchError
from retrieval.models import Collection
from retrieval.services.embedders.base import BaseEmbedder
from retrieval.services.registry import chunkers, embedders, retrievers

#: HNSW build parameters (pgvector's defaults; measured in ARCHITECTURE.md).
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 64
#: SQLSTATE of "cannot CREATE INDEX ... because it has pending trigger events".
PENDING_TRIGGER_EVENTS = "55006"


def get_or_create_collection(
    name: str,
    *,
    embedder: str | None = None,
    retriever: str | None = None,
    chunker: str | None = None,
) -> tuple[Collection, bool]:
    """Return the collection called ``name``, creating it with the given components.

    A new collection takes its dimensions and model name from its embedder and
    gets its own HNSW index.
    """
    existing = Collection.objects.filter(name=name).first()
    if existing is not None:
        return existing, False
    embedder_alias = embedder or retrieval_settings.DEFAULT_EMBEDDER
    instance = embedders[embedder_alias]  # raises InvalidComponentError naming the choices
    if retriever is not None:
        retrievers[retriever]  # raises InvalidComponentError naming the choices
    if chunker is not None:
        chunkers[chunker]
    with transaction.atomic():
        collection = Collection.objects.create(
            name=name,
            slug=_unique_slug(name),
            embedder=embedder_alias,
            model_name=instance.model_name,
            dimensions=instance.dimension,
            default_retriever=retriever or "",
            chunker=chunker or "",
        )
        ensure_vector_index(collection)
    return collection, True


def _unique_slug(name: str) -> str:
    base = slugify(name)[:180] or "collection"
    slug, n = base, 1
    while Collection.objects.filter(slug=slug).exists():
        n += 1
        slug = f"{base}-{n}"
    return slug


def embedder_for(collection: Collection) -> BaseEmbedder:
    """Return the collection's embedder, refusing one of another dimension."""
    embedder = embedders[collection.embedder]
    if embedder.dimension != collection.dimensions:
        raise DimensionMismatchError(
            f"Embedder {collection.embedder!r} makes {embedder.dimension}-dimensional vectors, "
            f"but collection {collection.name!r} holds {collection.dimensions}-dimensional ones. "
            "Restore the embedder's configuration or re-embed the collection."
        )
    return embedder


def vector_index_name(collection_id: int) -> str:
    return f"retrieval_chunk_hnsw_c{collection_id}"


def ensure_vector_index(collection: Collection) -> None:
    """Create the collection's partial HNSW index over ``embedding::vector(n)`` if missing.

    PostgreSQL refuses CREATE INDEX in a transaction that has pending deferred
    constraint checks (e.g. chunks written earlier in it): then the index is
    created once the transaction commits, and queries until then scan exactly.
    """
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s)", [vector_index_name(collection.pk)])
        if cursor.fetchone()[0] is not None:
            return
    if not connection.in_atomic_block:
        _create_vector_index(collection)
        return
    try:
        with transaction.atomic():
            _create_vector_index(collection)
    except OperationalError as e:
        if getattr(e.__cause__, "sqlstate", None) != PENDING_TRIGGER_EVENTS:
            raise
        transaction.on_commit(lambda: ensure_vector_index(collection))


def _create_vector_index(collection: Collection) -> None:
    dimensions = int(collection.dimensions)
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE INDEX IF NOT EXISTS {vector_index_name(collection.pk)} "
            f"ON retrieval_chunk USING hnsw ((embedding::vector({dimensions})) vector_cosine_ops) "
            f"WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION}) "
            f"WHERE collection_id = {int(collection.pk)}"
        )


def drop_vector_index(collection_id: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX IF EXISTS {vector_index_name(collection_id)}")
