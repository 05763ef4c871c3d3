"""Components a third party could ship, written only against the app's public bases.

An index that keeps its vectors in this process's memory (an engine outside PostgreSQL,
kept in step by the app's outbox) and a reranker counting shared words. Nothing here is
the app's: ``test_suites.py`` runs the app's public conformance suites on them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from retrieval.models import Collection
from retrieval.services.core.filters import Filters
from retrieval.services.indexes.base import IndexFeatures, VectorRow
from retrieval.services.indexes.external import EMPTY, ExternalIndex, resolved_document_ids
from retrieval.services.rerankers.base import BaseReranker
from retrieval.services.types import RetrievalResult

#: space name -> chunk id -> (document id, metadata, unit vector)
SPACES: dict[str, dict[int, tuple[int, dict[str, Any], np.ndarray]]] = {}


class MemoryIndex(ExternalIndex):
    """Brute-force cosine search over vectors held in a dict; scalar metadata filters only."""

    features = IndexFeatures(filter_objects=False, filter_lists=False, filter_nulls=False)

    def _create(self, name: str, dimensions: int) -> None:
        SPACES.setdefault(name, {})

    def _drop(self, name: str) -> None:
        SPACES.pop(name, None)

    def _names(self) -> list[str]:
        return list(SPACES)

    def _upsert(self, name: str, collection_id: int, rows: Sequence[VectorRow]) -> None:
        space = SPACES.setdefault(name, {})
        for chunk_id, document_id, metadata, vector in rows:
            array = np.asarray(vector, dtype=np.float32)
            space[int(chunk_id)] = (int(document_id), dict(metadata), array / np.linalg.norm(array))

    def _delete(self, name: str, collection_id: int, chunk_ids: Sequence[int]) -> None:
        for chunk_id in chunk_ids:
            SPACES.get(name, {}).pop(int(chunk_id), None)

    def _search(
        self, name: str, collection_id: int, vector: Sequence[float], limit: int, filters: Any
    ) -> list[tuple[int, float]]:
        query = np.asarray(vector, dtype=np.float32)
        query = query / np.linalg.norm(query)
        documents, metadata = filters or (None, {})
        hits = [
            (chunk_id, float(stored @ query))
            for chunk_id, (document_id, meta, stored) in SPACES.get(name, {}).items()
            if (documents is None or document_id in documents)
            and all(meta.get(key) == value for key, value in metadata.items())
        ]
        return sorted(hits, key=lambda hit: (-hit[1], hit[0]))[:limit]

    def _all_ids(self, name: str, collection_id: int) -> set[int]:
        return set(SPACES.get(name, {}))

    def translate(self, filters: Filters, collection: Collection) -> Any:
        documents = resolved_document_ids(filters, collection)
        if documents is not None and not documents:
            return EMPTY
        if documents is None and not filters.metadata:
            return None
        return (None if documents is None else set(documents), dict(filters.metadata))


class WordOverlapReranker(BaseReranker):
    """Score a passage by the query words it holds."""

    def _scores(
        self, query: str, results: list[RetrievalResult]
    ) -> tuple[list[float], dict[str, object]]:
        words = set(query.lower().split())
        scores = [
            float(len(words & set(r.chunk.content.lower().strip(".").split()))) for r in results
        ]
        return scores, {"words": len(words)}
