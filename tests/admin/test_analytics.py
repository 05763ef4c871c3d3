"""Search analytics in the admin: the page, its CSV tables, and what a query row leads to."""

from __future__ import annotations

import csv
import io
from datetime import datetime, timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone

from retrieval.models import Document, EvalQuery, EvalSet, Promotion, QueryTrace, SearchClick
from retrieval.services.quality.analytics import searcher_key
from tests.conftest import collection_of, editor

pytestmark = pytest.mark.django_db

URL = "/admin/retrieval/querytrace/analytics/"


@pytest.fixture
def atlas(keyword_settings):
    atlas = collection_of("atlas", {"a": "north is up", "b": "south is down"})
    now = timezone.now()
    for query, results, ms, hours in [
        ("North", 2, 10.0, 1),
        ("north", 2, 30.0, 2),
        ("=cmd|' /C calc'!A0", 0, 5.0, 3),  # a spreadsheet formula as a query
        ("nowhere", 0, 7.0, 30),
        ("slow", 1, 800.0, 50),
    ]:
        made = QueryTrace.objects.create(
            collection=atlas, query=query, pipeline="default", ms=ms, result_count=results
        )
        QueryTrace.objects.filter(pk=made.pk).update(created_at=now - timedelta(hours=hours))
    return atlas


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def root():
    return get_user_model().objects.create_superuser("root", password="x")


def rows(response) -> list[list[str]]:
    assert response["Content-Type"].startswith("text/csv")
    return list(csv.reader(io.StringIO(response.content.decode())))


def test_the_page_reports_the_chosen_collection_and_period(atlas, root):
    client = signed_in(root)
    page = client.get(URL)  # the first collection, the last 7 days
    report = page.context["report"]
    assert report.collection == atlas and report.searches == 5 and report.step == "day"
    body = page.content.decode()
    assert body.count('data-chart="volume"') == 1 and body.count('data-chart="latency"') == 1
    assert '<rect x="' in body and 'data-series="p95"' in body
    assert 'data-query="north"' in body and "40.0%" in body  # 2 of 5 found nothing
    day = client.get(URL, {"collection": atlas.pk, "period": "1d"}).context["report"]
    assert (day.searches, day.step) == (3, "hour")
    assert [row.query for row in day.no_results] == ["=cmd|' /c calc'!a0"]


def test_editors_playground_searches_count_only_when_asked_for(atlas, root, retrieval_settings):
    """Testing a pipeline in the playground is not readers' traffic: its two searches
    are traced as ``playground`` and left out of the figures unless editors' are asked for."""
    retrieval_settings(TRACE_SAMPLE_RATE=1)
    client = signed_in(root)
    compare = {"collection": atlas.pk, "query": "judged", "left": "bm25", "right": "dense"}
    assert client.get(reverse("admin:retrieval_playground"), compare).status_code == 200
    judged = QueryTrace.objects.filter(query="judged")
    assert list(judged.values_list("source", flat=True)) == ["playground", "playground"]
    readers = client.get(URL, {"collection": atlas.pk})
    report = readers.context["report"]
    assert report.searches == 5 and not report.editors
    assert "judged" not in [row.query for row in report.top]
    assert sum(bucket.searches for bucket in report.series) == 5
    assert 'name="editors"' in readers.content.decode()
    assert client.get(readers.context["traces_url"]).context["cl"].result_count == 5
    every = client.get(URL, {"collection": atlas.pk, "editors": "on"})
    report = every.context["report"]
    assert report.searches == 7 and report.editors
    assert ("judged", 2) in [(row.query, row.searches) for row in report.top]
    assert sum(bucket.searches for bucket in report.series) == 7
    assert client.get(every.context["traces_url"]).context["cl"].result_count == 7
    assert "editors=on" in every.context["export_url"]
    top = rows(client.get(URL, {"collection": atlas.pk, "editors": "on", "export": "top"}))
    assert "judged" in [line[0] for line in top[1:]]
    listed = client.get(reverse("admin:retrieval_querytrace_changelist"), {"source": "playground"})
    assert listed.context["cl"].result_count == 2


