"""Query latency versus corpus size, and ingestion rate versus the embedder's raw rate.

    python bench/latency.py [--sizes 10000 100000] [--queries 200] [--ingest 600]
    python bench/latency.py --sizes 100000 --long-queries 8 16 32 100
    python bench/latency.py --sizes 100000 --scoped   # searches under scopes of 0.1%-50%
    python bench/latency.py --sizes 100000 --scoped --public-beside 10000   # beside another

Synthetic corpora are bulk-loaded into a collection per size: Zipf-distributed
words for BM25, and for dense search real SciFact abstract embeddings (local
model) spread into near neighbours with Gaussian noise; queries are words of
middling frequency (as real queries are, once stop words are gone) and real
SciFact query embeddings. For the same queries it times each retriever of the
app beside in-process references: bm25s with the same analysis (ranking only,
like the app's ``rank()``), raw pgvector SQL with the same plan, and a numpy
exact scan; then whole searches (ranking and loading the chunks), with the query
embedded on all cores (the default) and on one (``query_threads=1``), taking turns;
then searches per second with two clients searching at once, both ways. The
ingestion part runs real SciFact abstracts through ``ingest()`` with the local
embedder, beside the embedder alone on the same texts. Figures are printed, with
ratios; nothing is asserted.
"""

from __future__ import annotations

import argparse
import gc
import os

# Single-threaded BLAS for the numpy reference: idle BLAS threads spin and would slow
# whatever is timed next.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# numpy 2's AVX-512 argpartition is slow on arrays of many equal values, as bm25s's scores
# are (mostly 0): at 100k chunks its top-10 selection took 14.4 ms a query on this machine,
# 2.9 on numpy's AVX2 kernels (README: Latency). The references run on those, their fastest.
os.environ.setdefault("NPY_DISABLE_CPU_FEATURES", "X86_V4 AVX512_ICL AVX512_SPR")
import time
from collections.abc import Callable

import numpy as np
from common import copy_chunks, corpus_entries, machine, setup_django, table

DIMENSIONS = 384


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", nargs="+", type=int, default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument(
        "--ingest", type=int, default=600, help="SciFact abstracts to ingest (0 skips)"
    )
    parser.add_argument(
        "--load-only",
        action="store_true",
        help="only load the synthetic collections (the slow part at 1M), for a later timed run",
    )
    parser.add_argument(
        "--ef-search",
        nargs="+",
        type=int,
        help="instead of the latency table: dense recall@10 and p50 for each ef_search value",
    )
    parser.add_argument(
        "--long-queries",
        nargs="+",
        type=int,
        help="instead of the latency table: BM25 p50 for queries of these many distinct terms, "
        "the app's default beside the top-k function and the exhaustive plan",
    )
    parser.add_argument(
        "--scoped",
        action="store_true",
        help="instead of the latency table: BM25, dense and hybrid searches under scopes "
        "allowing 0.1%%-50%% of the chunks (by metadata and by document visibility), "
        "beside the open ones",
    )
    parser.add_argument(
        "--scope-indexes",
        nargs="+",
        default=[],
        metavar="LABEL",
        help="with --scoped: declare these selectivities' scopes (retrieval_scope_index: "
        "their own HNSW graphs) before measuring; the others are dropped",
    )
    parser.add_argument(
        "--dense-ef-search",
        type=int,
        help="with --scoped: the dense retriever's ef_search (its OPTIONS), default 100",
    )
    parser.add_argument(
        "--graph",
        nargs=2,
        type=int,
        metavar=("M", "EF_CONSTRUCTION"),
        help="with --scoped: the pgvector index's HNSW build OPTIONS; graphs built "
        "otherwise are rebuilt first (timed)",
    )
    parser.add_argument(
        "--public-beside",
        type=int,
        default=0,
        metavar="N",
        help="with --scoped: first load a collection of N public chunks beside (a site's "
        "other collections: every reader holds 'public')",
    )
    parser.add_argument(
        "--bm25-only",
        action="store_true",
        help="BM25 rows only, on a collection without vectors (loads in a fraction of the time)",
    )
    args = parser.parse_args()
    setup_django()
    configure_dense(args.dense_ef_search, args.graph)
    print(
        f"Machine: {machine()}; numpy {np.__version__}, "
        f"NPY_DISABLE_CPU_FEATURES={os.environ['NPY_DISABLE_CPU_FEATURES']!r}\n"
    )
    for size in args.sizes:
        if args.load_only:
            load(size, dense=not args.bm25_only)
        elif args.bm25_only:
            bm25_latency(size, args.queries)
        elif args.ef_search:
            ef_search_sweep(size, args.ef_search, args.queries)
        elif args.long_queries:
            long_query_latency(size, args.long_queries)
        elif args.scoped:
            if args.public_beside:
                load_public(args.public_beside)
            scoped_latency(size, args.queries, args.scope_indexes)
        else:
            query_latency(size, args.queries)
    if args.load_only or args.ef_search or args.bm25_only or args.long_queries or args.scoped:
        return
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
    # Query words skip the 100 most frequent ones, like stop words in real text.
    middling = np.arange(100, len(vocabulary))
    query_weights = weights[100:] / weights[100:].sum()
    queries = [
        " ".join(vocabulary[w] for w in rng.choice(middling, size=4, p=query_weights))
        for _ in range(1000)
    ]
    return texts, queries


