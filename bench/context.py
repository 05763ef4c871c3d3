"""Contextual chunk text and fusion, measured on training data.

    python bench/context.py [--datasets scifact cranfield]

Each dataset is ingested twice (one chunk per document, the local embedder): with
``CHUNK_CONTEXT`` off (the content alone is embedded and BM25-indexed) and with the
default (title and heading path before the content). Each collection is then scored
with BM25, dense and hybrid fusions (RRF, relative score, DBSF, leg weights).
Prints Markdown tables of nDCG@10 and Recall@100.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from common import beir_sources, run_over_datasets, table

if TYPE_CHECKING:
    from retrieval.models import Collection

FUSIONS = {
    "hybrid rrf k=60": {"retrievers": {"bm25": 1.0, "dense": 1.0}, "method": "rrf", "k": 60},
    "hybrid rrf, dense weight 1.5": {
        "retrievers": {"bm25": 1.0, "dense": 1.5},
        "method": "rrf",
        "k": 60,
    },
    "hybrid relative score": {
        "retrievers": {"bm25": 1.0, "dense": 1.0},
        "method": "relative_score",
    },
    "hybrid relative score, dense 1.5": {
        "retrievers": {"bm25": 1.0, "dense": 1.5},
        "method": "relative_score",
    },
    "hybrid dbsf": {"retrievers": {"bm25": 1.0, "dense": 1.0}, "method": "dbsf"},
}


#: The cached local embedder: vectors other benches computed for the same texts are reused.
EMBEDDERS = {"cached": {"BACKEND": "cached_embedder.CachedLocalEmbedder"}}


def main() -> None:
    run_over_datasets(__doc__, run_dataset)


def context_collection(name: str, sources: list, *, context: bool = True) -> Collection:
    """Return ``bench-context-<name>-on`` (or ``-off``: ``CHUNK_CONTEXT`` None), ingested.

    One chunk per document, embedded by the cached embedder; documents already
    indexed unchanged are skipped.
    """
    from django.test.utils import override_settings

    from retrieval.services.collections import get_or_create_collection
    from retrieval.services.indexing import ingest

    retrieval = {} if context else {"CHUNK_CONTEXT": None}
    with override_settings(RETRIEVAL={**retrieval, "EMBEDDERS": EMBEDDERS}):
        collection, _ = get_or_create_collection(
            f"bench-context-{name}-{'on' if context else 'off'}", chunker="whole", embedder="cached"
        )
        started = time.perf_counter()
        run = ingest(collection, sources)
    label = "title + headings" if context else "off"
    print(f"context {label}: {run.message} in {time.perf_counter() - started:.0f} s")
    return collection


def run_dataset(name: str) -> None:
    from django.test.utils import override_settings

    from retrieval.services.evaluation import evaluate
    from retrieval.services.access import Scope
    from retrieval.services.search import search

    split, dataset, sources = beir_sources(name)
    print(f"## {name} ({split}): {len(sources)} documents, {len(dataset.judged_queries())} queries")
    rows = []
    for label, context in (("off", False), ("title + headings", True)):
        collection = context_collection(name, sources, context=context)
        configs = {
            f"hybrid-{i}": {
                "BACKEND": "retrieval.services.retrievers.hybrid.HybridRetriever",
                "OPTIONS": options,
            }
            for i, options in enumerate(FUSIONS.values())
        }
        aliases = ["bm25", "dense", *configs]
        names = ["bm25", "dense", *FUSIONS]
        with override_settings(RETRIEVAL={"RETRIEVERS": configs, "EMBEDDERS": EMBEDDERS}):
            for alias, retriever_name in zip(aliases, names, strict=True):
                result = evaluate(
                    lambda q, alias=alias, collection=collection: [
                        r.chunk.document.external_id
                        for r in search(
                            q, collection=collection, retriever=alias, top_k=100, scope=Scope.ALL
                        )
                    ],
                    dataset,
                ).as_dict()
                rows.append([label, retriever_name, result["ndcg@10"], result["recall@100"]])
    print()
    print(table(["context", "retriever", "nDCG@10", "Recall@100"], rows))
    print()


if __name__ == "__main__":
    main()