def test_each_table_downloads_as_csv_with_formulas_defused(atlas, root):
    client = signed_in(root)
    params = {"collection": atlas.pk, "period": "7d"}
    top = rows(client.get(URL, {**params, "export": "top"}))
    assert top[0][:6] == ["query", "searches", "no results", "avg ms", "max ms", "last seen"]
    assert top[1][:5] == ["north", "2", "0", "20.0", "30.0"]
    assert ["'=cmd|' /c calc'!a0", "1", "1"] == top[2][:3]  # quoted, not run as a formula
    empty = rows(client.get(URL, {**params, "export": "no_results"}))
    assert [line[0] for line in empty[1:]] == ["'=cmd|' /c calc'!a0", "nowhere"]
    slowest = rows(client.get(URL, {**params, "export": "slowest"}))
    assert slowest[1][:4] == ["slow", "1", "800.0", "800.0"]
    series = rows(client.get(URL, {**params, "export": "series"}))
    assert series[0] == ["start", "searches", "no results", "p50 ms", "p95 ms"]
    assert sum(int(line[1]) for line in series[1:]) == 5 and len(series) == 9
    answer = client.get(URL, {**params, "export": "top"})
    assert answer["Content-Disposition"] == 'attachment; filename="search-atlas-top-7d.csv"'


def test_negative_feedback_lists_the_queries_readers_voted_down(atlas, root):
    from rest_framework.test import APIClient

    api = APIClient()
    api.force_authenticate(root)
    chunk = atlas.chunks.first()
    for query, relevant in [("where is north", False), ("where is north", False), ("up", True)]:
        vote = {"collection": "atlas", "query": query, "chunk_id": chunk.pk, "relevant": relevant}
        assert api.post("/api/feedback/", vote, format="json").status_code == 202
    page = signed_in(root).get(URL, {"collection": atlas.pk})
    feedback = page.context["report"].negative_feedback
    assert [(row.query, row.searches) for row in feedback] == [("where is north", 1)]
    assert 'id="retrieval-feedback"' in page.content.decode()


def test_a_query_row_leads_to_its_traces_the_playground_a_golden_set_and_a_promotion(atlas, root):
    client = signed_in(root)
    EvalSet.objects.create(name="gold", collection=atlas)
    # Holds "north", but is another query: not among north's traces.
    QueryTrace.objects.create(collection=atlas, query="North  Pole", pipeline="default")
    page = client.get(URL, {"collection": atlas.pk})
    north = next(item for item in page.context["top"] if item["row"].query == "north")
    links = north["links"]
    assert set(links) == {"traces", "playground", "golden", "promote"}
    traces = client.get(links["traces"])
    assert traces.context["cl"].result_count == 2
    form = client.get(links["golden"])
    assert form.context["form"]["query"].value() == "north"
    gold = EvalSet.objects.get(name="gold")
    added = client.post(links["golden"], {"eval_set": gold.pk, "query": "north"})
    assert added.status_code == 302 and added.url.startswith(reverse("admin:retrieval_playground"))
    assert "query=north" in added.url
    assert list(EvalQuery.objects.values_list("eval_set__name", "text")) == [("gold", "north")]
    again = client.post(links["golden"], {"eval_set": gold.pk, "query": "north"}, follow=True)
    assert "is already in the set" in again.content.decode()
    assert EvalQuery.objects.count() == 1
    promote = client.get(links["promote"])
    initial = promote.context["adminform"].form.initial
    assert initial["query"] == "north" and str(initial["collection"]) == str(atlas.pk)
    data = {"collection": atlas.pk, "query": "north", "position": 1, "active": "on"}
    data["document"] = Document.objects.get(external_id="b").pk
    assert client.post(reverse("admin:retrieval_promotion_add"), data).status_code == 302
    assert Promotion.objects.get().created_by == root