def real_embeddings(count: int) -> np.ndarray:
    """Embeddings of SciFact abstracts: from the quality benchmark's collection, else computed."""
    from project.database import data_dir
    from retrieval.models import Chunk
    from retrieval.services.registry import embedders

    cache = data_dir() / f"bench-scifact-embeddings-{count}.npy"
    if cache.exists():
        return np.load(cache)
    stored = Chunk.objects.filter(collection__name="bench-scifact").values_list(
        "embedding", flat=True
    )
    vectors = [np.asarray(v, dtype=np.float32) for v in stored[:count]]
    if len(vectors) < count:
        texts = [e["text"] for e in corpus_entries("scifact")[:count]]
        vectors = list(embedders["default"].embed_batch(texts))
    np.save(cache, np.stack(vectors))
    return np.stack(vectors)


def spread(
    base: np.ndarray, size: int, rng: np.random.Generator, noise: float = 0.03
) -> np.ndarray:
    """``size`` unit vectors, each a base vector plus Gaussian noise (cosine ~0.85 to it)."""
    vectors = base[np.arange(size) % len(base)] + rng.normal(
        scale=noise, size=(size, base.shape[1])
    )
    vectors = vectors.astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def load(size: int, *, dense: bool = True):
    """Create (or reuse) a collection of ``size`` synthetic chunks, loaded with COPY.

    ``dense=False`` leaves the vectors out (and the HNSW index): a BM25-only collection.
    """
    from django.db import connection, transaction
    from pgvector.psycopg import register_vector

    from retrieval.models import Chunk, Collection, Document
    from retrieval.services.ingestion.collections import ensure_vector_index
    from retrieval.services.registry import analyzers
    from retrieval.services.sparse.index import write_postings

    rng = np.random.default_rng(size)
    texts, queries = synthetic_corpus(size, rng)
    tags, access = scope_marks(size)
    name = f"bench-synthetic-{size}" + ("" if dense else "-bm25")
    collection = Collection.objects.filter(name=name).first()
    if collection is not None and Chunk.objects.filter(collection=collection).count() == size:
        if not Document.objects.filter(collection=collection, access__isnull=False).exists():
            mark_scopes(collection, tags, access)  # loaded before the scoped rows existed
        return collection, texts, queries  # loaded by an earlier run
    if collection is not None:
        collection.delete()
    print(f"Loading {size:,} synthetic chunks…", flush=True)
    started = time.perf_counter()
    vectors = spread(real_embeddings(5000), size, rng) if dense else [None] * size
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
                    metadata={"tags": tags[i]},
                    access=access[i],
                )
                for i in range(size)
            ],
            batch_size=5000,
        )
        register_vector(connection.connection)
        with connection.cursor() as cursor:
            chunk_ids = copy_chunks(
                cursor,
                collection.pk,
                [(documents[i].pk, texts[i], vectors[i]) for i in range(size)],
                metadata=[{"tags": tags[i]} for i in range(size)],
            )
        write_postings(
            collection.pk, ((chunk_ids[i], *analyzer.term_counts(texts[i])) for i in range(size))
        )
    loaded = time.perf_counter() - started
    started = time.perf_counter()
    with connection.cursor() as cursor:
        # What an operator sets before building a large index: the graph in memory (a
        # million 384-d vectors need ~2 GB; the 64 MB default spills and takes hours).
        cursor.execute("SET maintenance_work_mem = '6GB'")
    if dense:
        ensure_vector_index(collection)
    with connection.cursor() as cursor:
        cursor.execute("RESET maintenance_work_mem")
    with connection.cursor() as cursor:
        # What autovacuum does some time after a bulk load: statistics, and the
        # visibility map that lets the posting scans skip the heap.
        for table in ("chunk", "document", "bm25_posting", "bm25_term", "bm25_chunk"):
            cursor.execute(f"VACUUM ANALYZE retrieval_{table}")
    print(
        f"Loaded {size} chunks in {loaded:.0f} s; "
        f"HNSW index built in {time.perf_counter() - started:.0f} s"
    )
    return collection, texts, queries


