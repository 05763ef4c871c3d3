"""Dense search on every index backend: pgvector, a Milvus server, Milvus Lite and Chroma.

    python bench/indexes.py [--size 100000] [--queries 200]
                            [--backends pgvector milvus-server milvus chroma]
                            [--scoped [--ef-search 100 400 ...] [--prefilter-share 0.05 1]]

A collection of ``size`` synthetic 384-d vectors (2,000 Gaussian clusters on the unit
sphere) is bulk-loaded into PostgreSQL with COPY; each external engine is started on
127.0.0.1 (the Milvus 2.3.5 standalone server of the ``milvus`` package, ``milvus-lite
server``, ``chroma run``) in a temporary folder and filled from PostgreSQL by the index's
own rebuild, with its default OPTIONS (its ingestion rate, until searchable: a Milvus
rebuild waits for the server to build its HNSW index; pgvector's rebuild re-indexes its
HNSW over the stored vectors). Queries are stored vectors plus noise; each backend ranks
them through the app's index (external ones including the PostgreSQL re-check), one at a
time for p50/p95, and in batches of 32 (``rank_many``: one engine request where the index
batches) for the time per query; recall@10 is measured against a numpy exact scan.
Figures are printed; nothing is asserted. Milvus Lite's speed is not Milvus's: it is a
single-process development engine.

``--scoped`` also ranks under the scopes of ``latency.py --scoped`` (0.1%, 1%, 10% and 50%
of the chunks, by metadata tags and by document visibility, drawn at random), each against
the exact answer within the scope: what the index sends to the engine (a metadata filter,
the documents of a narrow scope) and what PostgreSQL confirms. Here HNSW's open recall is
high, where on ``latency.py``'s corpus (near-duplicate vectors) it is 0.70 at 1M.
``--ef-search`` repeats the scoped rows with each value as the search's ``ef_search`` hint
(HNSW's breadth: pgvector widens it further under a scope, Milvus takes the larger of it
and its ``ef``); ``--prefilter-share`` repeats them with each value as an external index's
``prefilter_share`` (the widest scope sent to the engine as its filter; 1: every scope, the
plan before it). Under ``--scoped`` the open search is timed at each plan too, and a
scope's "/ open" is against it (against the first, untuned pass otherwise).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np
from common import copy_chunks, machine, setup_django, table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
DIMENSIONS = 384
BACKENDS = {
    "pgvector": "retrieval.services.indexes.pgvector.PgvectorIndex",
    "milvus-server": "retrieval.services.indexes.milvus.MilvusIndex",
    "milvus": "retrieval.services.indexes.milvus.MilvusIndex",
    "chroma": "retrieval.services.indexes.chroma.ChromaIndex",
}
LABELS = {
    "milvus-server": "milvus (Milvus 2.3.5 server)",
    "milvus": "milvus (Milvus Lite, `milvus-lite server`)",
    "chroma": "chroma (`chroma run`)",
}
BATCH = 32


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=list(BACKENDS))
    parser.add_argument("--scoped", action="store_true", help="Rank under scopes too.")
    parser.add_argument(
        "--ef-search", nargs="+", type=int, default=[None], help="Scoped ef_search."
    )
    parser.add_argument(
        "--prefilter-share", nargs="+", type=float, default=[None], help="External indexes'."
    )
    parser.add_argument(
        "--scope-indexes",
        nargs="+",
        default=[],
        metavar="LABEL",
        help="Give these selectivities' scopes (1%%: the metadata tag and the group) an HNSW "
        "index of their own in pgvector (retrieval_scope_index) before measuring.",
    )
    args = parser.parse_args()
    from latency import declare_scope_indexes

    setup_django()
    print(f"Machine: {machine()}\n")
    collection, ids, vectors = load(args.size, scoped=args.scoped)
    declare_scope_indexes(collection, args.scope_indexes)
    rng = np.random.default_rng(7)
    picks = rng.choice(len(ids), args.queries, replace=False)
    queries = vectors[picks] + rng.normal(0, 0.02, (args.queries, DIMENSIONS)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    exact = [set(ids[np.argsort(-(vectors @ q), kind="stable")[:10]]) for q in queries]
    scopes = {}
    if args.scoped:  # the open search first, at each plan's ef_search
        scopes = {("open", "search"): (None, 1.0, exact)}
        scopes.update(scoped_truths(collection, ids, vectors, queries))
    rows, scoped_rows = [], []
    for name in args.backends:
        plans = [(ef, share) for ef in args.ef_search for share in args.prefilter_share]
        row, scoped = measure(name, collection, queries, exact, scopes, plans)
        rows.append(row)
        scoped_rows += scoped
    print(f"\nDense top-10 over {args.size:,} chunks, {args.queries} queries\n")
    columns = ["backend", "fill (vectors/s)", "p50 ms", "p95 ms", f"batch of {BATCH}: ms/query"]
    print(table([*columns, "recall@10"], rows))
    if scoped_rows:
        print(f"\nUnder scopes, {args.size:,} chunks, {args.queries} queries, top 10\n")
        columns = ["backend", "scope", "ef_search", "prefilter_share", "allowed", "p50 ms"]
        columns += ["p95 ms", "/ open"]
        columns.append("recall@10")
        print(table(columns, scoped_rows))
    print("\nMilvus Lite's speed is not Milvus's (a single-process development engine).")


def scoped_truths(collection, ids: np.ndarray, vectors: np.ndarray, queries: np.ndarray) -> dict:
    """Mark the collection's scopes once (``latency.py``'s) if :func:`load` did not;
    return each scope's filters, share of the chunks and exact top 10 per query:
    ``(kind, label) -> (filters, share, truths)``."""
    from latency import mark_scopes, scope_filters, scope_marks

    from retrieval.models import Chunk

    if not Chunk.objects.filter(collection=collection, metadata__has_key="tags").exists():
        mark_scopes(collection, *scope_marks(len(ids)))
    position = {int(chunk_id): i for i, chunk_id in enumerate(ids)}
    scopes = {}
    for key, filters in scope_filters(collection).items():
        rows = np.array([position[i] for i in filters.chunk_ids(collection.pk)])
        subset = vectors[rows]
        truths = [set(ids[rows[np.argsort(-(subset @ q), kind="stable")[:10]]]) for q in queries]
        scopes[key] = (filters, len(rows) / len(ids), truths)
    return scopes


def load(size: int, scoped: bool = False):
    """Create (or reuse) a collection of ``size`` synthetic vectors, loaded with COPY.

    ``scoped`` writes ``latency.py``'s scope marks with the rows, before the HNSW index
    is built: marking them afterwards re-inserts every updated row into it (5 minutes
    at 100k).
    """
    from django.db import connection, transaction
    from latency import scope_marks
    from pgvector.psycopg import register_vector

    from retrieval.models import Chunk, Collection, Document

    name = f"bench-indexes-{size}"
    rng = np.random.default_rng(size)
    centres = rng.normal(size=(2000, DIMENSIONS)).astype(np.float32)
    vectors = centres[rng.integers(0, 2000, size)] + rng.normal(0, 0.35, (size, DIMENSIONS)).astype(
        np.float32
    )
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    collection = Collection.objects.filter(name=name).first()
    if collection is not None and Chunk.objects.filter(collection=collection).count() == size:
        rows = Chunk.objects.filter(collection=collection).order_by("pk")
        ids = np.array(list(rows.values_list("pk", flat=True)))
        return collection, ids, vectors
    if collection is not None:
        collection.delete()
    print(f"Loading {size:,} vectors…", flush=True)
    tags, access = scope_marks(size) if scoped else ([[]] * size, [None] * size)
    with transaction.atomic():
        collection = Collection.objects.create(
            name=name, slug=name, embedder="default", dimensions=DIMENSIONS, chunker="whole"
        )
        documents = Document.objects.bulk_create(
            [
                Document(
                    collection=collection,
                    external_id=f"d{i}",
                    metadata={"tags": tags[i]} if scoped else {},
                    access=access[i],
                )
                for i in range(size)
            ],
            batch_size=5000,
        )
        register_vector(connection.connection)
        with connection.cursor() as cursor:
            ids = np.array(
                copy_chunks(
                    cursor,
                    collection.pk,
                    [(d.pk, "x", vectors[i]) for i, d in enumerate(documents)],
                    [{"tags": t} for t in tags] if scoped else None,
                )
            )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE retrieval_chunk")
    return collection, ids, vectors


def has_hnsw(collection) -> bool:
    """Whether the collection's pgvector HNSW index exists."""
    from django.db import connection

    from retrieval.services.indexes.pgvector import vector_index_name

    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s)", [vector_index_name(collection.pk)])
        return cursor.fetchone()[0] is not None


