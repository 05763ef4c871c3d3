"""The BM25 design, chosen by measurement: the app's postings against three alternatives.

    python bench/sparse_designs.py [--queries 200]

Each candidate is built beside the app's tables (schema ``bench_sparse``) from a
collection the app already indexed, then queried for the top 10:

- ``postings`` — the app's design: exact BM25 summed over the query terms' posting
  lists (``retrieval_bm25_posting``, an index-only scan per term);
- ``ts_rank`` / ``ts_rank_cd`` — PostgreSQL's full-text ranking over a GIN-indexed
  ``tsvector`` (``english`` configuration), query terms OR-ed;
- ``sparsevec`` — pgvector sparse vectors holding each chunk's BM25 term weights,
  ranked by inner product with the query's term counts (an exact scan);
- ``GIN + re-score`` — GIN candidates re-scored with exact BM25 from the term
  frequencies stored in the ``tsvector`` and a document-frequency table.

Quality (nDCG@10, Recall@100) on SciFact train uses the collection
``bench/quality.py`` ingests; latency (p50/p95 over ``--queries`` queries after a
warm-up pass, interleaved) uses the 100k-chunk synthetic collection of
``bench/latency.py``. Both scripts must have run first. Printed, never asserted.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
from common import DATASETS, SHARED_DATA, machine, setup_django, table

K1, B = 1.2, 0.75
LATENCY_COLLECTION = "bench-synthetic-100000"
QUALITY_COLLECTION = "bench-scifact"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    setup_django()
    from retrieval.models import Collection

    collections = {
        name: Collection.objects.filter(name=name).first()
        for name in (QUALITY_COLLECTION, LATENCY_COLLECTION)
    }
    missing = [name for name, collection in collections.items() if collection is None]
    if missing:
        raise SystemExit(
            f"Missing {', '.join(missing)}: run bench/quality.py and bench/latency.py first."
        )
    print(f"Machine: {machine()}\n")
    designs = {name: build(collection) for name, collection in collections.items()}
    quality = measure_quality(designs[QUALITY_COLLECTION], collections[QUALITY_COLLECTION])
    latency = measure_latency(
        designs[LATENCY_COLLECTION], collections[LATENCY_COLLECTION], args.queries
    )
    rows = []
    for name in designs[QUALITY_COLLECTION]:
        ndcg, recall, identical = quality[name]
        p50, p95 = latency[name]
        rows.append(
            [
                name,
                round(ndcg, 4),
                round(recall, 4),
                identical,
                f"{p50:.2f}",
                f"{p95:.2f}",
                f"{p50 / latency['postings'][0]:.1f}×",
            ]
        )
    print(
        table(
            [
                "design",
                "SciFact nDCG@10",
                "Recall@100",
                "top-10 = postings",
                "100k p50 ms",
                "100k p95 ms",
                "p50 vs postings",
            ],
            rows,
        )
    )


def build(collection) -> dict[str, Callable[[str, int], list[tuple[int, float]]]]:
    """Build the alternative designs' tables for ``collection``; return a ranker per design."""
    from django.db import connection

    cid = int(collection.pk)
    doc, vocab, df, stats = (f"bench_sparse.{t}_{cid}" for t in ("doc", "vocab", "df", "stats"))
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("CREATE SCHEMA IF NOT EXISTS bench_sparse")
        cursor.execute("SELECT to_regclass(%s)", [stats])
        if cursor.fetchone()[0] is None:
            build_tables(cursor, cid, doc, vocab, df, stats)
            seconds = time.perf_counter() - started
            print(f"Built the alternatives for {collection.name} in {seconds:.0f} s")
        cursor.execute("SELECT count(*) FROM " + vocab)
        dimensions = cursor.fetchone()[0]

    ts_query = f"""
        WITH q AS MATERIALIZED (
            SELECT string_agg(quote_literal(lexeme), ' | ')::tsquery AS query
            FROM unnest(to_tsvector('english', %s))
        )
        SELECT d.chunk_id, {{rank}}(d.tsv, q.query) AS score FROM {doc} d, q
        WHERE d.tsv @@ q.query ORDER BY score DESC, d.chunk_id LIMIT %s
    """
    sparsevec_query = f"""
        WITH q AS MATERIALIZED (
            SELECT ('{{' || string_agg(dim || ':' || qtf, ',' ORDER BY dim) || '}}/{dimensions}')
                   ::sparsevec AS vector
            FROM (SELECT v.dim, count(*) AS qtf FROM unnest(%s::text[]) AS t
                  JOIN {vocab} v ON v.term = t GROUP BY v.dim) AS terms
        )
        SELECT d.chunk_id, -(d.weights <#> q.vector) AS score FROM {doc} d, q
        WHERE q.vector IS NOT NULL ORDER BY d.weights <#> q.vector, d.chunk_id LIMIT %s
    """
    rescore_query = f"""
        WITH qt AS MATERIALIZED (
            SELECT u.lexeme, array_length(u.positions, 1) AS qtf,
                   ln(1 + (s.n - f.ndoc + 0.5) / (f.ndoc + 0.5)) AS idf
            FROM unnest(to_tsvector('english', %s)) AS u
            JOIN {df} f ON f.lexeme = u.lexeme, {stats} s
        ), q AS MATERIALIZED (
            SELECT string_agg(quote_literal(lexeme), ' | ')::tsquery AS query FROM qt
        )
        SELECT d.chunk_id,
               sum(qt.qtf * qt.idf * array_length(u.positions, 1)
                   / (array_length(u.positions, 1)
                      + {K1} * (1 - {B}) + {K1} * {B} * d.dl / s.avgdl)) AS score
        FROM q, {stats} s, {doc} d CROSS JOIN LATERAL unnest(d.tsv) AS u
        JOIN qt ON qt.lexeme = u.lexeme
        WHERE d.tsv @@ q.query
        GROUP BY d.chunk_id ORDER BY score DESC, d.chunk_id LIMIT %s
    """

    def run(sql: str, argument: object, top_k: int) -> list[tuple[int, float]]:
        with connection.cursor() as cursor:
            cursor.execute(sql, [argument, top_k])
            return [(chunk_id, float(score)) for chunk_id, score in cursor.fetchall()]

    from retrieval.services.registry import analyzers, retrievers

    analyzer, bm25 = analyzers["default"], retrievers["bm25"]
    return {
        "postings": lambda q, k: bm25.score(analyzer.terms(q), collection=collection, top_k=k),
        "ts_rank": lambda q, k: run(ts_query.format(rank="ts_rank"), q, k),
        "ts_rank_cd": lambda q, k: run(ts_query.format(rank="ts_rank_cd"), q, k),
        "sparsevec": lambda q, k: run(sparsevec_query, analyzer.terms(q), k),
        "GIN + re-score": lambda q, k: run(rescore_query, q, k),
    }