def load_public(size: int) -> None:
    """Create (or reuse) a collection of ``size`` public chunks without vectors, as a
    site's other collections stand beside a restricted one in the chunk table."""
    from django.db import connection, transaction

    from retrieval.models import Chunk, Collection, Document

    name = f"bench-public-{size}"
    collection = Collection.objects.filter(name=name).first()
    if collection is not None and Chunk.objects.filter(collection=collection).count() == size:
        return
    if collection is not None:
        collection.delete()
    print(f"Loading {size:,} public chunks beside…", flush=True)
    with transaction.atomic():
        collection = Collection.objects.create(
            name=name, slug=name, embedder="default", dimensions=DIMENSIONS, chunker="whole"
        )
        documents = Document.objects.bulk_create(
            [
                Document(collection=collection, external_id=f"doc-{i}", content=f"public {i}")
                for i in range(size)
            ],
            batch_size=5000,
        )
        with connection.cursor() as cursor:
            copy_chunks(cursor, collection.pk, [(d.pk, d.content, None) for d in documents])
    with connection.cursor() as cursor:
        for table in ("chunk", "document"):
            cursor.execute(f"VACUUM ANALYZE retrieval_{table}")


#: The scoped rows' selectivities: the share of the chunks each scope allows.
SELECTIVITIES = {"0.1%": 0.001, "1%": 0.01, "10%": 0.1, "50%": 0.5}
#: The (made-up) group whose members see the documents of each selectivity.
SCOPE_GROUPS = {label: 9001 + i for i, label in enumerate(SELECTIVITIES)}


def scope_marks(size: int) -> tuple[list[list[str]], list[list[str]]]:
    """Each chunk's metadata tags and its document's access, drawn at random.

    A chunk is tagged ``s<label>`` (``{"tags": ["s1%"]}`` filters 1% of the chunks)
    and its document visible to group ``SCOPE_GROUPS[label]`` with the probability
    of each selectivity, from independent draws (nested: the 1% are among the 10%);
    a document outside all of them is visible to nobody (``access = []``).
    """
    rng = np.random.default_rng(size + 1)
    by_tag, by_access = rng.random(size), rng.random(size)
    tags = [[f"s{label}" for label, s in SELECTIVITIES.items() if u < s] for u in by_tag]
    access = [
        [f"group:{SCOPE_GROUPS[label]}" for label, s in SELECTIVITIES.items() if u < s]
        for u in by_access
    ]
    return tags, access


def mark_scopes(collection, tags: list[list[str]], access: list[list[str]]) -> None:
    """Write the marks of :func:`scope_marks` on a collection loaded without them."""
    import json

    from django.db import connection

    print("Marking the chunks' tags and the documents' access…", flush=True)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.id, d.id FROM retrieval_chunk c JOIN retrieval_document d "
            "ON d.id = c.document_id WHERE c.collection_id = %s ORDER BY c.id",
            [collection.pk],
        )
        rows = cursor.fetchall()
        cursor.execute(
            "UPDATE retrieval_chunk c SET metadata = m.metadata::jsonb "
            "FROM unnest(%s::bigint[], %s::text[]) AS m(id, metadata) WHERE c.id = m.id",
            [[c for c, _ in rows], [json.dumps({"tags": t}) for t in tags]],
        )
        cursor.execute(
            "UPDATE retrieval_document d SET metadata = m.metadata::jsonb, "
            "access = m.access::jsonb "
            "FROM unnest(%s::bigint[], %s::text[], %s::text[]) AS m(id, metadata, access) "
            "WHERE d.id = m.id",
            [
                [d for _, d in rows],
                [json.dumps({"tags": t}) for t in tags],
                [json.dumps(a) for a in access],
            ],
        )
        for table in ("chunk", "document"):
            cursor.execute(f"VACUUM ANALYZE retrieval_{table}")