def measure(
    name: str,
    collection,
    queries: np.ndarray,
    exact: list[set],
    scopes: dict,
    plans: list[tuple[int | None, float | None]],
) -> tuple[list, list[list]]:
    """Fill backend ``name`` and time it: its open row, and a row per scope of ``scopes``
    and plan: an ``ef_search`` hint and an external index's ``prefilter_share`` (``None``:
    the index's own)."""
    from django.db import connection

    from retrieval.exceptions import InvalidFilterError
    from retrieval.models import Collection
    from retrieval.services.registry import ComponentHandler
    from tests.support.engines import Engine

    engine = None
    options: dict = {}
    if name != "pgvector":
        engine = Engine(name, Path(tempfile.mkdtemp(prefix=f"bench-{name}-")) / "data")
        engine.start()
        options = engine.options
    try:
        index = ComponentHandler("INDEXES")
        index.configs = lambda: {name: {"BACKEND": BACKENDS[name], "OPTIONS": options}}
        index = index[name]
        # The index's own rebuild from PostgreSQL's vectors: an external engine copies them
        # into a new space; pgvector builds its HNSW index, once for a collection (an
        # earlier run's is kept: a million vectors take a quarter of an hour).
        started = time.perf_counter()
        if name == "pgvector" and has_hnsw(collection):
            fill = "(built before)"
        else:
            with connection.cursor() as cursor:
                cursor.execute("SET maintenance_work_mem = '4GB'")
            index.rebuild(collection)
            with connection.cursor() as cursor:
                cursor.execute("RESET maintenance_work_mem")
            fill = None
        count = index.count(collection)
        if engine is not None and len(index.ids(collection)) != count:  # the drift check's list
            print(f"{name}: the index lists {len(index.ids(collection))} ids of {count}!")
        fill = fill or f"{count / (time.perf_counter() - started):,.0f}"
        for q in queries:  # warm-up: a cold million-vector HNSW graph is read from disk
            index.rank(q, collection=collection, top_k=10)

        def ranked(truths: list[set], filters=None, **hints) -> tuple[float, float, float]:
            """p50 and p95 ms of ranking every query under ``filters``, and recall@10."""
            samples, recall = [], []
            for q, truth in zip(queries, truths, strict=True):
                started = time.perf_counter()
                found = index.rank(q, collection=collection, top_k=10, filters=filters, **hints)
                samples.append((time.perf_counter() - started) * 1000)
                recall.append(len(truth & {s.chunk_id for s in found}) / max(len(truth), 1))
            p50, p95 = np.percentile(samples, [50, 95])
            return p50, p95, float(np.mean(recall))

        p50, p95, recall = ranked(exact)
        scoped, open_p50 = [], {}  # the open search's p50 at each plan, when measured
        own_share = getattr(index, "prefilter_share", None)
        for (kind, label), (filters, share, truths), (ef, prefilter) in (
            (key, scope, plan) for key, scope in scopes.items() for plan in plans
        ):
            if own_share is not None:
                index.prefilter_share = own_share if prefilter is None else prefilter
            sent = (
                "—" if own_share is None else f"{prefilter if prefilter is not None else 'default'}"
            )
            row = [LABELS.get(name, name), f"{kind} {label}", ef or "default", sent, f"{share:.2%}"]
            try:
                s50, s95, s_recall = ranked(truths, filters, **({"ef_search": ef} if ef else {}))
            except InvalidFilterError as e:  # Chroma compares no lists
                print(f"{name} {kind} {label}: {e}", flush=True)
                scoped.append([*row, *"————"])
                continue
            print(
                f"{name} {kind} {label} ef_search {ef or 'default'} prefilter_share {sent}: "
                f"p50 {s50:.2f} ms, recall@10 {s_recall:.3f}",
                flush=True,
            )
            if filters is None:
                open_p50[ef, prefilter] = s50
            ratio = s50 / open_p50.get((ef, prefilter), p50)
            scoped.append([*row, f"{s50:.2f}", f"{s95:.2f}", f"{ratio:.2f}×", f"{s_recall:.3f}"])
        started = time.perf_counter()
        batched = []
        for start in range(0, len(queries), BATCH):
            batched += index.rank_many(
                list(queries[start : start + BATCH]), collection=collection, top_k=10
            )
        per_query = (time.perf_counter() - started) * 1000 / len(queries)
        same = np.mean(
            [len(t & {s.chunk_id for s in b}) / 10 for t, b in zip(exact, batched, strict=True)]
        )
        print(
            f"{name}: p50 {p50:.2f} ms, batched {per_query:.2f} ms/query, recall@10 "
            f"{recall:.3f} (batched {same:.3f})",
            flush=True,
        )
        label = LABELS.get(name, name)
        row = [label, fill, f"{p50:.2f}", f"{p95:.2f}", f"{per_query:.2f}", f"{recall:.3f}"]
        return row, scoped
    finally:
        if engine is not None:
            Collection.objects.filter(pk=collection.pk).update(index_space="")
            collection.index_space = ""
            engine.stop()


if __name__ == "__main__":
    main()
