"""Search analytics and the dashboard at a million traces: p50 / p95 of each page's queries.

Loads ``--traces`` synthetic traces (default 1,000,000) into the example project's
database with SQL (``INSERT ... SELECT generate_series``, never the ORM): over the last
``--days`` (30, the default retention) across ``--collections`` collections whose
shares of the traffic fall off as 1/rank (the busiest gets about a third at 10), queries
drawn log-uniformly from 20,000 (a Zipf-like long tail), 7% finding nothing, latency
log-normal-ish with a 1% slow tail, 2% of the searches by one staff user, and each
trace's results list as big as a top 10's. Then times, on the busiest collection, every
statement of search analytics for the last 24 hours, 7 and 30 days (as a superuser and
as staff restricted to their own traces) and the dashboard's search figures over every
collection, ``--repeat`` times each after a warm-up, and prints each plan's scan.

    python bench/analytics.py                 # load (once), measure
    python bench/analytics.py --load-only     # load and stop; later runs reuse it
    python bench/analytics.py --drop          # delete the bench's collections and traces
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import timedelta
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import machine, setup_django, table  # noqa: E402

PREFIX = "bench-analytics-"
BATCH = 100_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--traces", type=int, default=1_000_000)
    parser.add_argument("--collections", type=int, default=10)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--load-only", action="store_true")
    parser.add_argument("--drop", action="store_true")
    args = parser.parse_args()
    setup_django()
    print(f"Machine: {machine()}\n")
    if args.drop:
        drop()
        return
    collections = load(args.traces, args.collections, args.days)
    if args.load_only:
        return
    measure(collections, args.repeat)


def drop() -> None:
    from retrieval.models import Collection, QueryTrace

    collections = Collection.objects.filter(name__startswith=PREFIX)
    deleted = QueryTrace.objects.filter(collection__in=collections)._raw_delete("default")
    collections.delete()
    print(f"deleted {deleted} traces")


def load(total: int, count: int, days: int) -> list:
    """Create the bench's collections and traces unless a run before did."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    from retrieval.models import Collection, QueryTrace

    collections = [
        Collection.objects.get_or_create(
            name=f"{PREFIX}{n}",
            defaults={"slug": f"{PREFIX}{n}", "embedder": "default", "dimensions": 384},
        )[0]
        for n in range(count)
    ]
    get_user_model().objects.get_or_create(username=f"{PREFIX}staff")
    present = QueryTrace.objects.filter(collection__in=collections).count()
    if present >= total:
        print(f"{present:,} bench traces already loaded")
        return collections
    ids = [c.pk for c in collections]
    staff = get_user_model().objects.get(username=f"{PREFIX}staff").pk
    weights = np.array([1 / (rank + 1) for rank in range(count)])
    bounds = list(np.cumsum(weights / weights.sum()))
    legs = {"bm25": {"rank": 1, "score": 0.4}, "dense": {"rank": 2, "score": 0.7}}
    results = json.dumps(
        [
            {"rank": r, "score": 0.5, "chunk_id": 1000 + r, "chunk_index": r,
             "document": f"doc-{r}", "document_id": 100 + r, "legs": legs}
            for r in range(1, 11)
        ]
    )  # fmt: skip
    started = time.perf_counter()
    with connection.cursor() as cursor:
        for first in range(present, total, BATCH):
            rows = min(BATCH, total - first)
            cursor.execute(
                """
                INSERT INTO retrieval_querytrace
                    (created_at, query, user_id, collection_id, pipeline, top_k, filters, ms,
                     llm_tokens, result_count, results, trace)
                SELECT now() - random() * make_interval(days => %(days)s),
                       'query ' || floor(exp(random() * ln(20000)))::int,
                       CASE WHEN random() < 0.02 THEN %(staff)s END,
                       (%(ids)s::bigint[])[width_bucket(random(), %(bounds)s::float8[]) + 1],
                       'default', 10, '{}',
                       exp(1.5 + random() * 2.5) * CASE WHEN random() < 0.01 THEN 10 ELSE 1 END,
                       0,
                       CASE WHEN random() < 0.07 THEN 0 ELSE 10 END,
                       %(results)s::jsonb, '{"events": []}'
                FROM generate_series(1, %(rows)s)
                """,
                {
                    "days": days,
                    "staff": staff,
                    "ids": ids,
                    "bounds": [float(b) for b in bounds[:-1]],
                    "results": results,
                    "rows": rows,
                },
            )
            print(f"  {first + rows:,} / {total:,} traces", flush=True)
        seconds = time.perf_counter() - started
        cursor.execute("VACUUM ANALYZE retrieval_querytrace")
        cursor.execute(
            "SELECT pg_size_pretty(pg_total_relation_size('retrieval_querytrace')), "
            "pg_size_pretty(pg_relation_size('retrieval_trace_report_idx')), "
            "pg_size_pretty(pg_relation_size('retrieval_trace_empty_idx'))"
        )
        sizes = cursor.fetchone()
    print(
        f"loaded {total - present:,} traces in {seconds:.0f} s "
        f"({(total - present) / seconds:,.0f} rows/s, the generated query key and every index "
        f"included); table {sizes[0]}, report index {sizes[1]}, no-result index {sizes[2]}\n"
    )
    return collections