def query_latency(size: int, n_queries: int) -> None:
    import bm25s
    import Stemmer
    from django.db import connection, transaction

    from retrieval.services.indexes.base import vector_literal
    from retrieval.services.registry import analyzers, embedders, retrievers
    from retrieval.services.retrievers.hybrid import HybridRetriever

    collection, texts, queries = load(size)
    queries = queries[:n_queries]
    chunk_ids, vectors = stored_vectors(collection)
    analyzer = analyzers["default"]
    stopwords, stemmer = sorted(analyzer.stopwords), Stemmer.Stemmer("english")
    model = bm25s.BM25(k1=retrievers["bm25"].k1, b=retrievers["bm25"].b, method="lucene")
    model.index(
        bm25s.tokenize(texts, stopwords=stopwords, stemmer=stemmer, show_progress=False),
        show_progress=False,
    )
    embedder = embedders["default"]
    query_vectors = real_query_vectors(n_queries)
    dense, hybrid = retrievers["dense"], retrievers["hybrid"]
    # The default hybrid without its document floor, whose statement (the candidates'
    # documents) it saves; one chunk per document here, so both return the same.
    unfloored = HybridRetriever(document_floor=0)
    bm25, exhaustive = bm25_plans()
    samples: dict[str, list[float]] = {}
    raw_sql = (
        "SELECT c.id, (c.embedding::vector(384)) <=> %s::vector AS distance FROM retrieval_chunk c "
        "WHERE c.collection_id = %s AND vector_dims(c.embedding) = 384 "
        "ORDER BY distance LIMIT 10"
    )

    def time_it(name: str, function: Callable[..., object], *args, **kwargs) -> object:
        started = time.perf_counter()
        result = function(*args, **kwargs)
        samples.setdefault(name, []).append((time.perf_counter() - started) * 1000)
        return result

    def raw(vector: np.ndarray) -> list:
        literal = vector_literal(vector)
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT set_config('hnsw.ef_search', %s, true)", [str(dense.ef_search)])
            cursor.execute(raw_sql, [literal, collection.pk])
            return cursor.fetchall()

    def reference(query: str) -> tuple[list[int], list[float]]:
        tokens = bm25s.tokenize(
            [query], stopwords=stopwords, stemmer=stemmer, show_progress=False, return_ids=False
        )
        documents, scores = model.retrieve(tokens, k=10, show_progress=False)
        kept = [
            (chunk_ids[i], float(s)) for i, s in zip(documents[0], scores[0], strict=True) if s > 0
        ]
        return [i for i, _ in kept], [s for _, s in kept]

    # The corpus, bm25s's index and the vectors are millions of long-lived objects: keep
    # the garbage collector from walking them in the middle of a timed call.
    gc.collect()
    gc.freeze()
    # Two passes over the queries, the first to warm every cache, the second timed.
    same_top10, same_as_exhaustive, recall = 0, 0, []
    for i, (query, vector) in enumerate(zip(queries * 2, query_vectors * 2, strict=False)):
        scope = {"collection": collection, "top_k": 10}
        ours = time_it("bm25", bm25.rank, query, **scope)
        theirs, their_scores = time_it("bm25s", reference, query)
        full = time_it("bm25 exhaustive", exhaustive.rank, query, **scope)
        same_as_exhaustive += [s.chunk_id for s in ours] == [s.chunk_id for s in full]
        # Equal scores may be ordered either way: compare ids, else the score sequences.
        same_top10 += [s.chunk_id for s in ours] == theirs or np.allclose(
            [s.score for s in ours], their_scores, rtol=1e-5
        )
        # The same pages warm for both; then, since the second of two identical queries
        # runs faster (its index pages are still in the CPU's caches), app and raw SQL
        # take turns going first.
        raw(vector)
        if i % 2:
            time_it("raw", raw, vector)
        found = time_it("dense", dense.rank_vector, vector, **scope)
        if not i % 2:
            time_it("raw", raw, vector)
        exact = time_it("exact", lambda v: np.argsort(-(vectors @ v))[:10], vector)
        recall.append(len({s.chunk_id for s in found} & {chunk_ids[i] for i in exact}) / 10)
        time_it("bm25 search", bm25.retrieve, query, **scope)
        # The query embedded on all cores (the default) and on one, taking turns.
        for query_threads in (1, None) if i % 2 else (None, 1):
            embedder.query_threads = query_threads
            suffix = "" if query_threads is None else ", one core"
            time_it("embed" + suffix, embedder.embed_query, query)
            time_it("dense search" + suffix, dense.retrieve, query, **scope)
            time_it("hybrid search" + suffix, hybrid.retrieve, query, **scope)
        embedder.query_threads = None  # the default, as configured
        turns = [("hybrid, turns", hybrid), ("hybrid without document floor, turns", unfloored)]
        for name, retriever in turns if i % 2 else turns[::-1]:
            time_it(name, retriever.retrieve, query, **scope)

    n = len(query_vectors)
    gc.unfreeze()
    p = {name: percentiles(values[n:]) for name, values in samples.items()}
    same_top10 //= 2  # counted in both passes
    same_as_exhaustive //= 2
    recall = recall[n:]
    slowest = max(p["bm25 search"][0], p["dense search"][0])
    slowest_one_core = max(p["bm25 search"][0], p["dense search, one core"][0])
    rows = [
        [
            "bm25 rank (app, default top-k)",
            *p["bm25"],
            f"{p['bm25'][0] / p['bm25s'][0]:.2f}× bm25s",
        ],
        ["bm25s rank (in process)", *p["bm25s"], ""],
        [
            "bm25 rank, exhaustive (prune=False)",
            *p["bm25 exhaustive"],
            f"{p['bm25 exhaustive'][0] / p['bm25s'][0]:.2f}× bm25s",
        ],
        [
            "dense rank (app, vector given)",
            *p["dense"],
            f"{p['dense'][0] / p['raw'][0]:.2f}× raw SQL",
        ],
        ["raw pgvector SQL, same plan", *p["raw"], ""],
        ["numpy exact scan (in process)", *p["exact"], ""],
        ["query embedding (local model)", *p["embed"], ""],
        ["query embedding, one core (query_threads=1)", *p["embed, one core"], ""],
        ["bm25 search (rank + load chunks)", *p["bm25 search"], ""],
        ["dense search (embed + rank + load)", *p["dense search"], ""],
        [
            "hybrid search (default fusion of both)",
            *p["hybrid search"],
            f"{p['hybrid search'][0] / slowest:.2f}× slowest leg",
        ],
        ["hybrid search, taking turns with the next", *p["hybrid, turns"], ""],
        [
            "hybrid search without the document floor",
            *p["hybrid without document floor, turns"],
            f"{p['hybrid without document floor, turns'][0] / p['hybrid, turns'][0]:.2f}× hybrid",
        ],
        ["dense search, query on one core", *p["dense search, one core"], ""],
        [
            "hybrid search, query on one core",
            *p["hybrid search, one core"],
            f"{p['hybrid search, one core'][0] / slowest_one_core:.2f}× slowest leg",
        ],
    ]
    print(f"### {size:,} chunks, {len(query_vectors)} queries, top-10")
    print(
        table(
            ["what", "p50 ms", "p95 ms", "ratio (p50)"],
            [[r[0], round(r[1], 2), round(r[2], 2), r[3]] for r in rows],
        )
    )
    print(
        f"\nBM25 top-10 identical to bm25s: {same_top10}/{len(query_vectors)}, "
        f"to the exhaustive ranking: {same_as_exhaustive}/{len(query_vectors)}; "
        f"dense recall@10 vs exact: {np.mean(recall):.3f}"
    )
    rates = {
        (label, query_threads): concurrent_rate(retriever, collection, queries, query_threads)
        for label, retriever in (("dense", dense), ("hybrid", hybrid))
        for query_threads in (None, 1)
    }
    print(
        "Searches per second, 2 clients at once (query on all cores / one core): "
        + "; ".join(
            f"{label} {rates[label, None]:.1f} / {rates[label, 1]:.1f}"
            for label in ("dense", "hybrid")
        )
        + "\n"
    )


