"""Editors' relevance rules written in the admin, seen on the search page, in a real
headless Chromium on a desktop and a phone: a synonym finds what the query's own words did
not, a hidden document leaves the results of the queries its pattern matches only."""

from __future__ import annotations

import re

import pytest

from retrieval.models import HiddenResult, Synonym
from tests.conftest import editor
from tests.support.a11y import VIEWPORTS, axe_violations, overflow
from tests.support.browser import sign_in
from tests.test_search_page import atlas  # noqa: F401  (a fixture)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def titles(page, live_server, query: str) -> list[str]:
    """Search the page for ``query``; return the results' titles, best first."""
    page.goto(f"{live_server.url}/")
    page.fill("input[name=q]", query)
    with page.expect_navigation():
        page.keyboard.press("Enter")
    return page.locator(".retrieval-result h3").all_inner_texts()


def clean(page, where: str, problems: list[str]) -> None:
    """Add what axe-core finds on ``page`` and any sideways scroll to ``problems``."""
    problems += [f"{where}: {v['id']} at {v['targets'][:3]}" for v in axe_violations(page)]
    if wide := overflow(page):
        problems.append(f"{where}: {wide} px wider than the screen")


@pytest.mark.parametrize("screen", sorted(VIEWPORTS))
def test_an_editors_synonym_and_hidden_result_change_the_next_search(
    atlas,  # noqa: F811
    chromium,
    live_server,
    screen,
):
    editor("ed", is_staff=True)
    context = chromium.new_context(viewport=VIEWPORTS[screen])
    context.set_default_timeout(20_000)
    page = context.new_page()
    admin = f"{live_server.url}/admin/retrieval"
    problems: list[str] = []
    try:
        sign_in(page, live_server, "ed", "x")
        assert titles(page, live_server, "magma") == []
        assert "No results." in page.locator("main").inner_text()
        penguins = titles(page, live_server, "penguins")
        assert "Penguins waddle; a note." in penguins

        # A two-way synonym: a query saying magma now also looks for molten.
        page.goto(f"{admin}/synonym/add/")
        page.select_option("#id_collection", label="atlas")
        page.fill("#id_rule", "magma, molten")
        clean(page, "add a synonym", problems)
        page.click("input[name=_save]")
        page.wait_for_url(re.compile(r".*/synonym/$"))
        assert Synonym.objects.get().rule == "magma, molten"
        assert titles(page, live_server, "magma") == ["Volcanoes erupt molten rock."]
        clean(page, "results found by a synonym", problems)

        # The note hidden from every query starting with "penguin".
        page.goto(f"{admin}/hiddenresult/add/")
        page.select_option("#id_collection", label="atlas")
        page.fill("#id_query", "penguin*")
        page.click("#hiddenresult_form .select2-selection")  # the document's autocomplete
        page.fill(".select2-search__field", "note")
        page.locator(".select2-results__option", has_text="Penguins waddle").click()
        page.fill("#id_note", "Not about Antarctica.")
        clean(page, "hide a result", problems)
        page.click("input[name=_save]")
        page.wait_for_url(re.compile(r".*/hiddenresult/$"))
        hidden = HiddenResult.objects.select_related("document").get()
        assert (hidden.pattern, hidden.document.external_id) == ("penguin%", "note.txt")

        shown = titles(page, live_server, "penguins")
        assert "Penguins waddle; a note." not in shown
        assert shown == [t for t in penguins if t != "Penguins waddle; a note."] and shown
        clean(page, "results with a hidden one", problems)
        # Another query still finds it.
        assert titles(page, live_server, "waddle") == ["Penguins waddle; a note."]
        assert problems == []
    finally:
        context.close()
