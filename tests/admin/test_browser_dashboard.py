"""The dashboard, search analytics and promotions in a real headless Chromium, as a
superuser and as staff who see part of the site.

Screenshots go to ``test-artifacts/dashboard-*.png`` (not committed).
"""

from __future__ import annotations

import csv
import io
import re

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

import retrieval
from retrieval.models import Document, EvalQuery, EvalRun, EvalSet, Promotion, QueryTrace
from retrieval.services.access import Scope
from tests.conftest import collection_of
from tests.support.browser import screenshot

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

HANDBOOK = {
    "a-vpn": "Connect to the VPN with the client from the intranet.",
    "a-leave": "Leave policy: ask your manager two weeks ahead.",
    "b-salaries": "Salary bands are reviewed every spring.",
}


@pytest.fixture
def site(keyword_settings, retrieval_settings):
    """Two collections, a failed document, searches (some finding nothing), evaluations."""
    retrieval_settings(TRACE_SAMPLE_RATE=1)
    handbook = collection_of("handbook", HANDBOOK)
    recipes = collection_of("recipes", {"a-soup": "Boil the leeks, then blend the soup."})
    Document.objects.filter(external_id="b-salaries").update(status="failed", error="bad PDF")
    for query in ["vpn client", "vpn client", "leave policy", "zebra", "zebra", "xylophone"]:
        retrieval.search(query, collection="handbook", retriever="bm25", scope=Scope.ALL)
    retrieval.search("soup", collection="recipes", retriever="bm25", scope=Scope.ALL)
    gold = EvalSet.objects.create(name="handbook gold", collection=handbook)
    for value in (0.61, 0.58, 0.66):
        EvalRun.objects.create(
            eval_set=gold, pipeline="default", status="succeeded", metrics={"ndcg@10": value}
        )
    return {"handbook": handbook, "recipes": recipes}


def sign_in(page, live_server, username: str, *, superuser=False, **grants) -> object:
    model = get_user_model()
    user = model.objects.create_user(username, password="browser-pass", is_staff=True)
    user.is_superuser = superuser
    user.save()
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="retrieval"))
    page.goto(f"{live_server.url}/admin/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", "browser-pass")
    page.click("input[type=submit]")
    page.wait_for_url(f"{live_server.url}/admin/")
    return user


def card(page, collection):
    return page.locator(f".retrieval-card[data-collection='{collection.pk}']")


def value(card, key: str) -> str:
    return card.locator(f"[data-figure='{key}'] .retrieval-value").inner_text()


def test_a_superuser_reads_the_dashboard_analyses_searches_and_promotes(
    site, browser_page, live_server
):
    page = browser_page
    sign_in(page, live_server, "root", superuser=True)
    handbook = site["handbook"]
    base = f"{live_server.url}/admin/retrieval"

    # The landing page: a card per collection above Django's model list.
    page.goto(f"{base}/")
    assert page.locator(".retrieval-card").count() == 2
    assert page.locator("#content-main .app-retrieval").count() == 1  # the model list stays
    hand = card(page, handbook)
    assert value(hand, "documents") == "3" and value(hand, "failed") == "1"
    assert value(hand, "searches_day") == "6" and value(hand, "empty_rate") == "50.0%"
    assert value(hand, "ndcg") == "0.660" and value(hand, "trend") == "+0.080"
    assert hand.locator("[data-figure='sparkline'] svg polyline").count() == 1
    assert "1 document failed" in hand.locator(".retrieval-attention").inner_text()
    screenshot(page, "dashboard-superuser")

    # A figure opens the list behind it.
    hand.locator("[data-figure='failed']").click()
    page.wait_for_url(re.compile(r".*/document/\?.*status__exact=failed"))
    assert page.locator("#result_list tbody tr").count() == 1
    assert "b-salaries" in page.locator("#result_list").inner_text()
    page.go_back()

    # An action says what it replaces, runs once confirmed and comes back to the dashboard.
    card(page, handbook).locator("[data-action='reindex'] button").click()
    page.wait_for_selector("body.retrieval-reindex-confirmation")
    assert "its chunks are replaced" in page.locator("#content").inner_text()
    page.click("#content input[type=submit]")
    page.wait_for_url(f"{base}/")
    assert "handbook: 3 indexed" in page.locator(".messagelist").inner_text().lower()

    # Search analytics from the latency figure: charts, tables, CSV.
    card(page, handbook).locator("[data-figure='latency']").click()
    page.wait_for_url(re.compile(r".*/querytrace/analytics/\?collection=\d+&period=7d"))
    assert page.locator("[data-chart='volume'] svg rect[data-series='searches']").count() >= 1
    assert page.locator("[data-chart='latency'] polyline[data-series='p95']").count() == 1
    top = page.locator("#retrieval-top tbody tr")
    assert top.first.get_attribute("data-query") in ("vpn client", "zebra")
    no_results = page.locator("#retrieval-no-results tbody tr")
    assert no_results.first.get_attribute("data-query") == "zebra"
    assert no_results.count() == 2  # zebra, xylophone
    screenshot(page, "dashboard-analytics")
    with page.expect_download() as download:
        page.locator("#retrieval-no-results .retrieval-csv").click()
    lines = list(csv.reader(io.StringIO(open(download.value.path()).read())))
    assert lines[0] == ["query", "searches", "last seen"] and lines[1][:2] == ["zebra", "2"]

    # "Add to a golden set" from a query that found nothing, then judge in the playground.
    no_results.first.locator(".retrieval-add-golden").click()
    page.wait_for_selector("#retrieval-add-query-form")
    assert page.locator("#id_query").input_value() == "zebra"
    page.click("#retrieval-add-query-form input[type=submit]")
    page.wait_for_url(re.compile(r".*/collection/playground/\?collection=\d+&query=zebra"))
    assert "added in the set" in page.locator(".messagelist").inner_text()
    assert EvalQuery.objects.filter(text="zebra", eval_set__name="handbook gold").exists()

    # Promote the leave policy for every query about leave, from the analytics' row.
    page.goto(f"{base}/querytrace/analytics/?collection={handbook.pk}&period=7d")
    page.locator("#retrieval-top tr[data-query='leave policy'] .retrieval-promote").click()
    page.wait_for_selector("#promotion_form")
    assert page.locator("#id_query").input_value() == "leave policy"
    page.fill("#id_query", "leave*")
    page.click("#promotion_form .select2-selection")  # the document's autocomplete
    page.fill(".select2-search__field", "leave")
    page.locator(".select2-results__option", has_text="Leave policy").click()
    page.click("input[name=_save]")
    page.wait_for_url(re.compile(r".*/promotion/$"))
    promotion = Promotion.objects.get()
    assert promotion.pattern == "leave%" and promotion.document.external_id == "a-leave"

    # Every search about leave now shows it first, marked.
    page.locator("#result_list a", has_text="try it").first.click()
    page.wait_for_selector("section[data-searcher='dense'] .retrieval-result")
    for side in ("bm25", "dense"):
        first = page.locator(f"section[data-searcher='{side}'] .retrieval-result").first
        assert first.locator(".retrieval-promoted").inner_text() == "Promoted"
        assert "Leave policy" in first.inner_text()
    screenshot(page, "dashboard-promoted")
    trace = QueryTrace.objects.filter(query="leave").latest("pk")
    assert trace.results[0]["promoted"] is True