def scope_filters(collection) -> dict[tuple[str, str], object]:
    """The filters of each scoped row: ``(kind, selectivity label) -> Filters``.

    By metadata, ``{"tags": ["s1%"]}``; by visibility, the scope of a signed-in user in
    the selectivity's group (:func:`scope_marks`), from ``Scope.for_user`` as a search
    by that user gets it (each leg checks it on the chunk row, against its copy of
    ``Document.access``).
    """
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    from retrieval.services.access import Scope
    from retrieval.services.core.filters import Filters

    scopes = {}
    for label in SELECTIVITIES:
        scopes["metadata", label] = Filters.parse({"metadata": {"tags": [f"s{label}"]}})
        group, _ = Group.objects.get_or_create(
            pk=SCOPE_GROUPS[label], defaults={"name": f"bench-scope-{label}"}
        )
        user, _ = get_user_model().objects.get_or_create(username=f"bench-scope-{label}")
        user.groups.set([group])
        scopes["visibility", label] = Scope.for_user(user).filters()
    return scopes


def configure_dense(ef_search: int | None, graph: list[int] | None) -> None:
    """Set the dense retriever's ``ef_search`` and the pgvector index's graph build in
    ``RETRIEVAL``, as a site does (``None``: the defaults)."""
    from django.conf import settings
    from django.test.utils import override_settings

    retrieval = dict(settings.RETRIEVAL)
    if ef_search is not None:
        retrieval["RETRIEVERS"] = {
            **retrieval.get("RETRIEVERS", {}),
            "dense": {
                "BACKEND": "retrieval.services.retrievers.dense.DenseRetriever",
                "OPTIONS": {"ef_search": ef_search},
            },
        }
    if graph is not None:
        retrieval["INDEXES"] = {
            **retrieval.get("INDEXES", {}),
            "default": {
                "BACKEND": "retrieval.services.indexes.pgvector.PgvectorIndex",
                "OPTIONS": {"m": graph[0], "ef_construction": graph[1]},
            },
        }
    override_settings(RETRIEVAL=retrieval).enable()


def rebuild_other_graphs(collection) -> None:
    """Rebuild the collection's HNSW graphs if any was built with other options than its
    index's (``--graph``)."""
    from django.db import connection

    from retrieval.services.indexes import index_for

    index = index_for(collection)
    built = index.built_graph_options(collection)
    if built and set(built.values()) == {(index.m, index.ef_construction)}:
        return
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("SET maintenance_work_mem = '6GB'")  # as in load()
        index.rebuild(collection)
        cursor.execute("RESET maintenance_work_mem")
    print(f"Graphs rebuilt ({index.graph_options}) in {time.perf_counter() - started:.0f} s")


