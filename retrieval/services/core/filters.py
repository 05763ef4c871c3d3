"""Retrieval filters: validated once, applied the same way by every retriever."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from django.core.exceptions import EmptyResultSet

from retrieval.exceptions import InvalidFilterError
from retrieval.validation.storable import refuse_unstorable

ALLOWED_KEYS = ("document_ids", "documents", "metadata")


@dataclass(frozen=True, eq=False)
class ReaderScope:
    """An access scope's document restriction, as chunk rows can check it.

    ``tokens`` are the reader's access tokens (``visibility.user_tokens``), checked
    against each chunk's copy of its document's host visibility (``retrieval_chunk.access``,
    kept by triggers: ``retrieval/sql/chunk_access.sql``); ``others`` are the documents
    the rest of the restriction allows (the ``DOCUMENT_ACCESS`` hook's; ``None``: no
    other restriction). Together they are the scope's ``documents_within``.
    """

    tokens: tuple[str, ...]
    others: Any = None


@dataclass(frozen=True)
class Filters:
    """What a search may return, beyond its collection.

    ``document_ids`` are primary keys, ``documents`` external ids, and ``metadata``
    a JSON object each chunk's metadata must contain (chunks carry their
    document's metadata). ``documents_within`` is the access scope's document
    restriction (a ``Document`` queryset, see :class:`~retrieval.services.access.Scope`):
    never parsed from a request, only added by ``Scope.filters``, with ``reader``, the
    same restriction as chunk rows check it (:class:`ReaderScope`; ``None``: through
    ``documents_within``).
    """

    document_ids: tuple[int, ...] | None = None
    documents: tuple[str, ...] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    documents_within: Any = field(default=None, compare=False, repr=False)
    reader: ReaderScope | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.reader is not None and self.documents_within is None:
            raise ValueError("Filters.reader restates documents_within; it cannot stand alone.")

    @classmethod
    def parse(cls, raw: Filters | Mapping[str, Any] | None) -> Filters:
        """Validate a filters mapping (e.g. from JSON); raise ``InvalidFilterError``."""
        if raw is None:
            return cls()
        if isinstance(raw, Filters):
            return raw
        if not isinstance(raw, Mapping):
            raise InvalidFilterError(f"filters must be an object, not {type(raw).__name__}.")
        unknown = sorted(set(raw) - set(ALLOWED_KEYS))
        if unknown:
            raise InvalidFilterError(
                f"Unknown filter {', '.join(map(repr, unknown))}; "
                f"allowed: {', '.join(ALLOWED_KEYS)}."
            )
        document_ids = raw.get("document_ids")
        if document_ids is not None:
            if not isinstance(document_ids, list | tuple) or not all(
                isinstance(i, int) and not isinstance(i, bool) for i in document_ids
            ):
                raise InvalidFilterError("filters.document_ids must be a list of integers.")
            document_ids = tuple(document_ids)
        documents = raw.get("documents")
        if documents is not None:
            if not isinstance(documents, list | tuple) or not all(
                isinstance(d, str) for d in documents
            ):
                raise InvalidFilterError(
                    "filters.documents must be a list of external ids (strings)."
                )
            documents = tuple(documents)
        metadata = raw.get("metadata") or {}
        if not isinstance(metadata, Mapping):
            raise InvalidFilterError("filters.metadata must be a JSON object.")
        refuse_unstorable(documents, "filters.documents", InvalidFilterError)
        refuse_unstorable(metadata, "filters.metadata", InvalidFilterError)
        return cls(document_ids=document_ids, documents=documents, metadata=dict(metadata))

    def __bool__(self) -> bool:
        return (
            self.document_ids is not None
            or self.documents is not None
            or bool(self.metadata)
            or self.documents_within is not None
        )

    def scope_only(self) -> Filters:
        """Return only the access restriction (for walks that must not see hidden rows)."""
        return Filters(documents_within=self.documents_within, reader=self.reader)

    def using(self, db: str) -> Filters:
        """Return these filters with the access scope's querysets read from database ``db``."""
        if self.documents_within is None:
            return self
        reader = self.reader
        if reader is not None and reader.others is not None:
            reader = replace(reader, others=reader.others.using(db))
        return replace(self, documents_within=self.documents_within.using(db), reader=reader)

    def resolved(self, collection_id: int | None) -> Filters:
        """Return these filters with external document ids (``documents``) resolved to
        ``document_ids`` among the collection's documents (one query, if any)."""
        if self.documents is None:
            return self
        from retrieval.models import Document

        named = list(
            Document.objects.filter(collection_id=collection_id, external_id__in=self.documents)
            .order_by()  # the model's ordering would sort them for nothing
            .values_list("pk", flat=True)
        )
        if self.document_ids is not None:
            named = [i for i in named if i in self.document_ids]
        return replace(self, documents=None, document_ids=tuple(named))

    def sql(self, alias: str, *, collection_id: int | None) -> tuple[list[str], list[Any]]:
        """Return SQL conditions on the chunk table aliased ``alias``, and their parameters.

        Only chunk columns appear (external ids are resolved to document ids first),
        so an index scan over the chunk table can apply them row by row. ``collection_id``
        is the chunks' collection (``None`` for chunks of several: the access scope only).
        """
        conditions: list[str] = []
        params: list[Any] = []
        document_ids = self.resolved(collection_id).document_ids
        if document_ids is not None:
            conditions.append(f"{alias}.document_id = ANY(%s)")
            params.append(list(document_ids))
        if self.metadata:
            conditions.append(f"{alias}.metadata @> %s::jsonb")
            params.append(json.dumps(self.metadata))
        if self.reader is not None:
            # The host visibility on the chunk row; the rest through the documents.
            conditions.append(f"{alias}.access ?| %s")
            params.append(list(self.reader.tokens))
            within = self.reader.others
        else:
            within = self.documents_within
        if within is not None:
            condition, condition_params = _document_subquery(alias, within, collection_id)
            conditions.append(condition)
            params.extend(condition_params)
        return conditions, params

    def estimate_query(self, collection_id: int) -> tuple[str, list[Any]]:
        """Return a query of the collection's chunks these filters allow, to be planned
        for its estimated rows, never run.

        A reader's scope is written against its collection-prefixed tokens
        (``retrieval/sql/chunk_access_estimate.sql``), which the planner estimates from
        that collection's own statistics and which imply the collection: beside it, the
        collection's condition would count the collection's share twice.
        """
        if self.reader is None:
            conditions, params = self.sql("c", collection_id=collection_id)
            return allowed_chunks(collection_id, conditions, params)
        rest, params = replace(self, reader=None, documents_within=self.reader.others).sql(
            "c", collection_id=collection_id
        )
        tokens = [f"{collection_id}:{token}" for token in self.reader.tokens]
        where = " AND ".join(
            ["retrieval_collection_access(c.collection_id, c.access) ?| %s", *rest]
        )
        return f"SELECT 1 FROM retrieval_chunk c WHERE {where}", [tokens, *params]

    def chunk_ids(self, collection_id: int) -> list[int]:
        """Return the ids of the collection's chunks these filters allow, in id order (the
        answer set an exhaustive scoped ranking is checked against)."""
        from django.db import connections

        from retrieval.models import Chunk

        conditions, params = self.sql("c", collection_id=collection_id)
        where = " AND ".join(["c.collection_id = %s", *conditions])
        with connections[Chunk.objects.db].cursor() as cursor:
            cursor.execute(
                f"SELECT c.id FROM retrieval_chunk c WHERE {where} ORDER BY c.id",
                [collection_id, *params],
            )
            return [row[0] for row in cursor.fetchall()]


