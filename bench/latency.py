"""Query latency versus corpus size, and ingestion rate versus the embedder's raw rate.

    python bench/latency.py [--sizes 10000 100000] [--queries 200] [--ingest 600]

Synthetic corpora (Zipf-distributed words, random unit vectors of 384 dimensions)
are bulk-loaded into a collection per size; then, for the same queries, it times
each retriever of the app beside in-process references: bm25s with the same
analysis, raw pgvector SQL with the same plan, and a numpy exact scan. The
ingestion part runs real SciFact abstracts through ``ingest()`` with the local
embedder, beside the embedder alone on the same texts. Figures are printed, with
ratios; nothing is asserted.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
from common import corpus_entries, machine, setup_django, table

DIMENSIONS = 384


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", nargs="+", type=int, default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument(
        "--ingest", type=int, default=600, help="SciFact abstracts to ingest (0 skips)"
    )
    args = parser.parse_args()
    setup_django()
    print(f"Machine: {machine()}\n")
    for size in args.sizes:
        query_latency(size, args.queries)
    if args.ingest:
        ingestion_rate(args.ingest)


def percentiles(samples: list[float]) -> tuple[float, float]:
    return float(np.percentile(samples, 50)), float(np.percentile(samples, 95))


def timed(function: Callable[[], object]) -> float:
    started = time.perf_counter()
    function()
    return (time.perf_counter() - started) * 1000


def synthetic_corpus(size: int, rng: np.random.Generator) -> tuple[list[str], list[str]]:
    vocabulary = [f"w{i:05d}" for i in range(30_000)]
    weights = 1.0 / np.arange(1, len(vocabulary) + 1)
    weights /= weights.sum()
    lengths = rng.integers(30, 120, size)
    words = rng.choice(len(vocabulary), size=int(lengths.sum()), p=weights)
    texts, offset = [], 0
    for length in lengths:
        texts.append(" ".join(vocabulary[w] for w in words[offset : offset + length]))
        offset += length
    queries = [
        " ".join(vocabulary[w] for w in rng.choice(len(vocabulary), size=4, p=weights))
        for _ in range(1000)
    ]
    return texts, queries


def load(size: int):
    """Create (or reuse) a collection of ``size`` synthetic chunks, loaded with COPY."""
    from django.db import connection, transaction
    from pgvector.psycopg import register_vector

    from retrieval.models import Chunk, Collection, Document
    from retrieval.services.collections import ensure_vector_index
    from retrieval.services.registry import analyzers
    from retrieval.services.sparse.index import write_postings

    rng = np.random.default_rng(size)
    texts, queries = synthetic_corpus(size, rng)
    name = f"bench-synthetic-{size}"
    collection = Collection.objects.filter(name=name).first()
    if collection is not None and Chunk.objects.filter(collection=collection).count() == size:
        return collection, texts, queries  # loaded by an earlier run
    if collection is not None:
        collection.delete()
    started = time.perf_counter()
    vectors = rng.normal(size=(size, DIMENSIONS)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    analyzer = analyzers["default"]
    with transaction.atomic():
        collection = Collection.objects.create(
            name=name, slug=name, embedder="default", dimensions=DIMENSIONS, chunker="whole"
        )
        documents = Document.objects.bulk_create(
            [
                Document(
                    collection=collection,
                    external_id=f"doc-{i}",
                    content=texts[i],
                    status="indexed",
                )
                for i in range(size)
            ],
            batch_size=5000,
        )
        register_vector(connection.connection)
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT nextval(pg_get_serial_sequence('retrieval_chunk', 'id')) "
                "FROM generate_series(1, %s)",
                [size],
            )
            chunk_ids = [row[0] for row in cursor.fetchall()]
            with cursor.copy(
                "COPY retrieval_chunk (id, collection_id, document_id, index, content, start, "
                '"end", heading_path, token_count, metadata, embedding) FROM STDIN'
            ) as copy:
                for i in range(size):
                    copy.write_row(
                        (
                            chunk_ids[i],
                            collection.pk,
                            documents[i].pk,
                            0,
                            texts[i],
                            0,
                            len(texts[i]),
                            "[]",
                            0,
                            "{}",
                            vectors[i],
                        )
                    )
        write_postings(
            collection.pk, ((chunk_ids[i], *analyzer.term_counts(texts[i])) for i in range(size))
        )
    loaded = time.perf_counter() - started
    started = time.perf_counter()
    ensure_vector_index(collection)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE retrieval_chunk")
        cursor.execute("ANALYZE retrieval_bm25_posting")
        cursor.execute("ANALYZE retrieval_bm25_term")
    print(
        f"Loaded {size} chunks in {loaded:.0f} s; "
        f"HNSW index built in {time.perf_counter() - started:.0f} s"
    )
    return collection, texts, queries


def query_latency(size: int, n_queries: int) -> None:
    import bm25s
    import Stemmer
    from django.db import connection, transaction

    from retrieval.models import Chunk
    from retrieval.services.registry import analyzers, embedders, retrievers

    collection, texts, queries = load(size)
    queries = queries[:n_queries]
    chunk_ids = list(
        Chunk.objects.filter(collection=collection).order_by("pk").values_list("pk", flat=True)
    )
    vectors = np.stack(
        list(
            Chunk.objects.filter(collection=collection)
            .order_by("pk")
            .values_list("embedding", flat=True)
        )
    )
    vectors = vectors.astype(np.float32)
    analyzer = analyzers["default"]
    stopwords, stemmer = sorted(analyzer.stopwords), Stemmer.Stemmer("english")
    model = bm25s.BM25(k1=0.9, b=0.4, method="lucene")
    model.index(
        bm25s.tokenize(texts, stopwords=stopwords, stemmer=stemmer, show_progress=False),
        show_progress=False,
    )
    embedder = embedders["default"]
    query_vectors = [embedder.embed_query(q) for q in queries]  # warms the model too
    bm25, dense, hybrid = retrievers["bm25"], retrievers["dense"], retrievers["hybrid"]

    samples: dict[str, list[float]] = {
        k: [] for k in ("bm25", "bm25s", "dense", "raw", "exact", "embed", "dense+embed", "hybrid")
    }
    raw_sql = (
        "SELECT id, (embedding::vector(384)) <=> %s::vector AS distance FROM retrieval_chunk "
        "WHERE collection_id = %s ORDER BY (embedding::vector(384)) <=> %s::vector LIMIT 10"
    )

    def raw(vector: np.ndarray) -> list:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT set_config('hnsw.ef_search', '40', true)")
            literal = "[" + ",".join(map(str, vector.tolist())) + "]"
            cursor.execute(raw_sql, [literal, collection.pk, literal])
            return cursor.fetchall()

    def measure(query: str, vector: np.ndarray) -> tuple[bool, float]:
        """Time every variant on one query; return (same BM25 top 10, dense recall@10)."""
        ours, theirs, found, exact = [], [], [], []

        def reference() -> None:
            tokens = bm25s.tokenize(
                [query], stopwords=stopwords, stemmer=stemmer, show_progress=False, return_ids=False
            )[0]
            scores = model.get_scores(tokens)
            theirs.extend(i for i in np.argsort(-scores, kind="stable")[:10] if scores[i] > 0)

        samples["bm25"].append(
            timed(lambda: ours.extend(bm25.retrieve(query, collection=collection, top_k=10)))
        )
        samples["bm25s"].append(timed(reference))
        samples["dense"].append(
            timed(
                lambda: found.extend(dense.search_vector(vector, collection=collection, top_k=10))
            )
        )
        samples["raw"].append(timed(lambda: raw(vector)))
        samples["exact"].append(timed(lambda: exact.extend(np.argsort(-(vectors @ vector))[:10])))
        samples["embed"].append(timed(lambda: embedder.embed_query(query)))
        samples["dense+embed"].append(
            timed(lambda: dense.retrieve(query, collection=collection, top_k=10))
        )
        samples["hybrid"].append(
            timed(lambda: hybrid.retrieve(query, collection=collection, top_k=10))
        )
        same = [r.chunk.pk for r in ours] == [chunk_ids[i] for i in theirs]
        return same, len({r.chunk.pk for r in found} & {chunk_ids[i] for i in exact}) / 10

    outcomes = [measure(q, v) for q, v in zip(queries, query_vectors, strict=True)]
    same_top10 = sum(same for same, _ in outcomes)
    recall = [r for _, r in outcomes]

    p = {k: percentiles(v) for k, v in samples.items()}
    rows = [
        ["bm25 (app, in PostgreSQL)", *p["bm25"], f"{p['bm25'][0] / p['bm25s'][0]:.2f}× bm25s"],
        ["bm25s (in process)", *p["bm25s"], ""],
        ["dense (app, vector given)", *p["dense"], f"{p['dense'][0] / p['raw'][0]:.2f}× raw SQL"],
        ["raw pgvector SQL, same plan", *p["raw"], ""],
        ["numpy exact scan (in process)", *p["exact"], ""],
        ["query embedding (local model)", *p["embed"], ""],
        ["dense (app, embedding the query)", *p["dense+embed"], ""],
        [
            "hybrid rrf (app, legs concurrent)",
            *p["hybrid"],
            f"{p['hybrid'][0] / max(p['bm25'][0], p['dense+embed'][0]):.2f}× slowest leg",
        ],
    ]
    print(f"### {size:,} chunks, {len(queries)} queries, top-10")
    print(
        table(
            ["what", "p50 ms", "p95 ms", "ratio (p50)"],
            [[r[0], round(r[1], 2), round(r[2], 2), r[3]] for r in rows],
        )
    )
    print(
        f"\nBM25 top-10 identical to bm25s: {same_top10}/{len(queries)}; "
        f"dense recall@10 vs exact: {np.mean(recall):.3f}\n"
    )


def ingestion_rate(count: int) -> None:
    from retrieval.models import Collection
    from retrieval.services.collections import get_or_create_collection
    from retrieval.services.indexing import Source, ingest
    from retrieval.services.registry import embedders

    entries = corpus_entries("scifact")[:count]
    texts = [e["text"] for e in entries]
    embedder = embedders["default"]
    embedder.embed_batch(texts[:8])  # load the model first
    started = time.perf_counter()
    for i in range(0, len(texts), 32):
        embedder.embed_batch(texts[i : i + 32])
    raw = len(texts) / (time.perf_counter() - started)
    Collection.objects.filter(name="bench-ingest").delete()
    collection, _ = get_or_create_collection("bench-ingest", chunker="whole")
    started = time.perf_counter()
    run = ingest(
        collection,
        [Source.from_text(e["text"], external_id=e["_id"], title=e["title"]) for e in entries],
    )
    rate = run.chunks_written / (time.perf_counter() - started)
    print(f"### Ingestion of {count} SciFact abstracts (one chunk each, local embedder, batch 32)")
    print(
        table(
            ["what", "chunks/s"],
            [
                ["embedder alone", round(raw, 1)],
                ["ingest() end to end", round(rate, 1)],
                ["ratio", f"{rate / raw:.2f}"],
            ],
        )
    )


if __name__ == "__main__":
    main()