def declare_scope_indexes(collection, labels: list[str]) -> None:
    """Declare the scopes of ``labels`` (1%: the metadata tag and the group; their HNSW
    graphs, built once); drop the others."""
    from retrieval.services.indexes import index_for

    index = index_for(collection)
    wanted = [{"metadata": {"tags": [f"s{label}"]}} for label in labels]
    wanted += [{"access": f"group:{SCOPE_GROUPS[label]}"} for label in labels]
    for scope in collection.scope_indexes:
        if scope not in wanted:
            index.remove_scope_index(collection, scope)
    for scope in wanted:
        started = time.perf_counter()
        index.add_scope_index(collection, scope)
        print(f"Scope index of {scope}: {time.perf_counter() - started:.1f} s", flush=True)


def scoped_latency(size: int, n_queries: int, scope_indexes: list[str]) -> None:
    """Searches under scopes allowing 0.1%, 1%, 10% and 50% of the chunks, beside open ones.

    For each scope (by metadata and by document visibility): BM25 rank (the app's plan,
    checked against the exhaustive scoped ranking, whose time is shown too), dense rank
    with its recall@10 against the exact scoped answer (numpy over the allowed chunks),
    and the hybrid search (embed, both legs under the scope, fuse, load).
    """
    from retrieval.services.registry import retrievers

    collection, _, queries = load(size)
    rebuild_other_graphs(collection)
    declare_scope_indexes(collection, scope_indexes)
    queries = queries[:n_queries]
    chunk_ids, vectors = stored_vectors(collection)
    position = {chunk_id: i for i, chunk_id in enumerate(chunk_ids)}
    query_vectors = real_query_vectors(n_queries)
    dense, hybrid = retrievers["dense"], retrievers["hybrid"]
    bm25, exhaustive = bm25_plans()
    scopes = {("open", "100%"): None, **scope_filters(collection)}
    truths, shares = {}, {}
    for key, filters in scopes.items():
        rows = (
            np.arange(len(chunk_ids))
            if filters is None
            else np.array(sorted(position[i] for i in filters.chunk_ids(collection.pk)))
        )
        shares[key] = len(rows) / len(chunk_ids)
        subset = vectors[rows]
        truths[key] = [
            {chunk_ids[rows[j]] for j in np.argsort(-(subset @ v))[:10]} for v in query_vectors
        ]
    samples: dict[tuple, list[float]] = {}
    same: dict[tuple, int] = {}
    recall: dict[tuple, list[float]] = {}

    def time_it(name: tuple, function: Callable[..., object], *args, **kwargs):
        started = time.perf_counter()
        result = function(*args, **kwargs)
        samples.setdefault(name, []).append((time.perf_counter() - started) * 1000)
        return result

    gc.collect()
    gc.freeze()
    n = len(query_vectors)
    for i, (query, vector) in enumerate(zip(queries * 2, query_vectors * 2, strict=False)):
        timed_pass = i >= n
        for key, filters in scopes.items():
            options = {"collection": collection, "top_k": 10, "filters": filters}
            ours = time_it((key, "bm25"), bm25.rank, query, **options)
            full = time_it((key, "bm25 exhaustive"), exhaustive.rank, query, **options)
            if timed_pass:
                # Equal scores may be ordered either way: compare the score sequences.
                same[key] = same.get(key, 0) + bool(
                    len(ours) == len(full)
                    and np.allclose([s.score for s in ours], [s.score for s in full], rtol=1e-9)
                )
            found = time_it((key, "dense"), dense.rank_vector, vector, **options)
            if timed_pass:
                truth = truths[key][i - n]
                hits = len({s.chunk_id for s in found} & truth)
                recall.setdefault(key, []).append(hits / max(len(truth), 1))
            time_it((key, "hybrid"), hybrid.retrieve, query, **options)
    gc.unfreeze()
    p = {name: percentiles(values[n:]) for name, values in samples.items()}
    open_ = ("open", "100%")
    rows = []
    for key in scopes:
        kind, label = key
        rows.append(
            [
                f"{kind} {label}" if kind != "open" else "open (no scope)",
                f"{shares[key]:.2%}",
                *(f"{x:.2f}" for x in p[key, "bm25"]),
                f"{p[key, 'bm25'][0] / p[open_, 'bm25'][0]:.2f}×",
                f"{same[key]}/{n}",
                *(f"{x:.2f}" for x in p[key, "bm25 exhaustive"]),
                *(f"{x:.2f}" for x in p[key, "dense"]),
                f"{p[key, 'dense'][0] / p[open_, 'dense'][0]:.2f}×",
                f"{np.mean(recall[key]):.3f}",
                *(f"{x:.2f}" for x in p[key, "hybrid"]),
                f"{p[key, 'hybrid'][0] / p[open_, 'hybrid'][0]:.2f}×",
            ]
        )
    print(f"### Scoped searches at {size:,} chunks, {n} queries, top-10 (ms)")
    print(
        table(
            [
                "scope",
                "allowed",
                "bm25 p50",
                "bm25 p95",
                "bm25 / open",
                "bm25 = exhaustive",
                "exhaustive p50",
                "exhaustive p95",
                "dense p50",
                "dense p95",
                "dense / open",
                "dense recall@10",
                "hybrid search p50",
                "hybrid search p95",
                "hybrid / open",
            ],
            rows,
        )
    )
    print()


