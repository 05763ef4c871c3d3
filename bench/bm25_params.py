"""BM25's k1 and b, alone and inside the default hybrid, measured on training data.

    python bench/bm25_params.py [--datasets scifact cranfield]

k1 and b are query-time parameters (the postings store tf and dl), so each dataset
is ingested once (one chunk per document, the default ``CHUNK_CONTEXT``, the local
embedder through ``cached_embedder`` so a second run embeds nothing) and ranked by
one ``BM25Retriever`` per setting, and by the default hybrid (RRF k=60, equal
weights) with that retriever as its BM25 leg. Prints nDCG@10 and Recall@100.
The real documents' figures come from ``realdocs.py --bm25-params``.
"""

from __future__ import annotations

import time

from common import beir_sources, run_over_datasets, table

#: (k1, b): the default (Lucene's, Elasticsearch's), Anserini's BEIR setting, neighbours.
PARAMS = [(1.2, 0.75), (0.9, 0.4), (1.2, 0.4), (1.5, 0.75), (0.9, 0.75)]


def retriever_settings(params: list[tuple[float, float]]) -> dict:
    """RETRIEVERS entries ``bm25 k1/b`` and ``hybrid k1/b`` for each setting."""
    settings = {}
    for k1, b in params:
        name = f"{k1}/{b}"
        settings[f"bm25 {name}"] = {
            "BACKEND": "retrieval.services.retrievers.bm25.BM25Retriever",
            "OPTIONS": {"k1": k1, "b": b},
        }
        settings[f"hybrid {name}"] = {
            "BACKEND": "retrieval.services.retrievers.hybrid.HybridRetriever",
            "OPTIONS": {
                "retrievers": {f"bm25 {name}": 1.0, "dense": 1.0},
                "method": "rrf",
                "k": 60,
            },
        }
    return settings


def main() -> None:
    run_over_datasets(__doc__, run_dataset)


def run_dataset(name: str) -> None:
    from django.test.utils import override_settings

    from retrieval.services.collections import get_or_create_collection
    from retrieval.services.evaluation import evaluate
    from retrieval.services.indexing import ingest
    from retrieval.services.access import Scope
    from retrieval.services.search import search

    split, dataset, sources = beir_sources(name)
    print(f"## {name} ({split}): {len(sources)} documents, {len(dataset.judged_queries())} queries")
    settings = {
        "EMBEDDERS": {"cached": {"BACKEND": "cached_embedder.CachedLocalEmbedder"}},
        "RETRIEVERS": retriever_settings(PARAMS),
    }
    rows = []
    with override_settings(RETRIEVAL=settings):
        collection, _ = get_or_create_collection(
            f"bench-bm25-{name}", chunker="whole", embedder="cached"
        )
        started = time.perf_counter()
        run = ingest(collection, sources)
        print(f"Ingest: {run.message} in {time.perf_counter() - started:.0f} s\n")
        for k1, b in PARAMS:
            row = [f"k1={k1}, b={b}" + (" (default)" if (k1, b) == PARAMS[0] else "")]
            for kind in ("bm25", "hybrid"):
                alias = f"{kind} {k1}/{b}"
                result = evaluate(
                    lambda q, alias=alias: [
                        r.chunk.document.external_id
                        for r in search(
                            q, collection=collection, retriever=alias, top_k=100, scope=Scope.ALL
                        )
                    ],
                    dataset,
                ).as_dict()
                row.append(f"{result['ndcg@10']:.4f} / {result['recall@100']:.4f}")
            rows.append(row)
    print(table(["BM25", "bm25 nDCG@10 / R@100", "hybrid rrf k=60 nDCG@10 / R@100"], rows))
    print()


if __name__ == "__main__":
    main()
