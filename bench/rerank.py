"""Reranking the hybrid top-100 on SciFact (train): nDCG@10 and the latency it adds.

    python bench/rerank.py --model-dir DIR [--queries N]

``DIR`` holds a cross-encoder exported to ONNX (``model.onnx`` + ``tokenizer.json``,
e.g. ``optimum-cli export onnx --model cross-encoder/ms-marco-MiniLM-L-6-v2 DIR``).
No cross-encoder ships its weights in a package (see ../shared/MODELS.md), so this
machine cannot fetch one: the script refuses to run without a folder rather than
print figures of a stand-in. It ingests SciFact into ``bench-scifact`` (one chunk
per document, as bench/quality.py does), then for each judged query times the
hybrid top-100 and the reranking of it, and prints nDCG@10 of both with the p50/p95
latency added by reranking.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from common import DATASETS, SHARED_DATA, machine, setup_django, table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model-dir", required=True, type=Path)
    parser.add_argument("--queries", type=int, default=0, help="first N judged queries (0: all)")
    args = parser.parse_args()
    if not (args.model_dir / "model.onnx").is_file():
        sys.exit(f"No model.onnx in {args.model_dir}: export a cross-encoder there first.")
    setup_django()
    from retrieval.services.collections import get_or_create_collection
    from retrieval.services.evaluation import load_beir, percentile, score_run
    from retrieval.services.indexing import Source, ingest
    from retrieval.services.rerankers.cross_encoder import CrossEncoderReranker
    from retrieval.services.access import Scope
    from retrieval.services.search import search

    ALL = Scope.ALL  # a benchmark acts for no user

    print(f"Machine: {machine()}\n")
    dataset = load_beir(SHARED_DATA / "scifact", DATASETS["scifact"])
    collection, _ = get_or_create_collection("bench-scifact", chunker="whole")
    ingest(
        collection,
        [
            Source.from_text(e.text or e.title, external_id=e.id, title=e.title)
            for e in dataset.corpus()
            if (e.text or e.title).strip()
        ],
    )
    reranker = CrossEncoderReranker(model_dir=args.model_dir, max_candidates=100)
    queries = list(dataset.judged_queries().items())
    if args.queries:
        queries = queries[: args.queries]
    hybrid_run, reranked_run, added = {}, {}, []
    for query_id, text in queries:
        results = search(text, collection=collection, retriever="hybrid", top_k=100, scope=ALL)
        started = time.perf_counter()
        reranked = reranker.rerank(text, results)
        added.append((time.perf_counter() - started) * 1000)
        hybrid_run[query_id] = [r.chunk.document.external_id for r in results]
        reranked_run[query_id] = [r.chunk.document.external_id for r in reranked]
    judged = {q: dataset.qrels[q] for q, _ in queries}
    rows = [
        ["hybrid (default)", score_run(hybrid_run, judged)["ndcg@10"], "-", "-"],
        [
            f"hybrid top-100 + cross-encoder ({args.model_dir.name})",
            score_run(reranked_run, judged)["ndcg@10"],
            round(percentile(added, 50), 1),
            round(percentile(added, 95), 1),
        ],
    ]
    print(table(["pipeline", "nDCG@10", "added p50 ms", "added p95 ms"], rows))


if __name__ == "__main__":
    main()