def build_tables(cursor, cid: int, doc: str, vocab: str, df: str, stats: str) -> None:
    """One row per chunk: its tsvector (GIN-indexed), length and BM25 weights as a sparsevec."""
    cursor.execute(
        f"CREATE TABLE {vocab} AS SELECT term, row_number() OVER (ORDER BY term)::int AS dim "
        "FROM retrieval_bm25_term WHERE collection_id = %s",
        [cid],
    )
    cursor.execute(f"ALTER TABLE {vocab} ADD PRIMARY KEY (term)")
    cursor.execute(f"SELECT count(*) FROM {vocab}")
    dimensions = cursor.fetchone()[0]
    cursor.execute(
        f"""
        CREATE TABLE {doc} AS
        SELECT c.id AS chunk_id, v.tsv,
               (SELECT coalesce(sum(array_length(u.positions, 1)), 0) FROM unnest(v.tsv) AS u)
                   AS dl,
               w.weights
        FROM retrieval_chunk c
        JOIN retrieval_document d ON d.id = c.document_id
        CROSS JOIN LATERAL (
            SELECT to_tsvector('english', coalesce(d.title, '') || ' ' || c.content) AS tsv
        ) AS v
        LEFT JOIN (
            SELECT p.chunk_id,
                   ('{{' || string_agg(
                        v.dim || ':' || (ln(1 + (s.chunk_count - t.df + 0.5) / (t.df + 0.5))
                            * p.tf / (p.tf + {K1} * (1 - {B} + {B} * p.dl
                                / (s.total_length::float8 / s.chunk_count))))::real,
                        ',' ORDER BY v.dim)
                    || '}}/{dimensions}')::sparsevec AS weights
            FROM retrieval_bm25_posting p
            JOIN retrieval_bm25_term t ON t.collection_id = p.collection_id AND t.term = p.term
            JOIN {vocab} v ON v.term = p.term
            JOIN retrieval_bm25_stats s ON s.collection_id = p.collection_id
            WHERE p.collection_id = %s
            GROUP BY p.chunk_id
        ) AS w ON w.chunk_id = c.id
        WHERE c.collection_id = %s
        """,
        [cid, cid],
    )
    cursor.execute(f"ALTER TABLE {doc} ADD PRIMARY KEY (chunk_id)")
    cursor.execute(f"CREATE INDEX ON {doc} USING gin (tsv)")
    cursor.execute(
        f"CREATE TABLE {df} AS SELECT word AS lexeme, ndoc FROM ts_stat('SELECT tsv FROM {doc}')"
    )
    cursor.execute(f"ALTER TABLE {df} ADD PRIMARY KEY (lexeme)")
    cursor.execute(
        f"CREATE TABLE {stats} AS SELECT count(*)::float8 AS n, "
        f"greatest(avg(dl), 1)::float8 AS avgdl FROM {doc}"
    )
    for table_name in (vocab, doc, df, stats):
        cursor.execute(f"ANALYZE {table_name}")


