"""Collections and their embedding spaces: creation, changes, embedder lookup, vector index."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.utils.text import slugify

from retrieval.conf import retrieval_settings
from retrieval.exceptions import CollectionNotFound, DimensionMismatchError, RetrievalError
from retrieval.models import Collection
from retrieval.services.access import Scope, resolve_scope
from retrieval.services.embedders.base import BaseEmbedder
from retrieval.services.indexes import index_for
from retrieval.services.registry import chunkers, embedders, indexes, retrievers

__all__ = [
    "check_name_is_free",
    "create_collection",
    "drop_vector_index",
    "embedder_for",
    "ensure_vector_index",
    "get_or_create_collection",
    "lock_embedding_space",
    "update_collection",
]

# A slug taken by a concurrent creation is replaced by the next free one this many times.
CREATE_ATTEMPTS = 3

#: What :func:`update_collection` changes; the embedding space (embedder, index) is fixed
#: at creation and the rest is the app's.
EDITABLE_FIELDS = (
    "name",
    "slug",
    "description",
    "chunker",
    "default_retriever",
    "default_pipeline",
    "metadata",
)


def get_or_create_collection(
    name: str,
    *,
    embedder: str | None = None,
    retriever: str | None = None,
    chunker: str | None = None,
    index: str | None = None,
) -> tuple[Collection, bool]:
    """Return the collection ``name`` names (its slug or name), creating it if none does.

    A new collection is called ``name``, takes its dimensions and model name from its
    embedder and gets its own space in its index (``index``: an alias of
    ``RETRIEVAL['INDEXES']``, "default" when omitted). An existing collection keeps its
    components. No access check: commands and tasks call this; faces authorize first.
    """
    try:
        return Scope.ALL.collection(name), False
    except CollectionNotFound:
        pass
    if retriever is not None:
        retrievers[retriever]  # raises InvalidComponentError naming the choices
    if chunker is not None:
        chunkers[chunker]
    attempts = CREATE_ATTEMPTS
    while True:
        collection = Collection(
            name=name,
            embedder=embedder or retrieval_settings.DEFAULT_EMBEDDER,
            default_retriever=retriever or "",
            chunker=chunker or "",
            index=index or "default",
        )
        try:
            return create_collection(collection), True
        except IntegrityError:
            # A concurrent call created it (the name is unique), or took its slug.
            try:
                return Scope.ALL.collection(name), False
            except CollectionNotFound:
                attempts -= 1
                if not attempts:
                    raise


def create_collection(collection: Collection) -> Collection:
    """Save a new, unsaved collection in one transaction: a free slug (unless set), its
    embedder's model name and dimensions, and its space in its index (an external
    index's outbox scheduled).

    A name may not be another collection's slug, nor a slug another's name, so that a
    key (slug or name) always names one collection (:meth:`Scope.collection`).
    """
    check_name_is_free(collection.name)
    if not collection.slug:
        collection.slug = _unique_slug(collection.name)
    embedder = embedders[collection.embedder]  # raises InvalidComponentError naming the choices
    collection.model_name, collection.dimensions = embedder.model_name, embedder.dimension
    collection.external_index = not indexes[collection.index].features.transactional
    with transaction.atomic():
        collection.save(force_insert=True)
        if collection.external_index:
            from retrieval.services.indexes import outbox

            outbox.ensure_schedule()
        ensure_vector_index(collection)
    return collection


def update_collection(
    collection: Collection,
    changes: Mapping[str, Any],
    *,
    user: Any = None,
    scope: Scope | None = None,
) -> Collection:
    """Save ``changes`` (field -> new value, of :data:`EDITABLE_FIELDS`) to ``collection``
    for the requesting user; return it, changed.

    ``user`` or ``scope`` is required, as for a search. The changes are authorized
    against the collection as stored (:meth:`Scope.authorize_change`), so a change made to
    the instance beforehand still counts: renaming needs the right to create collections,
    and changing what the access hooks decide by needs ``change_collection_access``.
    """
    allowed = resolve_scope(scope, user, caller="update_collection")
    fixed = sorted(set(changes) - set(EDITABLE_FIELDS))
    if fixed:
        raise ValueError(
            f"update_collection() cannot change {', '.join(fixed)}; "
            f"it changes {', '.join(EDITABLE_FIELDS)}."
        )
    with transaction.atomic():
        stored = Collection.objects.select_for_update().filter(pk=collection.pk).first()
        if stored is None:
            raise CollectionNotFound(f"No collection {collection.slug!r}.")
        allowed.authorize_change(stored, changes)
        for key in ("name", "slug"):  # a key names one collection (Scope.collection)
            if changes.get(key, getattr(stored, key)) != getattr(stored, key):
                check_name_is_free(changes[key], exclude=stored)
        for field, value in changes.items():
            setattr(collection, field, value)
        unchanged = [f.name for f in Collection._meta.fields if f.name not in changes]
        collection.full_clean(exclude=unchanged, validate_unique=False, validate_constraints=False)
        collection.save(update_fields=[*changes, "updated_at"])
    return collection


def check_name_is_free(name: str, *, exclude: Collection | None = None) -> None:
    """Raise :class:`RetrievalError` if ``name`` is another collection's name or slug."""
    taken = Collection.objects.filter(Q(name=name) | Q(slug=name))
    if exclude is not None:
        taken = taken.exclude(pk=exclude.pk)
    if taken.exists():
        raise RetrievalError(
            f"A collection called or slugged {name!r} exists; choose another name."
        )


def _unique_slug(name: str) -> str:
    base = slugify(name)[:180] or "collection"
    slug, n = base, 1
    while Collection.objects.filter(Q(slug=slug) | Q(name=slug)).exists():
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


def ensure_vector_index(collection: Collection) -> None:
    """Create the collection's space in its index if missing (pgvector: its HNSW index).

    An external index creates its space when the outbox first writes to it, so that
    ingestion goes on while the engine is down.
    """
    index = index_for(collection)
    if index.features.transactional:
        index.ensure_space(collection)


def lock_embedding_space(collection: Collection) -> None:
    """Hold the collection's row in share mode; refuse vectors of a space it left.

    Call inside the transaction writing vectors. A re-embedding swaps the
    collection's space under an exclusive lock on that row, so it waits for this
    write, and a write after it sees the new embedder.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT embedder, dimensions FROM retrieval_collection WHERE id = %s FOR SHARE",
            [collection.pk],
        )
        row = cursor.fetchone()
    if row is None:
        raise RetrievalError(f"collection {collection.name!r} was deleted")
    if tuple(row) != (collection.embedder, collection.dimensions):
        raise RetrievalError(
            f"collection {collection.name!r} was re-embedded with {row[0]!r} "
            "while this document was indexed; index it again"
        )


def drop_vector_index(collection_id: int, index: str = "default") -> None:
    """Drop a collection's pgvector HNSW index (the pgvector index's ``drop_space``)."""
    indexes[index or "default"].drop_space(collection_id)
