"""Retrieval quality on real BEIR-format collections, beside in-process references.

    python bench/quality.py [--datasets scifact cranfield]

For each dataset: ingest the corpus through the app (one chunk per document, the
default local embedder), then score BM25, dense and hybrid variants with the
app's evaluation, beside bm25s (same analysis, k1, b) and a numpy brute-force
dense search over the very vectors the app stored. Prints Markdown tables.
"""

from __future__ import annotations

import time

import numpy as np
from common import DATASETS, SHARED_DATA, run_over_datasets, table


def main() -> None:
    run_over_datasets(__doc__, run_dataset)


def run_dataset(name: str) -> None:
    import bm25s
    import Stemmer
    from django.test.utils import override_settings

    from retrieval.models import Chunk
    from retrieval.services.access import Scope
    from retrieval.services.core.fusion import FUSION_METHODS
    from retrieval.services.ingestion.collections import get_or_create_collection
    from retrieval.services.ingestion.ingest import Source, ingest
    from retrieval.services.quality.evaluation import (
        document_ranking,
        evaluate,
        load_beir,
        score_run,
    )
    from retrieval.services.query.search import search
    from retrieval.services.registry import analyzers, embedders, retrievers

    def ranked(q: str, retriever: str) -> list:
        # A benchmark acts for no user.
        return _ids(
            search(q, collection=collection, retriever=retriever, top_k=100, scope=Scope.ALL)
        )

    split = DATASETS[name]
    dataset = load_beir(SHARED_DATA / name, split)
    collection, _ = get_or_create_collection(f"bench-{name}", chunker="whole")
    entries = list(dataset.corpus())
    sources = [
        Source.from_text(e.text or e.title, external_id=e.id, title=e.title)
        for e in entries
        if (e.text or e.title).strip()
    ]
    started = time.perf_counter()
    run = ingest(collection, sources)
    ingest_seconds = time.perf_counter() - started
    print(
        f"## {name} ({split} split): {len(entries)} documents, "
        f"{len(dataset.judged_queries())} judged queries"
    )
    print(f"Ingest: {run.message} in {ingest_seconds:.1f} s\n")

    queries = dataset.judged_queries()
    rows = []

    def app_row(label: str, retriever: str | None = None, **hybrid_options) -> None:
        if hybrid_options:
            alias = f"bench-{label}"
            config = {
                "BACKEND": "retrieval.services.retrievers.hybrid.HybridRetriever",
                "OPTIONS": hybrid_options,
            }
            with override_settings(RETRIEVAL={"RETRIEVERS": {alias: config}}):
                result = evaluate(
                    lambda q: ranked(q, alias),
                    dataset,
                )
        else:
            result = evaluate(
                lambda q: ranked(q, retriever),
                dataset,
            )
        summary = result.as_dict()
        rows.append(
            [label, summary["ndcg@10"], summary["recall@100"], round(summary["latency_ms_p50"], 1)]
        )

    app_row(f"app bm25 (k1={retrievers['bm25'].k1}, b={retrievers['bm25'].b})", "bm25")
    app_row("app dense (HNSW, ef_search=100)", "dense")
    default = retrievers["hybrid"].method
    app_row(f"app hybrid {default} (the default)", "hybrid")
    for method in FUSION_METHODS:
        if method != default:
            label = "rrf k=60" if method == "rrf" else method
            app_row(f"app hybrid {label}", retrievers={"bm25": 1.0, "dense": 1.0}, method=method)
    app_row("app hybrid rrf, bm25 weight 2", retrievers={"bm25": 2.0, "dense": 1.0}, method="rrf")

    # References computed in this process on the same documents.
    chunks = list(
        Chunk.objects.filter(collection=collection).select_related("document").order_by("pk")
    )
    ids = [c.document.external_id for c in chunks]
    analyzer = analyzers["default"]
    stopwords = sorted(analyzer.stopwords)
    stemmer = Stemmer.Stemmer("english")
    corpus_tokens = bm25s.tokenize(
        [c.indexed_text for c in chunks],
        stopwords=stopwords,
        stemmer=stemmer,
        show_progress=False,
    )
    model = bm25s.BM25(k1=retrievers["bm25"].k1, b=retrievers["bm25"].b, method="lucene")
    model.index(corpus_tokens, show_progress=False)
    reference_run, latencies, identical = {}, [], 0
    bm25 = retrievers["bm25"]
    for qid, text in queries.items():
        started = time.perf_counter()
        tokens = bm25s.tokenize(
            [text], stopwords=stopwords, stemmer=stemmer, show_progress=False, return_ids=False
        )[0]
        scores = model.get_scores(tokens)
        top = np.argsort(-scores, kind="stable")[:100]
        ranking = [ids[i] for i in top if scores[i] > 0]
        latencies.append((time.perf_counter() - started) * 1000)
        reference_run[qid] = ranking
        ours = _ids(bm25.retrieve(text, collection=collection, top_k=10))
        identical += ours == ranking[:10]
    metrics = score_run(reference_run, dataset.qrels)
    rows.append(
        [
            "bm25s (same analysis, k1 and b)",
            metrics["ndcg@10"],
            metrics["recall@100"],
            round(float(np.median(latencies)), 1),
        ]
    )

    vectors = np.array([c.embedding for c in chunks], dtype=np.float32)
    embedder = embedders[collection.embedder]
    exact_run, latencies, recall10 = {}, [], []
    dense = retrievers["dense"]
    for qid, text in queries.items():
        started = time.perf_counter()
        query = embedder.embed_query(text)
        top = np.argsort(-(vectors @ query))[:100]
        latencies.append((time.perf_counter() - started) * 1000)
        exact_run[qid] = document_ranking([ids[i] for i in top])
        approximate = {
            r.chunk.pk for r in dense.search_vector(query, collection=collection, top_k=10)
        }
        recall10.append(len(approximate & {chunks[i].pk for i in top[:10]}) / 10)
    metrics = score_run(exact_run, dataset.qrels)
    rows.append(
        [
            "numpy brute force, same vectors",
            metrics["ndcg@10"],
            metrics["recall@100"],
            round(float(np.median(latencies)), 1),
        ]
    )

    print(table(["retriever", "nDCG@10", "Recall@100", "p50 ms"], rows))
    print(
        f"\nBM25 top-10 identical to bm25s: {identical}/{len(queries)} queries; "
        f"HNSW recall@10 against the exact scan: {np.mean(recall10):.3f}\n"
    )


def _ids(results) -> list[str]:
    return [r.chunk.document.external_id for r in results]


if __name__ == "__main__":
    main()