def concurrent_rate(retriever, collection, queries: list[str], query_threads) -> float:
    """Searches per second with two threads searching at once, the query on ``query_threads``."""
    import threading

    from django.db import connections

    from retrieval.services.registry import embedders

    embedder = embedders["default"]
    configured, embedder.query_threads = embedder.query_threads, query_threads

    def client(share: list[str]) -> None:
        for query in share:
            retriever.retrieve(query, collection=collection, top_k=10)
        connections.close_all()

    clients = [threading.Thread(target=client, args=(queries[i::2],)) for i in range(2)]
    started = time.perf_counter()
    for thread in clients:
        thread.start()
    for thread in clients:
        thread.join()
    embedder.query_threads = configured
    return len(queries) / (time.perf_counter() - started)


def bm25_latency(size: int, n_queries: int) -> None:
    """The BM25 rows of :func:`query_latency` alone, on a collection without vectors."""
    import bm25s
    import Stemmer

    from retrieval.models import Chunk
    from retrieval.services.registry import analyzers

    collection, texts, queries = load(size, dense=False)
    queries = queries[:n_queries]
    chunk_ids = list(
        Chunk.objects.filter(collection=collection).order_by("pk").values_list("pk", flat=True)
    )
    stopwords, stemmer = sorted(analyzers["default"].stopwords), Stemmer.Stemmer("english")
    bm25, exhaustive = bm25_plans()
    model = bm25s.BM25(k1=bm25.k1, b=bm25.b, method="lucene")
    model.index(
        bm25s.tokenize(texts, stopwords=stopwords, stemmer=stemmer, show_progress=False),
        show_progress=False,
    )
    samples: dict[str, list[float]] = {}
    same, same_full = 0, 0
    gc.collect()
    gc.freeze()
    for query in queries * 2:
        scope = {"collection": collection, "top_k": 10}
        started = time.perf_counter()
        ours = bm25.rank(query, **scope)
        samples.setdefault("bm25", []).append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        tokens = bm25s.tokenize(
            [query], stopwords=stopwords, stemmer=stemmer, show_progress=False, return_ids=False
        )
        documents, scores = model.retrieve(tokens, k=10, show_progress=False)
        samples.setdefault("bm25s", []).append((time.perf_counter() - started) * 1000)
        pairs = zip(documents[0], scores[0], strict=True)
        theirs = [(chunk_ids[i], float(x)) for i, x in pairs if x > 0]
        started = time.perf_counter()
        full = exhaustive.rank(query, **scope)
        samples.setdefault("exhaustive", []).append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        bm25.retrieve(query, **scope)
        samples.setdefault("search", []).append((time.perf_counter() - started) * 1000)
        same += [s.chunk_id for s in ours] == [i for i, _ in theirs] or np.allclose(
            [s.score for s in ours], [x for _, x in theirs], rtol=1e-5
        )
        same_full += [s.chunk_id for s in ours] == [s.chunk_id for s in full]
    gc.unfreeze()
    n = len(queries)
    p = {name: percentiles(values[n:]) for name, values in samples.items()}
    rows = [
        [
            "bm25 rank (app, default top-k)",
            *p["bm25"],
            f"{p['bm25'][0] / p['bm25s'][0]:.2f}× bm25s",
        ],
        ["bm25s rank (in process)", *p["bm25s"], ""],
        [
            "bm25 rank, exhaustive (prune=False)",
            *p["exhaustive"],
            f"{p['exhaustive'][0] / p['bm25s'][0]:.2f}× bm25s",
        ],
        ["bm25 search (rank + load chunks)", *p["search"], ""],
    ]
    print(f"### {size:,} chunks (BM25 only), {n} queries, top-10")
    print(
        table(
            ["what", "p50 ms", "p95 ms", "ratio (p50)"],
            [[r[0], round(r[1], 2), round(r[2], 2), r[3]] for r in rows],
        )
    )
    print(
        f"\nBM25 top-10 identical to bm25s: {same // 2}/{n}, "
        f"to the exhaustive ranking: {same_full // 2}/{n}\n"
    )


