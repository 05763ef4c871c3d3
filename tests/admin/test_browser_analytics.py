"""Search analytics from real traffic, in a real headless Chromium on a desktop and a phone:
a reader searches and clicks on the search page, an editor reads the figures for a range of
days; editors' own searches (the playground's) count only when asked for."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from retrieval.models import QueryTrace, SearchClick
from tests.conftest import editor
from tests.support.a11y import VIEWPORTS, axe_violations, overflow
from tests.test_search_page import atlas, eventually, search  # noqa: F401  (a fixture)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def site(atlas, django_user_model):  # noqa: F811
    """The atlas collection, a reader and an editor (staff with every permission of the app)."""
    django_user_model.objects.create_user(username="reader", password="x")
    editor("ed", is_staff=True)
    return atlas


def analytics(page, live_server, collection, **form) -> str:
    """Open the collection's analytics, fill ``form`` (field id -> value, True ticks a box),
    press Show; return the summary's text."""
    page.goto(f"{live_server.url}/admin/retrieval/querytrace/analytics/?collection={collection.pk}")
    for field, value in form.items():
        if value is True:
            page.check(f"#id_{field}")
        else:
            page.fill(f"#id_{field}", value)
    with page.expect_navigation():
        page.click("#retrieval-analytics-form input[type=submit]")
    return " ".join(page.locator(".retrieval-summary[data-searches]").inner_text().split())


def rows(page, table: str) -> dict[str, list[str]]:
    """A table of the analytics: query -> its cells."""
    found = {}
    for row in page.locator(f"#retrieval-{table} tbody tr[data-query]").all():
        found[row.get_attribute("data-query")] = row.locator("td").all_inner_texts()
    return found


def assert_clean(page) -> None:
    assert axe_violations(page) == []
    assert overflow(page) == 0


@pytest.mark.parametrize("screen", sorted(VIEWPORTS))
def test_a_readers_clicks_show_in_the_analytics_of_their_days(site, signed_in, live_server, screen):
    reader = signed_in(VIEWPORTS[screen], "reader")
    reader.goto(f"{live_server.url}/")
    search(reader, "penguins")
    second = reader.locator(".retrieval-result").nth(1)
    second.locator("h3 a").click()
    reader.wait_for_url("**/documents/*/#chunk-*")
    assert eventually(reader, lambda: SearchClick.objects.exists())
    assert SearchClick.objects.get().position == 2
    reader.goto(f"{live_server.url}/")
    search(reader, "volcanoes")  # read, not clicked

    page = signed_in(VIEWPORTS[screen], "ed")
    today = timezone.localdate()
    before = {"from": (today - timedelta(days=30)).isoformat(), "to": str(today - timedelta(1))}
    summary = analytics(page, live_server, site, **before)
    assert summary.startswith("0 searches in the days")
    assert rows(page, "top") == {}

    summary = analytics(page, live_server, site, **{"from": str(today), "to": str(today)})
    assert summary.startswith(f"2 searches in the days {today} to {today}")
    assert "50.0% click-through rate (1 of 2 searches" in summary
    assert "mean click position 2.0" in summary
    assert "readers' searches only" in summary
    top = rows(page, "top")
    assert sorted(top) == ["penguins", "volcanoes"]
    assert top["penguins"][1:5] == ["1", "0", "100.0%", "2.0"]  # searches, empty, CTR, position
    assert top["volcanoes"][3:5] == ["0.0%", "—"]
    assert list(rows(page, "no-clicks")) == ["volcanoes"]
    assert_clean(page)


@pytest.mark.parametrize("screen", sorted(VIEWPORTS))
def test_an_editors_own_searches_count_only_when_asked_for(site, signed_in, live_server, screen):
    reader = signed_in(VIEWPORTS[screen], "reader")
    reader.goto(f"{live_server.url}/")
    search(reader, "penguins")

    page = signed_in(VIEWPORTS[screen], "ed")
    page.goto(f"{live_server.url}/admin/retrieval/collection/playground/?collection={site.pk}")
    page.fill("#id_query", "volcanoes")
    with page.expect_navigation():
        page.click("#retrieval-playground-form input[type=submit]")
    tested = QueryTrace.objects.filter(source=QueryTrace.Source.PLAYGROUND, query="volcanoes")
    assert tested.count() >= 1 and tested.filter(user__username="ed").exists()

    summary = analytics(page, live_server, site)
    assert not page.is_checked("#id_editors")
    assert summary.startswith("1 search in the last 7 days")
    assert "readers' searches only" in summary
    assert list(rows(page, "top")) == ["penguins"]
    assert_clean(page)

    summary = analytics(page, live_server, site, editors=True)
    assert "editors=on" in page.url
    assert page.is_checked("#id_editors")
    assert summary.startswith(f"{1 + tested.count()} searches in the last 7 days")
    assert "editors' searches included" in summary
    assert sorted(rows(page, "top")) == ["penguins", "volcanoes"]
    assert_clean(page)
