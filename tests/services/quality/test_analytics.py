"""Search analytics and the dashboard's figures: SQL over traces, within the access scope."""

from __future__ import annotations

import json
import zoneinfo
from datetime import datetime, timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Q
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from retrieval.exceptions import CollectionNotFound
from retrieval.models import (
    Collection,
    Document,
    EvalSet,
    IndexRun,
    Judgment,
    QueryTrace,
    SearchClick,
)
from retrieval.services.access import Scope
from retrieval.services.quality import goldens
from retrieval.services.quality.analytics import (
    Percentile,
    bucket_starts,
    search_report,
    searcher_key,
)
from retrieval.services.quality.dashboard import collection_figures
from tests.conftest import collection_of

pytestmark = pytest.mark.django_db

NOW = timezone.now()


def only_doc_a(user):
    """DOCUMENT_ACCESS for these tests: only the document "a"."""
    return Q(external_id="a")


def trace(
    collection,
    query: str,
    *,
    ms: float,
    ago: timedelta,
    results: int = 2,
    user=None,
    source: str = QueryTrace.Source.API,
):
    made = QueryTrace.objects.create(
        collection=collection,
        query=query,
        pipeline="default",
        ms=ms,
        result_count=results,
        user=user,
        source=source,
    )
    QueryTrace.objects.filter(pk=made.pk).update(created_at=NOW - ago)
    return made


@pytest.fixture
def searched(keyword_settings):
    """Atlas's traces of the last days (and one older), a neighbour's, feedback votes."""
    atlas = collection_of("atlas", {"a": "north is up", "b": "south is down"})
    other = collection_of("other", {"c": "north again"})
    hour = timedelta(hours=1)
    for ms in (10, 20, 30):
        trace(atlas, "north", ms=ms, ago=hour)
    trace(atlas, "  North \n", ms=40, ago=timedelta(days=2))  # the same query
    trace(atlas, "nothing", ms=5, ago=3 * hour, results=0)
    trace(atlas, "Nothing", ms=7, ago=3 * hour, results=0)
    trace(atlas, "slow one", ms=900, ago=5 * hour)
    trace(atlas, "north", ms=1, ago=timedelta(days=10))  # before the period
    for _ in range(5):
        trace(other, "north", ms=3, ago=hour)
    votes = EvalSet.objects.create(name="atlas feedback", collection=atlas)
    chunk = atlas.chunks.select_related("document").first()
    for query, grade, status in [
        ("north", 0, Judgment.Status.CANDIDATE),
        ("why south", 0, Judgment.Status.CANDIDATE),
        ("up", 1, Judgment.Status.CANDIDATE),  # a positive vote
        ("rejected", 0, Judgment.Status.REJECTED),  # a vote the reviewers turned down
    ]:
        goldens.judge(votes, query, chunk, grade=grade, status=status, source="feedback")
    return atlas


def test_the_query_key_is_the_query_normalised_by_postgresql(searched):
    made = trace(searched, "  Reset   PASSWORD\n\tnow ", ms=1, ago=timedelta(0))
    made.refresh_from_db()
    assert made.query_key == "reset password now"
    long = trace(searched, "word " * 100, ms=1, ago=timedelta(0))
    long.refresh_from_db()
    assert len(long.query_key) == 200 and long.query_key.startswith("word word")


def test_a_report_counts_groups_and_orders_the_period_s_searches(searched):
    # The period ends when the report is asked for: NOW (the traces' clock) may be of the
    # day before, and the period's calendar days then one more.
    now = timezone.now()
    report = search_report("atlas", scope=Scope.ALL, since=now - timedelta(days=7), until=now)
    assert (report.searches, report.empty, report.step) == (7, 2, "day")
    # ms 5, 7, 10, 20, 30, 40, 900: the median, and 40 + 0.7 * (900 - 40) at 95%.
    assert report.p50 == 20 and report.p95 == pytest.approx(642)
    assert [(r.query, r.searches, r.empty) for r in report.top] == [
        ("north", 4, 0),
        ("nothing", 2, 2),
        ("slow one", 1, 0),
    ]
    assert report.top[0].avg_ms == 25 and report.top[0].max_ms == 40
    assert [(r.query, r.searches) for r in report.no_results] == [("nothing", 2)]
    assert [(r.query, r.max_ms) for r in report.slowest] == [
        ("slow one", 900),
        ("north", 40),
        ("nothing", 7),
    ]
    assert [(r.query, r.searches) for r in report.negative_feedback] == [
        ("north", 1),
        ("why south", 1),
    ]
    assert len(report.series) == 8  # the 7 days back from now touch 8 calendar days
    assert sum(b.searches for b in report.series) == 7
    limited = search_report(
        searched, scope=Scope.ALL, since=NOW - timedelta(days=1), until=NOW, limit=1
    )
    assert [r.query for r in limited.top] == ["north"] and limited.step == "hour"
    assert len(limited.series) in (24, 25)  # the hours the last day touches
    an_hour_ago = NOW - timedelta(hours=1)
    hour = next(b for b in limited.series if b.start <= an_hour_ago < b.start + timedelta(hours=1))
    assert (hour.searches, hour.empty, hour.p50, hour.p95) == (3, 0, 20, pytest.approx(29))