def test_staff_see_only_their_collections_and_their_own_searches(
    site, browser_page, live_server, retrieval_settings
):
    retrieval_settings(
        COLLECTION_ACCESS="tests.admin.test_dashboard.sees",
        DOCUMENT_ACCESS="tests.admin.test_dashboard.team_docs",
    )
    handbook, recipes = site["handbook"], site["recipes"]
    Promotion.objects.create(
        collection=handbook, query="vpn*", document=Document.objects.get(external_id="b-salaries")
    )
    page = browser_page
    base = f"{live_server.url}/admin/retrieval"

    # editor-handbook sees the handbook alone, all of it, and may reindex it.
    sign_in(page, live_server, "editor-handbook")
    page.goto(f"{base}/")
    assert page.locator(".retrieval-card").count() == 1
    hand = card(page, handbook)
    assert value(hand, "documents") == "3" and value(hand, "searches_day") == "6"
    assert hand.locator("[data-action='reindex']").count() == 1
    assert "recipes" not in page.locator("#retrieval-dashboard").inner_text()
    screenshot(page, "dashboard-editor")
    page.goto(f"{base}/querytrace/analytics/")
    options = page.locator("#id_collection option").all_inner_texts()
    assert options == ["handbook"]
    page.click("#logout-form button")  # Django 5's logout is a POST

    # reader-all sees both collections, only the "a-" documents, her own searches.
    reader = sign_in(page, live_server, "reader-all")
    retrieval.search("vpn client", collection="handbook", retriever="bm25", user=reader)
    page.goto(f"{base}/")
    assert page.locator(".retrieval-card").count() == 2
    hand = card(page, handbook)
    assert value(hand, "documents") == "2" and value(hand, "failed") == "0"
    assert value(hand, "searches_day") == "1"  # hers alone
    assert hand.locator("[data-figure='ndcg']").count() == 0  # golden sets are closed to her
    assert hand.locator("[data-action]").count() == 0
    assert value(card(page, recipes), "documents") == "1"
    assert "your own searches" in page.locator(".retrieval-note").inner_text()
    screenshot(page, "dashboard-reader")
    hand.locator("[data-figure='latency']").click()
    page.wait_for_selector("#retrieval-top")
    assert page.locator("#retrieval-top tbody tr").all_inner_texts()[0].startswith("vpn client")
    assert page.locator("#retrieval-top tbody tr").count() == 1
    assert page.locator("#retrieval-feedback").count() == 0
    assert page.locator(".retrieval-add-golden, .retrieval-promote").count() == 0

    # The hidden promoted document is not shown to her; the search is.
    page.goto(f"{base}/collection/playground/?collection={handbook.pk}&query=vpn+client")
    page.wait_for_selector("section[data-searcher='bm25'] .retrieval-result")
    assert page.locator(".retrieval-promoted").count() == 0
    assert "Salary" not in page.locator("#content-main").inner_text()
    promotions = page.goto(f"{base}/promotion/")
    assert promotions.status == 200 and page.locator("#result_list").count() == 0
