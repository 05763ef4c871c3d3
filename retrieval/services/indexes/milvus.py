"""Milvus as an external index, through ``pymilvus.MilvusClient``.

OPTIONS: ``uri`` (a Milvus server or cluster URL; for Milvus Lite a local file path,
or ``http://127.0.0.1:PORT`` of ``milvus-lite server`` when several processes share
it), optional ``token``, ``db_name`` and ``timeout`` (seconds to connect, load a space or
search; default 10). Needs ``pip install "django-retrieval[milvus]"``.

Each space is one Milvus collection: primary key the chunk id, the retrieval
collection id as partition key, the document id, the chunk metadata as JSON, and a
cosine-indexed vector. Filters translate to a boolean expression with every literal
escaped; a metadata value the expression cannot compare (null, see ``features``)
raises ``InvalidFilterError``. Below strong consistency a search may still return deleted
ids: results are re-checked against PostgreSQL (see ``external``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from retrieval.models import Collection
from retrieval.services.filters import Filters
from retrieval.services.indexes.base import IndexFeatures, VectorRow
from retrieval.services.indexes.external import EMPTY, ExternalIndex, resolved_document_ids

#: Rows per query_iterator page when listing a space's ids.
PAGE = 5000

#: Keep-alive pings no more often than gRPC servers accept by default (5 minutes).
IDLE_FRIENDLY_GRPC = {
    "grpc.keepalive_time_ms": 300_000,
    "grpc.keepalive_permit_without_calls": False,
}


class MilvusIndex(ExternalIndex):
    """Chunk vectors in Milvus (or Milvus Lite), one Milvus collection per space."""

    features = IndexFeatures(filter_nulls=False)

    def __init__(
        self,
        *,
        uri: str,
        token: str = "",
        db_name: str = "",
        consistency_level: str = "Strong",
        index_type: str = "HNSW",
        grpc_options: dict[str, Any] | None = None,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        if not uri:
            raise ValueError("uri is required: a Milvus URL, or a file path for Milvus Lite.")
        self.uri, self.token, self.db_name = uri, token, db_name
        self.consistency_level = consistency_level
        self.index_type = index_type
        # pymilvus pings an idle channel every 10 s; servers with gRPC's default policy
        # (Milvus Lite among them) answer "too many pings" and drop the connection.
        self.grpc_options = {**IDLE_FRIENDLY_GRPC, **(grpc_options or {})}
        self._client = None
        self._loaded: set[str] = set()

    @property
    def client(self):
        if self._client is None:
            from pymilvus import MilvusClient

            self._client = MilvusClient(
                uri=self.uri,
                token=self.token,
                db_name=self.db_name,
                grpc_options=self.grpc_options,
                timeout=self.timeout,  # to connect
                dedicated=True,  # a shared connection keeps the options of whoever opened it
            )
        return self._client

    def reset(self) -> None:
        """Close the connection: a client whose server went away does not recover."""
        client, self._client, self._loaded = self._client, None, set()
        if client is not None:
            try:
                client.close()
            except Exception:  # already broken: nothing more to release
                pass

    def check(self) -> list:
        from django.core.checks import Error

        try:
            import pymilvus  # noqa: F401
        except ImportError:
            return [
                Error(
                    f"Index {self.alias!r} needs pymilvus.",
                    hint='pip install "django-retrieval[milvus]"',
                    id="retrieval.E021",
                )
            ]
        return []

    def _create(self, name: str, dimensions: int) -> None:
        from pymilvus import DataType

        client = self.client
        if client.has_collection(name):
            return
        schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("id", DataType.INT64, is_primary=True)
        schema.add_field("collection_id", DataType.INT64, is_partition_key=True)
        schema.add_field("document_id", DataType.INT64)
        schema.add_field("metadata", DataType.JSON)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=int(dimensions))
        index_params = client.prepare_index_params()
        index_params.add_index(
            field_name="vector", index_type=self.index_type, metric_type="COSINE"
        )
        client.create_collection(
            name,
            schema=schema,
            index_params=index_params,
            consistency_level=self.consistency_level,
        )
        self._loaded.add(name)

    def _ready(self, name: str):
        if name not in self._loaded:
            self.client.load_collection(name, timeout=self.timeout)
            self._loaded.add(name)
        return self.client

    def _drop(self, name: str) -> None:
        if self.client.has_collection(name):
            self.client.drop_collection(name)
        self._loaded.discard(name)

    def _names(self) -> list[str]:
        return list(self.client.list_collections())

    def _upsert(self, name: str, collection_id: int, rows: Sequence[VectorRow]) -> None:
        self._ready(name).upsert(
            name,
            [
                {
                    "id": int(chunk_id),
                    "collection_id": int(collection_id),
                    "document_id": int(document_id),
                    "metadata": metadata or {},
                    "vector": [float(x) for x in vector],
                }
                for chunk_id, document_id, metadata, vector in rows
            ],
        )

    def _filled(self, name: str) -> None:
        """Seal the rebuilt space's segments, so that they are indexed before searches."""
        self._ready(name).flush(name)

    def _delete(self, name: str, collection_id: int, chunk_ids: Sequence[int]) -> None:
        self._ready(name).delete(name, ids=[int(i) for i in chunk_ids])

    def _all_ids(self, name: str, collection_id: int) -> set[int]:
        iterator = self._ready(name).query_iterator(
            name,
            batch_size=PAGE,
            filter=f"collection_id == {int(collection_id)}",
            output_fields=["id"],
        )
        ids: set[int] = set()
        try:
            while page := iterator.next():
                ids.update(int(row["id"]) for row in page)
        finally:
            iterator.close()
        return ids

    def _search(
        self, name: str, collection_id: int, vector: Sequence[float], limit: int, filters: Any
    ) -> list[tuple[int, float]]:
        expression = " and ".join([f"collection_id == {int(collection_id)}", *(filters or [])])
        found = self._ready(name).search(
            name,
            [[float(x) for x in vector]],
            limit=limit,
            filter=expression,
            output_fields=["id"],
            timeout=self.timeout,
        )
        return [(int(hit["id"]), float(hit["distance"])) for hit in found[0]]

    def translate(self, filters: Filters, collection: Collection) -> Any:
        clauses: list[str] = []
        document_ids = resolved_document_ids(filters, collection)
        if document_ids is not None:
            if not document_ids:
                return EMPTY
            clauses.append(f"document_id in [{', '.join(str(int(i)) for i in document_ids)}]")
        for key, value in filters.metadata.items():
            clauses.extend(self._contains(f"metadata[{literal(str(key))}]", value))
        return clauses

    def _contains(self, path: str, value: Any) -> list[str]:
        """Return conditions meaning "the JSON at ``path`` contains ``value``" (jsonb ``@>``)."""
        if isinstance(value, dict):
            return [
                condition
                for k, v in value.items()
                for condition in self._contains(f"{path}[{literal(str(k))}]", v)
            ]
        if isinstance(value, list):
            if not value:
                return []
            return [f"json_contains_all({path}, [{', '.join(literal(v) for v in value)}])"]
        return [f"{path} == {literal(value)}"]


def literal(value: Any) -> str:
    """Return ``value`` as a Milvus expression literal (strings quoted and escaped)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    # A JSON string literal: backslashes, quotes and control characters escaped.
    return json.dumps(str(value), ensure_ascii=False)