def test_editors_searches_count_only_when_asked_for(searched):
    """The playground's and evaluations' searches are editors' testing, not readers'
    traffic: the report and the dashboard leave them out unless asked for."""
    for source in ("playground", "evaluation"):
        trace(searched, "judged", ms=2000, ago=timedelta(hours=1), results=0, source=source)
    week = NOW - timedelta(days=7)
    report = search_report(searched, scope=Scope.ALL, since=week, until=NOW)
    assert (report.searches, report.empty, report.editors) == (7, 2, False)
    shown = [r.query for r in report.top + report.no_results + report.slowest]
    assert "judged" not in shown and sum(b.searches for b in report.series) == 7
    every = search_report(searched, scope=Scope.ALL, since=week, until=NOW, editors=True)
    assert (every.searches, every.empty, every.editors) == (9, 4, True)
    assert ("judged", 2) in [(r.query, r.searches) for r in every.no_results]
    assert every.slowest[0].query == "judged" and sum(b.searches for b in every.series) == 9
    (figures,) = collection_figures(
        scope=Scope.ALL, collections=[searched], parts={"searches"}, now=NOW
    )
    searches = figures.searches
    assert (searches.day, searches.week, searches.empty) == (6, 7, 2)


def test_a_document_restricted_user_sees_their_own_searches_and_no_feedback(
    searched, retrieval_settings
):
    retrieval_settings(DOCUMENT_ACCESS="tests.services.quality.test_analytics.only_doc_a")
    reader = get_user_model().objects.create_user("reader")
    trace(searched, "mine", ms=3, ago=timedelta(hours=2), user=reader)
    report = search_report(searched, scope=Scope.for_user(reader), since=NOW - timedelta(days=7))
    assert report.only_own and report.negative_feedback is None
    assert [r.query for r in report.top] == ["mine"] and report.searches == 1
    figures = collection_figures(scope=Scope.for_user(reader), now=NOW)
    by_name = {f.collection.name: f for f in figures}
    assert by_name["atlas"].documents == 1  # of two
    assert by_name["atlas"].searches.week == 1 and by_name["other"].searches.week == 0
    assert by_name["atlas"].evaluation is None


def test_a_hidden_collection_has_no_report(searched, retrieval_settings):
    retrieval_settings(COLLECTION_ACCESS="tests.services.quality.test_analytics.only_other")
    reader = get_user_model().objects.create_user("reader")
    with pytest.raises(CollectionNotFound, match="No collection 'atlas'"):
        search_report("atlas", scope=Scope.for_user(reader), since=NOW - timedelta(days=7))
    assert [f.collection.name for f in collection_figures(scope=Scope.for_user(reader))] == [
        "other"
    ]


def only_other(user):
    return ["other"]


def test_dashboard_figures_per_collection(searched):
    atlas = searched
    atlas.documents.filter(external_id="b").update(status="failed")
    IndexRun.objects.create(collection=atlas, task="reindex", status=IndexRun.Status.FAILED)
    figures = {f.collection.name: f for f in collection_figures(scope=Scope.ALL, now=NOW)}
    shown = figures["atlas"]
    assert (shown.documents, shown.failed, shown.chunks) == (2, 1, 2)
    assert shown.last_run.task == "reindex" and shown.last_run.status == "failed"
    assert shown.index.backend == "PgvectorIndex" and shown.index.pending == 0
    searches = shown.searches
    assert (searches.day, searches.week, searches.empty) == (6, 7, 2)
    assert searches.empty_rate == pytest.approx(2 / 7)
    assert (searches.p50, searches.p95) == (20, pytest.approx(642))
    assert figures["other"].searches.day == 5
    only = collection_figures(scope=Scope.ALL, collections=[atlas], parts={"documents"})
    assert len(only) == 1 and only[0].searches is None and only[0].index is None
    with pytest.raises(ValueError, match="Unknown parts"):
        collection_figures(scope=Scope.ALL, parts={"weather"})