def test_staff_restricted_to_documents_see_their_own_searches_and_no_golden_links(
    atlas, retrieval_settings
):
    retrieval_settings(DOCUMENT_ACCESS="tests.admin.test_dashboard.team_docs")
    reader = editor("reader-a", is_staff=True)
    QueryTrace.objects.create(collection=atlas, query="mine", pipeline="default", user=reader)
    page = signed_in(reader).get(URL, {"collection": atlas.pk})
    report = page.context["report"]
    assert report.only_own and [row.query for row in report.top] == ["mine"]
    assert report.negative_feedback is None
    assert 'id="retrieval-feedback"' not in page.content.decode()
    assert set(page.context["top"][0]["links"]) == {"traces", "playground"}
    refused = signed_in(reader).get(reverse("admin:retrieval_evalset_add_query"))
    assert refused.status_code == 403


def test_a_hidden_collection_answers_like_a_missing_one(atlas, retrieval_settings):
    retrieval_settings(COLLECTION_ACCESS="tests.admin.test_dashboard.sees")
    other = collection_of("bestiary", {"w": "wolf"})
    stranger = editor("editor-bestiary", is_staff=True)
    client = signed_in(stranger)
    hidden = client.get(URL, {"collection": atlas.pk})
    missing = client.get(URL, {"collection": 999_999})
    assert hidden.context["report"] is None and missing.context["report"] is None
    assert hidden.context["form"].errors == missing.context["form"].errors
    choices = list(hidden.context["form"].fields["collection"].queryset)
    assert choices == [other]
    exported = client.get(URL, {"collection": atlas.pk, "export": "top"})
    assert exported["Content-Type"].startswith("text/html")  # no CSV of a hidden collection
    assert "atlas" not in hidden.content.decode().lower()


def test_without_a_view_permission_on_traces_the_page_is_refused(atlas):
    staff = get_user_model().objects.create_user("staff", password="x", is_staff=True)
    assert signed_in(staff).get(URL).status_code == 403


def searched_at(collection, query: str, moment, *, results: int = 2, source="api", user=None):
    made = QueryTrace.objects.create(
        collection=collection,
        query=query,
        pipeline="default",
        result_count=results,
        source=source,
        user=user,
    )
    QueryTrace.objects.filter(pk=made.pk).update(created_at=moment)
    return made


def test_click_through_rate_position_and_unclicked_searches_are_shown_and_exported(atlas, root):
    now = timezone.now() - timedelta(minutes=5)
    a, b = (Document.objects.get(external_id=key) for key in ("a", "b"))
    first = searched_at(atlas, "pole", now, source="page")
    searched_at(atlas, "pole", now, source="api")  # found something, nobody clicked
    searched_at(atlas, "pole", now, source="python")  # not a reader's face: not counted
    SearchClick.objects.create(trace=first, document=b, position=2)
    client = signed_in(root)
    page = client.get(URL, {"collection": atlas.pk})
    body = page.content.decode()
    pole = next(item["row"] for item in page.context["top"] if item["row"].query == "pole")
    assert (pole.clickable, pole.clicked, pole.ctr, pole.mean_position) == (2, 1, 0.5, 2)
    assert 'data-ctr="0.5"' in body and "50.0%" in body
    assert [item["row"].query for item in page.context["no_clicks"]] == ["pole"]
    assert 'id="retrieval-no-clicks"' in body
    top = rows(client.get(URL, {"collection": atlas.pk, "export": "top"}))
    assert top[0][6:] == ["clickable", "clicked", "ctr", "mean click position", "searchers"]
    line = next(line for line in top if line[0] == "pole")
    assert line[6:10] == ["2", "1", "0.5", "2.0"]
    unclicked = rows(client.get(URL, {"collection": atlas.pk, "export": "no_clicks"}))
    assert unclicked[1][:2] == ["pole", "1"]
    # The drill-down: the query's traces, each with the documents clicked from it.
    link = next(
        item["links"]["traces"] for item in page.context["top"] if item["row"].query == "pole"
    )
    traces = client.get(link)
    # Readers' searches: the Python one too (it is a reader's, only not clickable).
    assert traces.context["cl"].result_count == 3 and f"#2 {b}" in traces.content.decode()
    shown = client.get(reverse("admin:retrieval_querytrace_change", args=[first.pk]))
    assert 'id="retrieval-trace-clicks"' in shown.content.decode()
    assert a.pk and "#2" in shown.content.decode()