def estimated_rows(cursor, sql: str, params: list[Any]) -> float:
    """Return PostgreSQL's estimate of the rows ``sql`` returns (planning only, no rows read).

    A scope's size from the statistics of the chunks' metadata and the documents' access,
    in a tenth of a millisecond, where counting a wide scope's chunks costs milliseconds.
    """
    return float(_plan(cursor, sql, params)["Plan Rows"])


def allowed_chunks(
    collection_id: int, conditions: Sequence[str], params: Sequence[Any]
) -> tuple[str, list[Any]]:
    """The collection's chunks the conditions (on the chunk table aliased ``c``) allow, as
    one query (SQL, parameters): what a scope's size is estimated or counted from."""
    where = " AND ".join(["c.collection_id = %s", *conditions])
    return f"SELECT 1 FROM retrieval_chunk c WHERE {where}", [collection_id, *params]


def estimated_rows_each(cursor, queries: list[tuple[str, list[Any]]]) -> list[float]:
    """Return PostgreSQL's estimate of the rows of each query, planned in one statement
    (their ``UNION ALL``: the append's members, in order, are the queries' plans)."""
    if len(queries) == 1:
        return [estimated_rows(cursor, *queries[0])]
    union = " UNION ALL ".join(
        f"SELECT 1 FROM ({sql}) AS q{i}" for i, (sql, _) in enumerate(queries)
    )
    top = _plan(cursor, union, [param for _, params in queries for param in params])
    members = top.get("Plans", []) if top["Node Type"] == "Append" else []
    if len(members) != len(queries):  # a member planned away (known empty): one by one
        return [estimated_rows(cursor, sql, params) for sql, params in queries]
    return [float(member["Plan Rows"]) for member in members]


def _plan(cursor, sql: str, params: list[Any]) -> dict[str, Any]:
    """The top node of ``sql``'s plan (EXPLAIN, no rows read)."""
    cursor.execute("EXPLAIN (FORMAT JSON) " + sql, params)
    plan = cursor.fetchone()[0]
    plan = json.loads(plan) if isinstance(plan, str) else plan
    return plan[0]["Plan"]


def queryset_sql(queryset: Any) -> tuple[str, list[Any]] | None:
    """Return the SQL and parameters of ``queryset`` on its database; ``None`` when
    Django knows it matches nothing (e.g. ``pk__in=[]``) and sends no query."""
    try:
        sql, params = queryset.query.get_compiler(using=queryset.db).as_sql()
    except EmptyResultSet:
        return None
    return sql, list(params)


def _document_subquery(
    alias: str, documents: Any, collection_id: int | None
) -> tuple[str, list[Any]]:
    """Return ``alias.document_id IN (<the documents' ids>)``; nothing matches an empty set.

    The documents are those of the chunks' collection (as every chunk's document is), so
    that the planner estimates the scope's size and uses the collection's indexes;
    ``None``: chunks of any collection.
    """
    if collection_id is not None:
        documents = documents.filter(collection_id=collection_id)
    compiled = queryset_sql(documents.order_by().values("pk"))
    if compiled is None:
        return "FALSE", []
    sql, params = compiled
    return f"{alias}.document_id IN ({sql})", params
