"""The public search page, driven in a real headless Chromium, on a desktop and a phone."""

from __future__ import annotations

import pytest

from retrieval.models import Collection, Judgment, SearchClick
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.ingest import Source, ingest
from tests.conftest import editor
from tests.support.a11y import doc_screenshot
from tests.support.browser import screenshot

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

SCREENS = {"desktop": {"width": 1280, "height": 900}, "phone": {"width": 390, "height": 844}}

GUIDE_MD = b"""# Field guide

## Antarctic birds

Penguins live in Antarctica, where emperor penguins huddle through the winter.

Adelie penguins nest on bare rock along the coast.
"""


@pytest.fixture
def atlas(keyword_settings, retrieval_settings):
    retrieval_settings(TRACE_SAMPLE_RATE=1, SEARCH_PAGE_FACETS=["kind"])
    collection, _ = get_or_create_collection("atlas")
    ingest(
        collection,
        [
            Source(
                external_id="guide.md",
                data=GUIDE_MD,
                filename="guide.md",
                mime_type="text/markdown",
                metadata={"kind": "guide"},
            ),
            Source.from_text(
                "Volcanoes erupt molten rock.", external_id="geology.txt", metadata={"kind": "note"}
            ),
            Source.from_text(
                "Penguins waddle; a note.", external_id="note.txt", metadata={"kind": "note"}
            ),
        ],
    )
    Collection.objects.update(default_retriever="bm25")
    return collection


def sign_in(page, live_server, username: str) -> None:
    page.goto(live_server.url + "/")
    # The example project keeps the page behind its login form.
    page.wait_for_url(f"{live_server.url}/accounts/login/?next=/")
    page.fill("#id_username", username)
    page.fill("#id_password", "x")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")


def search(page, query: str) -> None:
    page.fill("input[name=q]", query)
    page.keyboard.press("Enter")
    page.wait_for_selector(".retrieval-result")


def fits(page) -> bool:
    """True if the page needs no sideways scrolling."""
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


#: Links, buttons and form fields with no accessible name (no label, no text).
UNNAMED = """() => Array.from(document.querySelectorAll(
    'a[href], button, input:not([type=hidden]), select, textarea, summary'))
  .filter(e => !((e.labels && e.labels.length) || e.getAttribute('aria-label')
                 || e.getAttribute('aria-labelledby') || e.textContent.trim()))
  .map(e => e.outerHTML)"""


def eventually(page, check) -> bool:
    """Wait (in the browser's clock) until ``check()`` holds: a beacon lands on its own."""
    for _ in range(100):
        if check():
            return True
        page.wait_for_timeout(100)
    return check()


@pytest.mark.parametrize("screen", sorted(SCREENS))
def test_search_open_a_result_and_its_click_is_recorded(
    atlas, chromium, live_server, django_user_model, screen
):
    django_user_model.objects.create_user(username="reader", password="x")
    context = chromium.new_context(viewport=SCREENS[screen])
    page = context.new_page()
    try:
        sign_in(page, live_server, "reader")
        search(page, "penguins antarctica")
        first = page.locator(".retrieval-result").first
        assert first.locator("h3").inner_text() == "Field guide"
        assert first.locator("mark").first.inner_text() == "Penguins"
        assert first.locator(".retrieval-breadcrumb").inner_text().split() == [
            "Field",
            "guide",
            "Antarctic",
            "birds",
        ]
        assert page.locator(".retrieval-result").count() == 2  # one entry per document
        assert page.evaluate(UNNAMED) == []
        page.keyboard.press("Tab")
        assert page.evaluate("document.activeElement.textContent") == "Skip to content"
        more = first.locator("details.retrieval-more")
        if more.count():
            more.locator("summary").click()
            assert more.locator("li").first.is_visible()
        assert fits(page), f"the results page scrolls sideways on a {screen}"
        assert doc_screenshot(page, f"search-page-{screen}").stat().st_size > 0
        assert page.locator(".retrieval-vote").count() == 0  # a reader may not judge

        page.get_by_role("link", name="guide (1)").click()  # the facet: guides only
        page.wait_for_url("**facet=kind%3Aguide*")
        assert page.locator(".retrieval-result").count() == 1
        assert page.get_by_role("link", name="guide (1)").get_attribute("aria-current") == "true"
        assert fits(page)
        first = page.locator(".retrieval-result").first
        first.locator("h3 a").click()
        page.wait_for_url("**/documents/*/#chunk-*")
        assert "Adelie penguins nest on bare rock" in page.locator("article").inner_text()
        assert fits(page), f"the document page scrolls sideways on a {screen}"
        assert screenshot(page, f"document-page-{screen}").stat().st_size > 0
        assert eventually(page, lambda: SearchClick.objects.exists())
        click = SearchClick.objects.select_related("trace", "document").get()
        assert (click.document.external_id, click.position) == ("guide.md", 1)
        assert (click.trace.query, click.trace.user.username) == ("penguins antarctica", "reader")
    finally:
        context.close()


@pytest.mark.parametrize("screen", sorted(SCREENS))
def test_an_editor_votes_on_a_result_in_place(atlas, chromium, live_server, screen):
    editor("judge")  # every permission of the app, password "x"
    context = chromium.new_context(viewport=SCREENS[screen])
    page = context.new_page()
    try:
        sign_in(page, live_server, "judge")
        search(page, "penguins")
        vote = page.locator(".retrieval-result").first.locator(".retrieval-vote")
        vote.get_by_role("button", name="Yes").click()
        page.wait_for_selector("text=Thanks, your vote is recorded.")
        assert page.url.startswith(f"{live_server.url}/?")  # voted in place
        assert vote.get_by_role("button", name="Yes").get_attribute("aria-pressed") == "true"
        judgment = Judgment.objects.get()
        assert (judgment.grade, judgment.status, judgment.query.text) == (
            1,
            Judgment.Status.CANDIDATE,
            "penguins",
        )
        assert fits(page)
    finally:
        context.close()


@pytest.mark.parametrize("screen", sorted(SCREENS))
def test_the_answer_streams_in_place_with_its_source_links(
    atlas, chromium, live_server, django_user_model, llm_server, screen
):
    django_user_model.objects.create_user(username="reader", password="x")
    llm_server.queue_chat("Emperor penguins huddle through the winter [1][5].")
    context = chromium.new_context(viewport=SCREENS[screen])
    page = context.new_page()
    try:
        sign_in(page, live_server, "reader")
        search(page, "penguins antarctica")
        results_url = page.url
        page.get_by_role("link", name="Answer this question from the documents").click()
        source = page.locator(".retrieval-answer-sources li a")
        source.wait_for()
        assert page.url == results_url  # answered in place, by the script
        text = page.locator(".retrieval-answer-text")
        assert text.inner_text() == "Emperor penguins huddle through the winter [1]."
        assert text.locator("a.retrieval-cite").get_attribute("href") == "#retrieval-source-1"
        assert source.inner_text() == "Field guide"
        assert "[5]" not in page.locator(".retrieval-answer").inner_text()
        (sent,) = llm_server.requests_to("/v1/chat/completions")
        assert sent.body["stream"] is True
        assert fits(page), f"the streamed answer scrolls sideways on a {screen}"
        assert screenshot(page, f"search-page-answer-{screen}").stat().st_size > 0
        source.click()
        page.wait_for_url("**/documents/*/#chunk-*")
        assert "emperor penguins huddle" in page.locator("article").inner_text()
    finally:
        context.close()
