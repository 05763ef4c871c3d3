"""Chroma as an external index, through ``chromadb.HttpClient`` (a ``chroma run`` server).

OPTIONS: ``host`` and ``port`` of the server (``ssl``, ``headers``, ``timeout``: seconds a
search may wait for the server, connecting included, default 10, optional), or
``path`` for an embedded PersistentClient (one process only: it is not
process-safe). Needs ``pip install "django-retrieval[chroma]"``.

Each chunk is stored with its document id and its metadata's top-level scalar
values (keys prefixed ``m.``). Filters translate to Chroma's ``where``: document ids
to ``$in``; metadata to equality on those keys. A metadata value Chroma cannot
compare (an object, a list, null) raises ``InvalidFilterError``: never dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from retrieval.models import Collection
from retrieval.services.core.filters import Filters
from retrieval.services.core.tracing import remote_timeout
from retrieval.services.indexes.base import IndexFeatures, VectorRow
from retrieval.services.indexes.external import EMPTY, ExternalIndex, resolved_document_ids

SCALARS = (str, int, float, bool)
#: Ids Chroma returns per page when listing a space.
PAGE = 5000


def bounded_http_client(
    host: str, port: int, *, ssl: bool, headers: dict[str, str], seconds: float
) -> Any:
    """Return a ``chromadb.HttpClient`` whose requests time out (chromadb has no option for it).

    chromadb builds its ``httpx.Client`` with ``timeout=None``, so a server that stops
    answering would hold every search forever. Its first request, made while it is
    built, is preceded by a heartbeat within ``seconds``; then the timeout is set on
    its session, a private attribute: if a release moves it, fail loudly rather than
    run unbounded. Each request's timeout is then cut to what the caller's deadline
    (a search's) leaves, by a request hook run on the caller's thread.
    """
    import chromadb
    import httpx  # chromadb's own HTTP library

    scheme = "https" if ssl else "http"
    url = f"{scheme}://{host}:{port}/api/v2/heartbeat"
    httpx.get(url, headers=headers, timeout=remote_timeout(seconds)).raise_for_status()
    client = chromadb.HttpClient(host=host, port=port, ssl=ssl, headers=headers)
    session = getattr(getattr(client, "_server", None), "_session", None)
    if session is None or not hasattr(session, "timeout"):
        raise ImproperlyConfigured(
            "This chromadb release hides its HTTP session; the Chroma index cannot bound "
            "its requests. Pin chromadb to a 1.5 release."
        )
    session.timeout = httpx.Timeout(seconds)

    def within_deadline(request: httpx.Request) -> None:
        request.extensions["timeout"] = httpx.Timeout(remote_timeout(seconds)).as_dict()

    hooks = session.event_hooks
    session.event_hooks = {**hooks, "request": [*hooks.get("request", []), within_deadline]}
    return client


class ChromaIndex(ExternalIndex):
    """Chunk vectors in a Chroma server, one Chroma collection per space (cosine)."""

    features = IndexFeatures(
        filter_objects=False, filter_lists=False, filter_nulls=False, batch_queries=True
    )
    #: Chroma refuses very large n_results; rank widens up to this.
    max_fetch = 4096

    def __init__(
        self,
        *,
        host: str | None = None,
        port: int = 8000,
        path: str | None = None,
        ssl: bool = False,
        headers: dict[str, str] | None = None,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        if (host is None) == (path is None):
            raise ValueError("give either host (and port) of a chroma server, or path.")
        self.host, self.port, self.path = host, int(port), path
        self.ssl, self.headers = ssl, headers or {}
        self._client = None

    @property
    def client(self):
        if self._client is None:
            import chromadb

            if self.path is not None:
                self._client = chromadb.PersistentClient(path=self.path)
            else:
                self._client = bounded_http_client(
                    self.host, self.port, ssl=self.ssl, headers=self.headers, seconds=self.timeout
                )
        return self._client

    def check(self) -> list:
        from django.core.checks import Error

        try:
            import chromadb  # noqa: F401
        except ImportError:
            return [
                Error(
                    f"Index {self.alias!r} needs chromadb.",
                    hint='pip install "django-retrieval[chroma]"',
                    id="retrieval.E020",
                )
            ]
        return []

    def check_server(self) -> list:
        """Ask the server for its heartbeat: one that does not answer is a warning."""
        from django.core.checks import Warning

        if self.path is not None:
            return []
        try:
            import httpx

            scheme = "https" if self.ssl else "http"
            url = f"{scheme}://{self.host}:{self.port}/api/v2/heartbeat"
            httpx.get(url, headers=self.headers, timeout=self.timeout).raise_for_status()
        except ImportError:
            return []  # check() names the missing library
        except Exception as e:
            return [
                Warning(
                    f"Index {self.alias!r} (ChromaIndex) cannot reach the Chroma server at "
                    f"{self.host}:{self.port}: {e.__class__.__name__}: {e}",
                    hint="Start `chroma run` or correct OPTIONS; meanwhile writes wait in the "
                    "outbox and searches of its collections fail (hybrid ones answer from BM25).",
                    id="retrieval.W020",
                )
            ]
        return []

    def _collection(self, name: str):
        return self.client.get_collection(name, embedding_function=None)

    def _create(self, name: str, dimensions: int) -> None:
        self.client.get_or_create_collection(
            name,
            metadata={"hnsw:space": "cosine", "dimensions": dimensions},
            embedding_function=None,
        )

    def _drop(self, name: str) -> None:
        if name in self._names():
            self.client.delete_collection(name)

    def _names(self) -> list[str]:
        return [c if isinstance(c, str) else c.name for c in self.client.list_collections()]

    def _upsert(self, name: str, collection_id: int, rows: Sequence[VectorRow]) -> None:
        self._collection(name).upsert(
            ids=[str(chunk_id) for chunk_id, *_ in rows],
            embeddings=[[float(x) for x in vector] for *_, vector in rows],
            metadatas=[_stored_metadata(document, metadata) for _, document, metadata, _ in rows],
        )

    def _delete(self, name: str, collection_id: int, chunk_ids: Sequence[int]) -> None:
        self._collection(name).delete(ids=[str(i) for i in chunk_ids])

    def _all_ids(self, name: str, collection_id: int) -> set[int]:
        collection, ids, offset = self._collection(name), set(), 0
        while page := collection.get(include=[], limit=PAGE, offset=offset)["ids"]:
            ids.update(int(i) for i in page)
            offset += len(page)
        return ids

    def _count(self, name: str, collection_id: int) -> int:
        return int(self._collection(name).count())

    def _search_many(
        self,
        name: str,
        collection_id: int,
        vectors: Sequence[Sequence[float]],
        limit: int,
        filters: Any,
        hints: dict[str, Any],
    ) -> list[list[tuple[int, float]]]:
        """Every vector in one query request."""
        found = self._collection(name).query(
            query_embeddings=[[float(x) for x in vector] for vector in vectors],
            n_results=limit,
            where=filters,
            include=["distances"],
        )
        return [
            [(int(i), 1.0 - float(d)) for i, d in zip(ids, distances, strict=True)]
            for ids, distances in zip(found["ids"], found["distances"], strict=True)
        ]

    def translate(self, filters: Filters, collection: Collection) -> Any:
        clauses: list[dict[str, Any]] = []
        document_ids = resolved_document_ids(filters, collection)
        if document_ids is not None:
            if not document_ids:
                return EMPTY
            clauses.append({"document_id": {"$in": [int(i) for i in document_ids]}})
        for key, value in filters.metadata.items():
            clauses.append({f"m.{key}": value})
        if not clauses:
            return None
        return clauses[0] if len(clauses) == 1 else {"$and": clauses}


def _stored_metadata(document_id: int, metadata: dict[str, Any]) -> dict[str, Any]:
    stored: dict[str, Any] = {"document_id": int(document_id)}
    for key, value in (metadata or {}).items():
        if isinstance(value, SCALARS):
            stored[f"m.{key}"] = value
    return stored