def measure(collections: list, repeat: int) -> None:
    from django.db import connection
    from django.db.models import Count
    from django.utils import timezone

    from retrieval.models import Document, QueryTrace
    from retrieval.services.access import Scope
    from retrieval.services.quality import analytics
    from retrieval.services.quality.dashboard import collection_figures

    busiest = collections[0]
    traces = QueryTrace.objects.filter(collection__in=collections)
    share = QueryTrace.objects.filter(collection=busiest).count()
    print(f"{traces.count():,} traces; the busiest collection holds {share:,}\n")
    from django.contrib.auth import get_user_model

    staff = get_user_model().objects.get(username=f"{PREFIX}staff")
    scopes = {
        "superuser": Scope.ALL,
        # Staff restricted to some documents: their own traces only.
        "own traces": Scope(documents=Document.objects.all(), label="bench", user=staff),
    }
    rows, plans = [], {}
    for who, scope in scopes.items():
        for days in (1, 7, 30):
            now = timezone.now()
            since = now - timedelta(days=days)
            period = analytics.period_traces(busiest, scope=scope, since=since, until=now)
            step = "hour" if days == 1 else "day"
            statements = {
                "totals": lambda p=period: p.aggregate(
                    n=Count("*"),
                    p50=analytics.Percentile("ms", 0.5),
                    p95=analytics.Percentile("ms", 0.95),
                ),
                "top queries": lambda p=period: analytics.top_queries(p, 20),
                "no results": lambda p=period: analytics.queries_without_results(p, 20),
                "slowest": lambda p=period: analytics.slowest_queries(p, 20),
                "volume and latency": lambda p=period, s=since, u=now, st=step: analytics.series(
                    p, since=s, until=u, step=st
                ),
                "whole report": lambda s=since, sc=scope: analytics.search_report(
                    busiest, scope=sc, since=s
                ),
            }
            for name, run in statements.items():
                p50, p95, count = timed(run, repeat)
                rows.append([who, f"{days} d", name, count, f"{p50:.1f}", f"{p95:.1f}"])
            if who == "superuser" and days == 30:
                for name in ("top queries", "no results", "volume and latency"):
                    plans[name] = scan_of(statements[name], connection)
    for who, scope in scopes.items():

        def dashboard(sc=scope):
            return collection_figures(scope=sc, collections=collections, parts={"searches"})

        p50, p95, _ = timed(dashboard, repeat)
        what = f"dashboard ({len(collections)} collections)"
        rows.append([who, "24 h / 7 d", what, "", f"{p50:.1f}", f"{p95:.1f}"])
        if who == "superuser":
            plans["dashboard"] = scan_of(dashboard, connection)
    print(table(["scope", "period", "what", "traces read", "p50 ms", "p95 ms"], rows))
    print("\nPlans (30 days, superuser):")
    for name, scans in plans.items():
        print(f"- {name}: {'; '.join(scans)}")


def timed(run, repeat: int) -> tuple[float, float, int | str]:
    """Run once to warm up, then ``repeat`` times; return p50, p95 ms and a size."""
    answer = run()
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        answer = run()
        samples.append((time.perf_counter() - started) * 1000)
    size = answer.get("n", "") if isinstance(answer, dict) else ""
    if hasattr(answer, "searches"):
        size = answer.searches
    return float(np.percentile(samples, 50)), float(np.percentile(samples, 95)), size


def scan_of(run, connection) -> list[str]:
    """Return the scans on the traces table of the statements ``run`` sends."""
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        run()
    found = []
    for query in captured:
        if "retrieval_querytrace" not in query["sql"]:
            continue
        with connection.cursor() as cursor:
            cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {query['sql']}")
            plan = cursor.fetchone()[0][0]["Plan"]
        found += [
            f"{node['Node Type']} using {node.get('Index Name', '-')}"
            f" (heap fetches {node.get('Heap Fetches', '-')}, workers "
            f"{plan.get('Workers Launched', 0)})"
            for node in _nodes(plan)
            if node.get("Relation Name") == "retrieval_querytrace"
        ]
    return found


def _nodes(node: dict) -> list[dict]:
    found = [node]
    for child in node.get("Plans", []):
        found += _nodes(child)
    return found


if __name__ == "__main__":
    main()
