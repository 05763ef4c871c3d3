"""The public search page, driven in a real headless Chromium."""

from __future__ import annotations

import pytest

from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.ingest import Source, ingest
from tests.browser import screenshot

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_typing_a_query_shows_the_matching_chunk_first(
    keyword_settings, browser_page, live_server, django_user_model
):
    collection, _ = get_or_create_collection("atlas")
    ingest(
        collection,
        [
            Source.from_text("Penguins live in Antarctica.", external_id="birds.txt"),
            Source.from_text("Volcanoes erupt molten rock.", external_id="geology.txt"),
        ],
    )
    django_user_model.objects.create_user(username="reader", password="reader-pass")
    page = browser_page
    page.goto(live_server.url + "/")
    # The example project keeps the page behind its login form.
    page.wait_for_url(f"{live_server.url}/accounts/login/?next=/")
    page.fill("#id_username", "reader")
    page.fill("#id_password", "reader-pass")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    page.fill("input[name=q]", "penguins antarctica")
    page.keyboard.press("Enter")
    page.wait_for_selector(".retrieval-score")
    first = page.locator("li").first.inner_text()
    assert "Penguins live in Antarctica." in first
    assert "Volcanoes" not in first
    assert screenshot(page, "search-page").stat().st_size > 0