def measure_quality(designs, collection) -> dict[str, tuple[float, float, int]]:
    """nDCG@10, Recall@100 and how many top-10s equal the app's, per design, on SciFact."""
    from retrieval.models import Chunk
    from retrieval.services.quality.evaluation import document_ranking, load_beir, score_run

    dataset = load_beir(SHARED_DATA / "scifact", DATASETS["scifact"])
    external_id = dict(
        Chunk.objects.filter(collection=collection).values_list("pk", "document__external_id")
    )
    queries = dataset.judged_queries()
    results = {}
    reference = {qid: designs["postings"](text, 10) for qid, text in queries.items()}
    for name, rank in designs.items():
        run, identical = {}, 0
        for qid, text in queries.items():
            ranked = rank(text, 100)
            identical += [c for c, _ in ranked[:10]] == [c for c, _ in reference[qid]]
            run[qid] = document_ranking([external_id[c] for c, score in ranked if score > 0])
        metrics = score_run(run, dataset.qrels)
        results[name] = (metrics["ndcg@10"], metrics["recall@100"], identical)
    print(f"SciFact train: {len(queries)} judged queries\n")
    return results


def measure_latency(designs, collection, n_queries: int) -> dict[str, tuple[float, float]]:
    """p50/p95 ms of each design's top 10 on the synthetic collection, designs interleaved."""
    from latency import synthetic_corpus

    size = int(LATENCY_COLLECTION.rsplit("-", 1)[1])
    _, queries = synthetic_corpus(size, np.random.default_rng(size))  # latency.py's queries
    samples: dict[str, list[float]] = {name: [] for name in designs}
    for query in queries[:n_queries] * 2:  # the first pass warms the caches
        for name, rank in designs.items():
            started = time.perf_counter()
            rank(query, 10)
            samples[name].append((time.perf_counter() - started) * 1000)
    return {
        name: (float(np.percentile(timed, 50)), float(np.percentile(timed, 95)))
        for name, timed in ((name, values[n_queries:]) for name, values in samples.items())
    }


if __name__ == "__main__":
    main()