def test_the_latest_evaluation_and_its_trend(searched):
    from retrieval.models import EvalRun

    gold = EvalSet.objects.create(name="gold", collection=searched)
    for value, pipeline in [(0.5, "default"), (0.6, "other"), (0.55, "default"), (0.7, "default")]:
        EvalRun.objects.create(
            eval_set=gold,
            pipeline=pipeline,
            status=EvalRun.Status.SUCCEEDED,
            metrics={"ndcg@10": value},
        )
    EvalRun.objects.create(eval_set=gold, pipeline="default", status=EvalRun.Status.FAILED)
    evaluation = {f.collection.name: f for f in collection_figures(scope=Scope.ALL)}[
        "atlas"
    ].evaluation
    assert evaluation.ndcg == 0.7 and evaluation.history == (0.5, 0.55, 0.7)
    assert evaluation.delta == pytest.approx(0.15)


def test_buckets_follow_the_time_zone_s_clocks():
    paris = zoneinfo.ZoneInfo("Europe/Paris")
    with timezone.override(paris):
        since = datetime(2024, 3, 31, 0, 30, tzinfo=paris)  # clocks jump 02:00 -> 03:00
        hours = bucket_starts(since, since + timedelta(hours=3), "hour")
        assert [h.strftime("%H:%M%z") for h in hours] == [
            "00:00+0100",
            "01:00+0100",
            "03:00+0200",
        ]
        days = bucket_starts(since - timedelta(days=1), since + timedelta(days=1), "day")
        assert [d.strftime("%d %H:%M%z") for d in days] == [
            "30 00:00+0100",
            "31 00:00+0100",
            "01 00:00+0200",
        ]


def test_percentile_refuses_a_fraction_outside_0_1():
    with pytest.raises(ValueError, match="fraction"):
        Percentile("ms", 1.5)


#: Traces the plan test loads: enough that PostgreSQL prefers the indexes, as at scale.
LOADED = 60_000
#: The covering indexes of migration 0021 (PostgreSQL 18 may skip-scan the user index's
#: leading column for a query of every user's traces: still an index-only scan).
TRACE_INDEXES = (
    "retrieval_trace_report_idx",
    "retrieval_trace_user_idx",
    "retrieval_trace_empty_idx",
)


