"""Every admin page of the app under axe-core, on a laptop (1280 px) and a phone (390 px),
in a real headless Chromium.

axe-core is injected from the copy ``dev.py`` fetched (see ``tests/support/a11y.py``).
Screenshots of the dashboard, analytics, playground, upload and graph explorer: see
``tests.support.a11y.doc_screenshot``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

import dev
import retrieval
from retrieval.models import Document, EvalSet, IndexRun, Promotion, QueryTrace, SearchClick
from retrieval.services.access import Scope
from retrieval.services.graph.extraction import extract_graph
from retrieval.services.query.search_log import traced_as
from tests.conftest import TOWN, collection_of
from tests.support.a11y import (
    VIEWPORTS,
    axe_script,
    axe_violations,
    contrast,
    doc_screenshot,
    overflow,
)
from tests.support.browser import sign_in
from tools.static_vendor import ensure_all

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def site(graph_settings, retrieval_settings):
    """A collection with a graph, searches, a golden set, a promotion and a finished run."""
    retrieval_settings(TRACE_SAMPLE_RATE=1)
    town = collection_of("town", {f"p{i}": text for i, text in enumerate(TOWN)})
    extract_graph(town)
    for query in ("bob", "bob", "dave trains", "zebra"):
        retrieval.search(query, collection="town", retriever="bm25", scope=Scope.ALL)
    with traced_as("page"):  # a reader's search on the search page, its second result clicked
        found = retrieval.search("dave", collection="town", retriever="bm25", scope=Scope.ALL)
    clicked = QueryTrace.objects.get(query="dave")
    SearchClick.objects.create(trace=clicked, document=found[-1].chunk.document, position=2)
    EvalSet.objects.create(name="gold", collection=town)
    Promotion.objects.create(
        collection=town, query="bob*", document=Document.objects.get(external_id="p0")
    )
    IndexRun.objects.create(collection=town, task="ingest", status="succeeded", documents_total=4)
    return town


@pytest.fixture
def pages(site, chromium, live_server, django_user_model) -> Iterator[object]:
    """Return ``open(viewport)``: a signed-in superuser's page at that viewport's size."""
    user = django_user_model(**{django_user_model.USERNAME_FIELD: "a11y-admin"})
    user.is_staff = user.is_superuser = True
    user.set_password("a11y-pass")
    user.save()
    contexts = []

    def open_page(viewport: str) -> object:
        context = chromium.new_context(viewport=VIEWPORTS[viewport])
        context.set_default_timeout(20_000)
        contexts.append(context)
        page = context.new_page()
        sign_in(page, live_server, "a11y-admin", "a11y-pass")
        return page

    yield open_page
    for context in contexts:
        context.close()


def admin_pages(town) -> dict[str, str]:
    """Name -> path of every admin page of the app, for the ``site`` fixture's data."""
    document = Document.objects.get(external_id="p0")
    trace = QueryTrace.objects.get(query="dave")  # a clicked search
    run = IndexRun.objects.latest("pk")
    eval_set = EvalSet.objects.get()
    today = timezone.localdate()
    admin = "/admin/retrieval"
    return {
        "dashboard": f"{admin}/",
        "collections": f"{admin}/collection/",
        "documents": f"{admin}/document/",
        "document": f"{admin}/document/{document.pk}/change/",
        "upload": f"{admin}/document/add/",
        "chunks": f"{admin}/chunk/",
        "chunk": f"{admin}/chunk/{document.chunks.first().pk}/change/",
        "triples": f"{admin}/triple/",
        "runs": f"{admin}/indexrun/",
        "run": f"{admin}/indexrun/{run.pk}/change/",
        "traces": f"{admin}/querytrace/",
        "trace": f"{admin}/querytrace/{trace.pk}/change/",
        "analytics": f"{admin}/querytrace/analytics/?collection={town.pk}&period=7d",
        "analytics of days": f"{admin}/querytrace/analytics/?collection={town.pk}"
        f"&from={today - timedelta(days=1)}&to={today}",
        "clicks": f"{admin}/searchclick/",
        "playground": f"{admin}/collection/playground/?collection={town.pk}&query=bob",
        "golden sets": f"{admin}/evalset/",
        "golden set": f"{admin}/evalset/{eval_set.pk}/change/",
        "add to a golden set": f"{admin}/evalset/add-query/?collection={town.pk}&query=zebra",
        "import a golden set": f"{admin}/evalset/import/",
        "evaluation runs": f"{admin}/evalrun/",
        "graph": f"{admin}/entity/",
        "graph explorer": reverse("admin:retrieval_graph_explorer", args=[town.pk]),
        "promotions": f"{admin}/promotion/",
        "promotion": f"{admin}/promotion/add/",
    }


