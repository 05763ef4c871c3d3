"""Milvus as an external index, through ``pymilvus.MilvusClient``.

OPTIONS: ``uri`` (a Milvus server or cluster URL; for Milvus Lite a local file path,
or ``http://127.0.0.1:PORT`` of ``milvus-lite server`` when several processes share
it), optional ``token``, ``db_name``, ``timeout`` (seconds a search may wait for the
server, connecting and loading the space included; default 10), the vector index
(``index_type`` "HNSW" with ``index_params`` ``{"M": 16, "efConstruction": 64}``, and
``ef``, HNSW's search breadth, 100 unless a search's ``ef_search`` hint says more),
``consistency_level`` of searches ("Bounded") and ``build_timeout`` (seconds a rebuild
waits for the server to index the new space before it switches to it; default 600).
Needs ``pip install "django-retrieval[milvus]"``.

Servers: Milvus 2.3.5 or later (:data:`MIN_SERVER`; tested on the 2.3.5 standalone server
and on Milvus Lite 3.2), checked by ``manage.py check --database default``
(:meth:`MilvusIndex.check_server`).

Each space is one Milvus collection: primary key the chunk id, the retrieval
collection id as partition key in a single partition (a space holds one retrieval
collection; Milvus 2.3 routed upserts into a many-partition key by the wrong field,
so rows went missing from searches that filter on the key), the document id, the chunk
metadata as JSON, and a cosine HNSW-indexed vector. Filters translate to a boolean
expression with every literal escaped; a metadata value the expression cannot compare
(null, see ``features``) raises ``InvalidFilterError``.

Consistency: searches read at ``consistency_level`` (Bounded: no wait; Strong waits for
the server's next time tick, ~200 ms a search); PostgreSQL confirms their hits and ranks
what the outbox has not applied yet (see ``external``). Reads that must see the latest
writes ask for Strong: the outbox's confirmation that its writes and deletes are visible
(:meth:`MilvusIndex.await_visible`), the drift check's list of ids and a rebuild's count.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Sequence
from typing import Any

from retrieval.models import Collection
from retrieval.services.core.filters import Filters
from retrieval.services.indexes.base import IndexFeatures, VectorRow
from retrieval.services.indexes.external import EMPTY, ExternalIndex, resolved_document_ids

logger = logging.getLogger(__name__)

#: Rows per page when listing a space's ids (in primary-key order, ``id > last``).
PAGE = 5000
#: Ids per Strong query confirming the outbox's writes (a query returns at most 16384).
CONFIRM_BATCH = 5000
#: The oldest Milvus server release supported: tested, with upsert, COSINE and JSON contains.
MIN_SERVER = (2, 3, 5)
CONSISTENCY_LEVELS = ("Strong", "Bounded", "Session", "Eventually")

#: Keep-alive pings no more often than gRPC servers accept by default (5 minutes).
IDLE_FRIENDLY_GRPC = {
    "grpc.keepalive_time_ms": 300_000,
    "grpc.keepalive_permit_without_calls": False,
}


class MilvusIndex(ExternalIndex):
    """Chunk vectors in Milvus (or Milvus Lite), one Milvus collection per space."""

    features = IndexFeatures(filter_nulls=False, batch_queries=True)

    def __init__(
        self,
        *,
        uri: str,
        token: str = "",
        db_name: str = "",
        consistency_level: str = "Bounded",
        index_type: str = "HNSW",
        index_params: dict[str, Any] | None = None,
        ef: int = 100,
        build_timeout: float = 600.0,
        grpc_options: dict[str, Any] | None = None,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        if not uri:
            raise ValueError("uri is required: a Milvus URL, or a file path for Milvus Lite.")
        if consistency_level not in CONSISTENCY_LEVELS:
            raise ValueError(
                f"consistency_level must be one of {', '.join(CONSISTENCY_LEVELS)}, "
                f"not {consistency_level!r}."
            )
        if isinstance(ef, bool) or not isinstance(ef, int) or ef < 1:
            raise ValueError(f"ef must be a positive integer, not {ef!r}.")
        if not (isinstance(build_timeout, int | float) and build_timeout >= 0):
            raise ValueError(
                f"build_timeout must be a number of seconds >= 0, not {build_timeout!r}."
            )
        self.uri, self.token, self.db_name = uri, token, db_name
        self.consistency_level = consistency_level
        self.index_type = index_type
        if index_params is None:
            index_params = {"M": 16, "efConstruction": 64} if index_type == "HNSW" else {}
        self.index_params = dict(index_params)
        self.ef = ef
        self.build_timeout = float(build_timeout)
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
                timeout=self._seconds(),  # to connect
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

    def check_server(self) -> list:
        """Ask the server its version: unreachable is a warning, an unsupported one an error."""
        from django.core.checks import Error, Warning

        try:
            version = self.server_version()
        except ImportError:
            return []  # check() names the missing library
        except Exception as e:
            self.reset()
            return [
                Warning(
                    f"Index {self.alias!r} (MilvusIndex) cannot reach the Milvus server at "
                    f"{self.uri!r}: {e.__class__.__name__}: {e}",
                    hint="Start the server or correct OPTIONS['uri']; meanwhile writes wait in "
                    "the outbox and searches of its collections fail (hybrid ones answer from "
                    "BM25).",
                    id="retrieval.W021",
                )
            ]
        if not supported_server(version):
            oldest = ".".join(map(str, MIN_SERVER))
            return [
                Error(
                    f"Index {self.alias!r} (MilvusIndex): the Milvus server at {self.uri!r} "
                    f"is version {version!r}; the app supports Milvus {oldest} or later.",
                    hint="Upgrade the server (older releases lack COSINE, upsert or JSON "
                    "filters, or route upserts wrongly).",
                    id="retrieval.E022",
                )
            ]
        return []

    def server_version(self) -> str:
        """Return the version the server reports (``v2.3.5-lite``, ``milvus_lite-3.2.2`` ...)."""
        return str(self.client.get_server_version(timeout=self._seconds()))

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
            field_name="vector",
            index_type=self.index_type,
            metric_type="COSINE",
            params=dict(self.index_params),
        )
        client.create_collection(
            name,
            schema=schema,
            index_params=index_params,
            consistency_level=self.consistency_level,
            num_partitions=1,  # one retrieval collection a space
        )
        self._loaded.add(name)

    def _ready(self, name: str):
        if name not in self._loaded:
            self.client.load_collection(name, timeout=self._seconds())
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
        """Seal the rebuilt space's segments and wait (``build_timeout``) until the server
        has indexed them: searches then switch to an HNSW index, not a scan."""
        client = self._ready(name)
        client.flush(name)
        deadline = time.monotonic() + self.build_timeout
        while True:
            state = client.describe_index(name, "vector")
            total = int(state.get("total_rows") or 0)
            if int(state.get("indexed_rows") or 0) >= total and not state.get("pending_index_rows"):
                return
            if time.monotonic() >= deadline:
                logger.warning(
                    "Milvus has indexed %s of %s vectors of %s after %s s; switching to it "
                    "anyway (the rest are searched exhaustively until indexed).",
                    state.get("indexed_rows"),
                    total,
                    name,
                    self.build_timeout,
                )
                return
            time.sleep(0.5)

    def _delete(self, name: str, collection_id: int, chunk_ids: Sequence[int]) -> None:
        self._ready(name).delete(name, ids=[int(i) for i in chunk_ids])

    def _strong_ids(self, name: str, expression: str, limit: int) -> list[int]:
        rows = self._ready(name).query(
            name,
            filter=expression,
            output_fields=["id"],
            limit=limit,
            consistency_level="Strong",
            timeout=self._seconds(),
        )
        return [int(row["id"]) for row in rows]

    def _all_ids(self, name: str, collection_id: int) -> set[int]:
        """Every id, read at Strong consistency, a page at a time in primary-key order.

        Not pymilvus's query_iterator: against a 2.3 server it reads at a timestamp of
        the client's making and returned nothing.
        """
        ids: set[int] = set()
        last = -1
        while True:
            page = self._strong_ids(
                name, f"collection_id == {int(collection_id)} and id > {last}", PAGE
            )
            ids.update(page)
            if len(page) < PAGE:
                return ids
            last = max(page)

    def _count(self, name: str, collection_id: int) -> int:
        rows = self._ready(name).query(
            name,
            filter=f"collection_id == {int(collection_id)}",
            output_fields=["count(*)"],
            consistency_level="Strong",
            timeout=self._seconds(),
        )
        return int(rows[0]["count(*)"]) if rows else 0

    def count(self, collection: Collection) -> int:
        name = self._space(collection)
        if not name or name not in self._names():
            return 0
        return self._count(name, collection.pk)

    def await_visible(
        self, collection: Collection, *, written: Sequence[int], deleted: Sequence[int]
    ) -> None:
        """Read the ids back at Strong consistency, which waits until the server has
        applied the writes: searches at any level see them from then on."""
        name = self._space(collection)
        if not name or not (written or deleted):
            return
        wanted, gone = {int(i) for i in written}, {int(i) for i in deleted}
        every = sorted(wanted | gone)
        for start in range(0, len(every), CONFIRM_BATCH):
            part = every[start : start + CONFIRM_BATCH]
            expression = (
                f"collection_id == {int(collection.pk)} and id in [{', '.join(map(str, part))}]"
            )
            found = set(self._strong_ids(name, expression, len(part)))
            missing = (wanted & set(part)) - found
            present = gone & found
            if missing or present:
                raise RuntimeError(
                    f"Milvus space {name!r} does not show {len(missing)} written vectors "
                    f"(e.g. {sorted(missing)[:3]}) and still shows {len(present)} deleted "
                    f"ones (e.g. {sorted(present)[:3]})."
                )

    def _search_many(
        self,
        name: str,
        collection_id: int,
        vectors: Sequence[Sequence[float]],
        limit: int,
        filters: Any,
        hints: dict[str, Any],
    ) -> list[list[tuple[int, float]]]:
        """One request for every vector, HNSW's ``ef`` the larger of the index's and the
        search's ``ef_search`` hint (and at least ``limit``, as Milvus requires)."""
        expression = " and ".join([f"collection_id == {int(collection_id)}", *(filters or [])])
        params = {}
        if self.index_type == "HNSW":
            params["ef"] = max(self.ef, int(hints.get("ef_search") or 0), limit)
        found = self._ready(name).search(
            name,
            [[float(x) for x in vector] for vector in vectors],
            limit=limit,
            filter=expression,
            output_fields=["id"],
            search_params={"metric_type": "COSINE", "params": params},
            consistency_level=self.consistency_level,
            timeout=self._seconds(),
        )
        return [[(int(hit["id"]), float(hit["distance"])) for hit in hits] for hits in found]

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


def supported_server(version: str) -> bool:
    """Whether a server reporting ``version`` is supported: Milvus :data:`MIN_SERVER` or
    later, or Milvus Lite (``milvus_lite-3.2.2``, as the milvus extra installs it)."""
    if version.startswith("milvus_lite"):
        return True
    release = parse_version(version)
    return release is not None and release >= MIN_SERVER


def parse_version(version: str) -> tuple[int, int, int] | None:
    """Return (major, minor, patch) of a Milvus version string such as ``v2.3.5-lite``."""
    match = re.search(r"(\d+)\.(\d+)\.(\d+)", version)
    return None if match is None else (int(match[1]), int(match[2]), int(match[3]))


def literal(value: Any) -> str:
    """Return ``value`` as a Milvus expression literal (strings quoted and escaped)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    # A JSON string literal: backslashes, quotes and control characters escaped.
    return json.dumps(str(value), ensure_ascii=False)