def long_query_latency(size: int, lengths: list[int], trials: int = 15) -> None:
    """BM25 p50 for queries of many distinct terms (a pasted paragraph, an expanded query).

    Each query draws words from the bench's own queries, so frequent and rare words mix
    as they do there; past ``MAX_PRUNED_TERMS`` the app takes the exhaustive plan.
    """
    import random
    from functools import partial

    from retrieval.services.retrievers.bm25 import MAX_PRUNED_TERMS, BM25Retriever
    from retrieval.services.sparse.ranking import TOP_K_SQL

    collection, _, queries = load(size)
    app, exhaustive = bm25_plans()[0], BM25Retriever(prune=False)
    pool = [w for q in queries for w in q.split()]
    rng = random.Random(size)

    def top_k_function(terms: list[str]) -> object:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute(TOP_K_SQL, [collection.pk, terms, app.k1, app.b, 10])
            return cursor.fetchall()

    rows = []
    for length in lengths:
        samples: dict[str, list[float]] = {}
        for _ in range(trials):
            words: dict[str, None] = {}
            while len(words) < length:
                words[rng.choice(pool)] = None
            query = " ".join(words)
            terms = app.prepare(query, collection=collection)
            scope = {"collection": collection, "top_k": 10}
            plans = {
                "app": partial(app.rank, query, **scope),
                "top-k function": partial(top_k_function, terms),
                "exhaustive": partial(exhaustive.rank, query, **scope),
            }
            for rank in plans.values():  # warm: whichever ran first would read the disk
                rank()
            for name, rank in plans.items():
                samples.setdefault(name, []).append(timed(rank))
        p50 = {name: percentiles(values)[0] for name, values in samples.items()}
        rows.append([length, *(f"{p50[n]:.1f}" for n in ("app", "top-k function", "exhaustive"))])
    print(
        f"### {size:,} chunks: BM25 top 10 for long queries, p50 of {trials} queries each "
        f"(the app prunes up to {MAX_PRUNED_TERMS} distinct terms)"
    )
    print(table(["distinct terms", "app ms", "top-k function ms", "exhaustive ms"], rows))
    print()


def bm25_plans():
    """Return the configured BM25 retriever's default plan (the top-k function), and the
    exhaustive one (``prune=False``, what filtered searches use)."""
    from retrieval.services.registry import retrievers
    from retrieval.services.retrievers.bm25 import BM25Retriever

    configured = retrievers["bm25"]
    options = {"k1": configured.k1, "b": configured.b, "analyzer": configured.analyzer}
    return BM25Retriever(**options, prune=True), BM25Retriever(**options, prune=False)


def stored_vectors(collection) -> tuple[list[int], np.ndarray]:
    """The collection's chunk ids and vectors, in id order."""
    from retrieval.models import Chunk

    rows = Chunk.objects.filter(collection=collection).order_by("pk").values_list("pk", "embedding")
    return [pk for pk, _ in rows], np.stack([np.asarray(v, dtype=np.float32) for _, v in rows])


def real_query_vectors(count: int) -> list[np.ndarray]:
    """Embeddings of real SciFact (train) queries, by the local model."""
    from common import SHARED_DATA

    from retrieval.services.quality.evaluation import load_beir
    from retrieval.services.registry import embedders

    queries = list(load_beir(SHARED_DATA / "scifact", "train").judged_queries().values())
    return [embedders["default"].embed_query(q) for q in queries[:count]]


def ef_search_sweep(size: int, values: list[int], n_queries: int) -> None:
    """Dense recall@10 against the exact scan, and rank p50/p95, for each ``ef_search``."""
    from retrieval.services.retrievers.dense import PgvectorRetriever

    collection, _, _ = load(size)
    chunk_ids, vectors = stored_vectors(collection)
    query_vectors = real_query_vectors(n_queries)
    exact = [{chunk_ids[i] for i in np.argsort(-(vectors @ v))[:10]} for v in query_vectors]
    rows = []
    for ef_search in values:
        retriever, recall, samples = PgvectorRetriever(ef_search=ef_search), [], []
        for vector, truth in zip(query_vectors * 2, exact * 2, strict=True):
            started = time.perf_counter()
            found = retriever.rank_vector(vector, collection=collection, top_k=10)
            samples.append((time.perf_counter() - started) * 1000)
            recall.append(len({s.chunk_id for s in found} & truth) / 10)
        timed = samples[len(query_vectors) :]
        rows.append(
            [
                ef_search,
                f"{np.mean(recall):.3f}",
                f"{np.percentile(timed, 50):.2f}",
                f"{np.percentile(timed, 95):.2f}",
            ]
        )
    print(f"### Dense rank at {size:,} chunks, {len(query_vectors)} queries, top-10")
    print(table(["ef_search", "recall@10 vs exact", "p50 ms", "p95 ms"], rows) + "\n")


def ingestion_rate(count: int) -> None:
    from retrieval.models import Collection
    from retrieval.services.ingestion.collections import get_or_create_collection
    from retrieval.services.ingestion.ingest import Source, ingest
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
