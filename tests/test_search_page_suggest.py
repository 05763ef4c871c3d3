"""Query suggestions in the search box, in a real headless Chromium, on a desktop and a phone.

The box is an ARIA combobox fed by ``GET /api/suggest/`` (which decides who is offered
what, see ``tests/api/test_suggest.py``); without JavaScript it is a plain search form.
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth import get_user_model
from django.db.models import Q

import retrieval
from retrieval.models import BlockedSuggestion, QueryTrace
from retrieval.services.access import Scope
from retrieval.services.query.search_log import traced_as
from tests.support.a11y import VIEWPORTS, axe_violations, overflow
from tests.test_search_page import atlas, search  # noqa: F401  (a fixture)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def all_but_notes_for_guests(user):
    """DOCUMENT_ACCESS for these tests: "guest" may not read the note; others read all."""
    return ~Q(external_id="note.txt") if user.username == "guest" else Q()


@pytest.fixture
def asked(atlas, retrieval_settings):  # noqa: F811
    """Three readers searched the page for "penguins antarctica" and "penguins casino" (an
    editor blocked the latter), and found something; "guest" may not read a note."""
    retrieval_settings(DOCUMENT_ACCESS="tests.test_search_page_suggest.all_but_notes_for_guests")
    model = get_user_model()
    for name in ("ann", "bob", "cat", "dan", "guest"):
        model.objects.create_user(username=name, password="x")
    for name in ("ann", "bob", "cat"):
        scope = Scope.for_user(model.objects.get(username=name))
        for query in ("penguins antarctica", "penguins casino"):
            with traced_as(QueryTrace.Source.PAGE):
                assert retrieval.search(query, collection="atlas", scope=scope)
    BlockedSuggestion.objects.create(collection=atlas, query="*casino*")
    assert QueryTrace.objects.filter(user__username="cat", result_count__gt=0).count() == 2
    return atlas


def type_and_wait(page, text: str) -> list[str]:
    """Type ``text`` into the search box; return what the endpoint suggested for it."""
    box = page.locator("#retrieval-q")
    box.fill("")
    with page.expect_response(lambda r: asked_for(r.url) == text) as answer:
        box.press_sequentially(text)
    return answer.value.json()["suggestions"]


def asked_for(url: str) -> str | None:
    """The text a request to the suggestions endpoint asked about (None: another request)."""
    parts = urlsplit(url)
    return parse_qs(parts.query).get("q", [None])[0] if parts.path == "/api/suggest/" else None


def options(page) -> list[str]:
    return page.locator("#retrieval-suggestions [role=option]").all_inner_texts()


@pytest.mark.parametrize("screen", sorted(VIEWPORTS))
def test_the_box_suggests_what_readers_found_never_a_blocked_query(
    asked, signed_in, live_server, screen
):
    page = signed_in(VIEWPORTS[screen], "dan")
    page.goto(f"{live_server.url}/")
    box = page.locator("#retrieval-q")
    assert box.get_attribute("role") == "combobox"
    assert box.get_attribute("aria-expanded") == "false"
    assert type_and_wait(page, "pen") == ["penguins antarctica"]
    listbox = page.get_by_role("listbox", name="Suggestions")
    listbox.wait_for()
    assert options(page) == ["penguins antarctica"]  # "penguins casino" is blocked
    assert box.get_attribute("aria-expanded") == "true"
    assert box.get_attribute("aria-controls") == "retrieval-suggestions"
    assert page.locator("#retrieval-suggestions-status").inner_text() == "1 suggestion."
    assert axe_violations(page) == []
    assert overflow(page) == 0, f"the open suggestions scroll sideways on a {screen}"

    # Down selects the suggestion; Escape closes the list and keeps what was typed.
    box.press("ArrowDown")
    option = page.get_by_role("option", name="penguins antarctica")
    assert option.get_attribute("aria-selected") == "true"
    assert box.get_attribute("aria-activedescendant") == option.get_attribute("id")
    box.press("Escape")
    assert listbox.is_hidden() and box.get_attribute("aria-expanded") == "false"
    assert box.get_attribute("aria-activedescendant") is None
    assert box.input_value() == "pen"
    # Up reopens it on the last suggestion; Enter searches for it.
    box.press("ArrowUp")
    assert option.get_attribute("aria-selected") == "true"
    box.press("Enter")
    page.wait_for_url("**q=penguins+antarctica*")
    page.wait_for_selector(".retrieval-result")
    assert box.input_value() == "penguins antarctica"
    assert page.locator(".retrieval-result h3").first.inner_text() == "Field guide"
    assert QueryTrace.objects.filter(user__username="dan").count() == 1


@pytest.mark.parametrize("screen", sorted(VIEWPORTS))
def test_a_reader_who_may_not_read_everything_is_offered_nothing(
    asked, signed_in, live_server, screen
):
    page = signed_in(VIEWPORTS[screen], "guest")
    page.goto(f"{live_server.url}/")
    # The popular query may come from what she cannot read: the endpoint offers none.
    assert type_and_wait(page, "pen") == []
    assert page.locator("#retrieval-suggestions").is_hidden()
    assert options(page) == []
    assert page.locator("#retrieval-q").get_attribute("aria-expanded") == "false"


def test_without_javascript_the_box_is_a_plain_search_form(asked, signed_in, live_server):
    page = signed_in(VIEWPORTS["phone"], "dan", java_script_enabled=False)
    page.goto(f"{live_server.url}/")
    assert page.locator("#retrieval-q").get_attribute("role") is None  # no dead combobox
    assert page.locator("#retrieval-suggestions").is_hidden()
    search(page, "penguins antarctica")
    assert "q=penguins+antarctica" in page.url
    assert page.locator(".retrieval-result h3").first.inner_text() == "Field guide"