DOC_PAGES = ("dashboard", "analytics", "playground", "upload")


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_every_admin_page_is_axe_clean_and_fits(viewport, site, pages, live_server):
    ensure_all()  # the graph explorer's drawing library; dev.py has normally fetched it
    page = pages(viewport)
    problems = []
    for name, path in admin_pages(site).items():
        response = page.goto(live_server.url + path)
        assert response.status == 200, f"{name}: {response.status}"
        if name == "graph explorer":
            show_bob(page)
        for violation in axe_violations(page):
            problems.append(
                f"{name}: {violation['id']} ({violation['help']}) at {violation['targets'][:3]}"
            )
        if wide := overflow(page):
            problems.append(f"{name}: {wide} px wider than the {viewport} screen")
        if name in DOC_PAGES or name == "graph explorer":
            doc_screenshot(page, f"{name.replace(' ', '-')}-{viewport}")
    assert problems == []


def show_bob(page) -> None:
    page.fill("#graph-entity", "Bob")
    page.click("#graph-search button[type=submit]")
    page.wait_for_selector('#graph[data-node-count="3"]')


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_the_graph_has_a_text_alternative_and_room_on_a_phone(viewport, site, pages, live_server):
    ensure_all()
    page = pages(viewport)
    page.goto(live_server.url + reverse("admin:retrieval_graph_explorer", args=[site.pk]))
    show_bob(page)
    # The drawing takes the page's width on a phone, and most of it beside the details.
    room = page.locator("#graph-explorer").bounding_box()["width"]
    assert page.locator("#graph").bounding_box()["width"] >= 0.9 * min(room, 600)
    assert page.get_attribute("#graph", "role") == "img"

    # The table lists the drawing's triples; its buttons expand an entity, as a click does.
    rows = page.locator("#graph-table tbody tr")
    assert rows.count() == 2
    assert sorted(rows.all_inner_texts()) == [
        "Alice\tknows\tBob\t0.40\tp2",
        "Bob\towns\tCarol Corp\t0.90\tp0",
    ]
    page.locator("#graph-table button", has_text="Carol Corp").click()
    page.wait_for_selector('#graph[data-node-count="4"]')
    assert "Carol Corp\temploys\tDave\t0.70\tp1" in page.locator("#graph-table").inner_text()


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_the_analytics_charts_read_without_colour(viewport, site, pages, live_server):
    page = pages(viewport)
    page.goto(live_server.url + admin_pages(site)["analytics"])
    chart = page.locator("[data-chart='latency'] > svg")
    assert chart.bounding_box()["width"] <= VIEWPORTS[viewport]["width"]
    colours = page.eval_on_selector_all(
        "[data-chart] svg polyline, [data-chart] svg rect, .retrieval-legend i",
        "nodes => nodes.map(n => n.getAttribute('stroke') || n.getAttribute('fill')"
        " || n.style.backgroundColor)",
    )
    hex_colours = {c for c in colours if c and c.startswith("#")}
    assert hex_colours and all(contrast(c) >= 3 for c in hex_colours), hex_colours
    # p50 and p95 differ by dash pattern and marker shape, and are named on the chart.
    dashes = {
        series: page.get_attribute(f"polyline[data-series='{series}']", "stroke-dasharray")
        for series in ("p50", "p95")
    }
    assert dashes["p50"] != dashes["p95"]
    assert chart.locator("circle").count() >= 1 and chart.locator("rect").count() >= 1
    assert sorted(chart.locator("text", has_text=re.compile("^p\\d\\d$")).all_text_contents()) == [
        "p50",
        "p95",
    ]
    # Their figures, as a table.
    page.click(".retrieval-data summary")
    table = page.locator(".retrieval-data table")
    assert table.locator("thead th").all_text_contents() == [
        "day",
        "searches",
        "no results",
        "p50 ms",
        "p95 ms",
    ]
    today = [row for row in table.locator("tbody tr").all_inner_texts() if "\t5\t" in row]
    # 5 searches (dave on the page), zebra found nothing.
    assert len(today) == 1 and today[0].split("\t")[2] == "1"


def test_judging_keeps_the_editors_place(site, pages, live_server):
    page = pages("desktop")
    page.goto(live_server.url + admin_pages(site)["playground"])
    forms = page.locator("form.retrieval-judge")
    assert forms.count() >= 2
    second = forms.nth(1)
    anchor = second.get_attribute("id")
    second.get_by_role("button", name="Relevant", exact=True).focus()
    page.keyboard.press("Enter")
    page.wait_for_selector(".messagelist .success")
    # Back at the judged result, scrolled into view, the next Tab press within its form.
    assert page.url.endswith(f"#{anchor}")
    assert "gold: relevant (1)" in page.locator(f"#{anchor}").inner_text()
    assert page.evaluate(
        "id => { const r = document.getElementById(id).getBoundingClientRect();"
        " return r.top >= 0 && r.bottom <= window.innerHeight; }",
        anchor,
    )
    page.keyboard.press("Tab")
    assert page.evaluate(
        "id => document.getElementById(id).contains(document.activeElement)", anchor
    )


def test_without_axe_core_the_tests_fail_naming_dev_py(monkeypatch, tmp_path):
    monkeypatch.setattr(dev, "AXE_DIR", tmp_path / "axe-core-0")
    with pytest.raises(AssertionError, match=r"run `python3 dev\.py test`"):
        axe_script()