def test_a_custom_date_range_applies_to_figures_charts_exports_and_the_trace_list(atlas, root):
    def day(n: int, hour: int = 12):
        return timezone.make_aware(datetime(2026, 1, n, hour))

    for n in (9, 10, 11, 12, 12, 20):
        searched_at(atlas, f"query {n}", day(n))
    searched_at(atlas, "late", day(12, 23))  # the last day counts whole
    client = signed_in(root)
    chosen = {"collection": atlas.pk, "from": "2026-01-10", "to": "2026-01-12"}
    page = client.get(URL, chosen)
    report = page.context["report"]
    assert report.searches == 5 and report.step == "day"
    assert [bucket.searches for bucket in report.series] == [1, 1, 3]
    assert "2026-01-10 to 2026-01-12" in page.content.decode()
    assert "from=2026-01-10" in page.context["export_url"]
    series = rows(client.get(URL, {**chosen, "export": "series"}))
    assert [line[1] for line in series[1:]] == ["1", "1", "3"]
    exported = client.get(URL, {**chosen, "export": "top"})
    assert sorted(line[0] for line in rows(exported)[1:]) == [
        "late",
        "query 10",
        "query 11",
        "query 12",
    ]
    name = 'attachment; filename="search-atlas-top-2026-01-10_2026-01-12.csv"'
    assert exported["Content-Disposition"] == name
    listed = client.get(page.context["traces_url"])
    assert listed.context["cl"].result_count == 5
    one = client.get(URL, {"collection": atlas.pk, "from": "2026-01-12", "to": "2026-01-12"})
    assert one.context["report"].searches == 3 and one.context["report"].step == "hour"


@pytest.mark.parametrize(
    "dates, field",
    [
        ({"from": "2026-01-12", "to": "2026-01-10"}, "to"),  # ends before it starts
        ({"to": "2026-01-10"}, "from"),  # no start
        ({"from": "2026-02-30"}, "from"),  # no such day
        ({"from": "0001-01-01", "to": "0001-01-02"}, "to"),  # before any search
        ({"from": "9999-12-31"}, "to"),  # to (today) before from
        ({"from": "2020-01-01", "to": "2026-01-01"}, "to"),  # longer than a year
        ({"from": "2026-01-01", "to": "9999-12-30"}, "to"),  # millions of daily buckets
    ],
)
def test_a_bad_date_range_is_a_form_error_not_a_server_error(atlas, root, dates, field):
    client = signed_in(root)
    page = client.get(URL, {"collection": atlas.pk, **dates})
    assert page.status_code == 200 and page.context["report"] is None
    assert field in page.context["form"].errors
    assert 'class="errornote"' in page.content.decode()
    exported = client.get(URL, {"collection": atlas.pk, **dates, "export": "top"})
    assert exported["Content-Type"].startswith("text/html")
    listed = client.get(reverse("admin:retrieval_querytrace_changelist"), dates)
    assert listed.status_code == 302 and "e=1" in listed.url  # the admin's "bad filter"


def test_searchers_are_counted_and_shown_only_as_keyed_hashes(atlas, root):
    users = get_user_model().objects
    ann = users.create_user("ann-the-reader", email="ann@example.com")
    for _ in range(2):
        searched_at(atlas, "pole", timezone.now(), user=ann)
    searched_at(atlas, "pole", timezone.now(), user=root)
    client = signed_in(root)
    page = client.get(URL, {"collection": atlas.pk})
    report = page.context["report"]
    assert report.searchers == 2 and report.anonymous == 5
    body = page.content.decode()
    assert searcher_key(ann.pk) in body and 'data-searchers="2"' in body
    exported = client.get(URL, {"collection": atlas.pk, "export": "searchers"}).content.decode()
    assert rows(client.get(URL, {"collection": atlas.pk, "export": "searchers"}))[1][:2] == [
        searcher_key(ann.pk),
        "2",
    ]
    for secret in ("ann-the-reader", "ann@example.com"):
        assert secret not in body and secret not in exported
    with override_settings(SECRET_KEY="another site's key " * 3):
        other = searcher_key(ann.pk)
    assert other != searcher_key(ann.pk)  # keyed: not a plain hash anyone can recompute