@pytest.mark.django_db(transaction=True)
def test_every_report_and_dashboard_query_reads_the_trace_indexes():
    """At scale the planner must pick the trace indexes: an index-only scan of one of
    the covering indexes, never a scan of the traces' table, whose rows hold whole
    result lists; searches without results come from their partial index."""
    collections = [
        Collection.objects.create(name=f"c{n}", slug=f"c{n}", embedder="default", dimensions=3)
        for n in range(20)
    ]
    ids = [c.pk for c in collections]
    staff = get_user_model().objects.create_user("staff")
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO retrieval_querytrace
                (created_at, query, user_id, collection_id, pipeline, top_k, filters, ms,
                 llm_tokens, result_count, results, trace, source)
            SELECT now() - random() * interval '30 days',
                   'query ' || floor(exp(random() * ln(5000)))::int,
                   CASE WHEN i %% 50 = 0 THEN %s END,
                   (%s::bigint[])[1 + (i %% 20)], 'default', 10, '{}',
                   exp(random() * 5), 0,
                   CASE WHEN random() < 0.08 THEN 0 ELSE 10 END,
                   %s::jsonb, '{}',
                   CASE WHEN i %% 10 = 0 THEN 'playground' ELSE 'api' END
            FROM generate_series(1, %s) AS i
            """,
            [
                staff.pk,
                ids,
                json.dumps([{"chunk_id": n, "score": 0.5} for n in range(10)]),
                LOADED,
            ],
        )
        # A tenth of the searches clicked, as the click-through figures find them.
        cursor.execute(
            """
            INSERT INTO retrieval_searchclick (trace_id, document_id, position, created_at)
            SELECT id, NULL, 1 + id % 5, created_at FROM retrieval_querytrace WHERE id % 10 = 3
            """
        )
        cursor.execute("VACUUM ANALYZE retrieval_querytrace")
        cursor.execute("VACUUM ANALYZE retrieval_searchclick")
    root = get_user_model().objects.create_superuser("root")
    # Staff restricted to some documents: their own traces.
    own = Scope(documents=Document.objects.all(), label="restricted", user=staff)
    week = timezone.now() - timedelta(days=7)
    with CaptureQueriesContext(connection) as captured:
        search_report("c0", scope=Scope.for_user(root), since=week)
        collection_figures(scope=Scope.ALL, collections=collections[:5], parts={"searches"})
        search_report("c0", scope=own, since=week)
        search_report("c0", scope=Scope.for_user(root), since=week, editors=True)
    statements = [q["sql"] for q in captured if "retrieval_querytrace" in q["sql"]]
    # Totals, top, no results, slowest, series, no clicks, searchers; the dashboard; the
    # same seven, own only; the same seven, editors' searches included. Readers' only is
    # read from the indexes too: they include the source (clicks join by the id).
    assert len(statements) == 22
    assert "'playground'" in statements[0] and "'playground'" not in statements[15]
    for sql in statements:
        with connection.cursor() as cursor:
            cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}")
            plan = cursor.fetchone()[0]
        scans = _scans(plan[0]["Plan"])
        on_traces = [s for s in scans if s.get("Relation Name") == "retrieval_querytrace"]
        assert on_traces, sql
        for scan in on_traces:
            assert scan["Node Type"] == "Index Only Scan", (scan["Node Type"], sql)
            assert scan["Index Name"] in TRACE_INDEXES, (scan["Index Name"], sql)
    for sql in statements[8:15]:  # her own traces: the user index
        with connection.cursor() as cursor:
            cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}")
            assert "retrieval_trace_user_idx" in json.dumps(cursor.fetchone()[0]), sql
    empty = statements[2]  # the queries without results
    assert 'WHERE ("retrieval_querytrace"."collection_id" =' in empty and "result_count" in empty
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) {empty}")
        assert "retrieval_trace_empty_idx" in json.dumps(cursor.fetchone()[0])


def _scans(node: dict) -> list[dict]:
    found = [node] if "Scan" in node["Node Type"] else []
    for child in node.get("Plans", []):
        found += _scans(child)
    return found


def click(made, external_id: str, position: int):
    document = Document.objects.get(collection=made.collection, external_id=external_id)
    return SearchClick.objects.create(trace=made, document=document, position=position)


def test_click_through_rate_and_mean_position_per_query_and_overall(searched):
    """Only searches that could be clicked count: the page's and the API's, with results.
    North: 4 API searches with results, 2 clicked (positions 1, 2 and 3): CTR 50 %."""
    week = NOW - timedelta(days=7)
    norths = list(searched.traces.filter(query_key="north", created_at__gte=week))
    click(norths[0], "a", 1)
    click(norths[0], "b", 2)
    click(norths[1], "a", 3)
    page = trace(searched, "north", ms=1, ago=timedelta(hours=2), source="page")
    python = trace(searched, "north", ms=1, ago=timedelta(hours=2), source="python")
    click(python, "a", 1)  # not a reader's face: cannot count
    nothing = searched.traces.filter(query_key="nothing").first()
    report = search_report(searched, scope=Scope.ALL, since=NOW - timedelta(days=7), until=NOW)
    north = next(r for r in report.top if r.query == "north")
    # 4 API + 1 page searches with results; the Python one is not clickable.
    assert (north.searches, north.clickable, north.clicked, north.clicks) == (6, 5, 2, 3)
    assert north.ctr == pytest.approx(2 / 5) and north.mean_position == pytest.approx(2)
    assert next(r for r in report.top if r.query == "nothing").ctr is None  # nothing found
    totals = report.clicks
    # Clickable overall: north 5, "slow one" 1; "nothing" found nothing.
    assert (totals.clickable, totals.clicked, totals.clicks, totals.positions) == (6, 2, 3, 6)
    assert totals.ctr == pytest.approx(2 / 6)
    # Searches with results but no click: north 3 (two API, the page's), slow one 1.
    assert [(r.query, r.searches) for r in report.no_clicks] == [("north", 3), ("slow one", 1)]
    assert page.pk and nothing.result_count == 0


def test_unique_searchers_are_signed_in_users_shown_hashed(searched):
    users = get_user_model().objects
    ann, bob = users.create_user("ann"), users.create_user("bob")
    for user, query in [(ann, "north"), (ann, "north"), (ann, "south"), (bob, "north")]:
        trace(searched, query, ms=1, ago=timedelta(hours=1), user=user)
    report = search_report(searched, scope=Scope.ALL, since=NOW - timedelta(days=7), until=NOW)
    assert report.searchers == 2 and report.anonymous == 7  # the fixture's, nobody's
    assert next(r for r in report.top if r.query == "north").searchers == 2
    keys = [(r.key, r.searches) for r in report.top_searchers]
    assert keys == [(searcher_key(ann.pk), 3), (searcher_key(bob.pk), 1)]
    assert searcher_key(ann.pk) != searcher_key(bob.pk) and len(searcher_key(ann.pk)) == 12
    assert str(ann.pk) != searcher_key(ann.pk) and "ann" not in searcher_key(ann.pk)
