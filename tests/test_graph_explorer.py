"""The graph explorer admin page and its JSON endpoints; drawn in a real headless Chromium."""

from __future__ import annotations

import pytest
from django.urls import reverse

from retrieval.admin import graph as admin_graph
from tests.support.browser import screenshot
from tools.static_vendor import ensure_all


def urls(collection) -> dict[str, str]:
    return {
        name: reverse(f"admin:retrieval_graph_{name}", args=[collection.pk])
        for name in ("explorer", "neighbourhood", "entities")
    }


@pytest.mark.django_db
def test_endpoints_are_staff_only(client, django_user_model, town):
    user = django_user_model(**{django_user_model.USERNAME_FIELD: "reader"})
    user.set_password("pw")
    user.save()
    client.force_login(user)
    for url in urls(town).values():
        response = client.get(url + "?entity=bob")
        assert response.status_code == 302 and "/admin/login/" in response["Location"]


@pytest.mark.django_db
def test_neighbourhood_json_and_its_bad_requests(admin_client, town):
    url = urls(town)["neighbourhood"]
    body = admin_client.get(url, {"entity": "bob", "hops": 2, "min_confidence": 0.5}).json()
    assert {n["id"] for n in body["nodes"]} == {"bob", "carol corp", "dave"}
    assert {e["predicate"] for e in body["edges"]} == {"owns", "employs"}
    assert len(body["chunk_ids"]) == 2
    for params, message in [
        ({}, "Give an entity"),
        ({"entity": "bob", "hops": 9}, "hops must be between 1 and 3"),
        ({"entity": "bob", "hops": "x"}, "hops must be an integer"),
        ({"entity": "bob", "min_confidence": 2}, "min_confidence must be between 0 and 1"),
    ]:
        response = admin_client.get(url, params)
        assert response.status_code == 400 and message in response.json()["error"]
    missing = reverse("admin:retrieval_graph_neighbourhood", args=[town.pk + 1000])
    assert admin_client.get(missing, {"entity": "bob"}).status_code == 404


@pytest.mark.django_db
def test_entity_search_lists_only_entities_some_triple_mentions(admin_client, town):
    town.documents.get(external_id="p3").delete()  # Eve's only triple
    body = admin_client.get(urls(town)["entities"], {"q": "e"}).json()
    assert [e["key"] for e in body["entities"]] == ["alice", "dave"]


@pytest.mark.django_db
def test_page_says_when_the_drawing_library_is_missing(admin_client, town, monkeypatch):
    page = admin_client.get(urls(town)["explorer"]).content.decode()
    assert "Knowledge graph of town" in page and "owns" in page  # predicate filter
    monkeypatch.setattr(admin_graph, "VENDOR_SCRIPT", "retrieval/vendor/missing.js")
    page = admin_client.get(urls(town)["explorer"]).content.decode()
    assert 'id="graph-missing-library"' in page and "python3 tools/static_vendor.py" in page
    changelist = admin_client.get(reverse("admin:retrieval_entity_changelist")).content.decode()
    assert urls(town)["explorer"] in changelist


def rendered_point(page, script: str) -> tuple[float, float]:
    """Page coordinates of a point ``script`` computes in the graph's rendered coordinates."""
    return page.evaluate(
        "(() => { const box = document.getElementById('graph').getBoundingClientRect();"
        f" const p = {script}; return [box.left + p.x, box.top + p.y]; }})()"
    )


def click_until(page, script: str, selector: str, attempts: int = 3) -> None:
    """Click the point ``script`` renders until ``selector`` appears.

    The point is measured again before every click: the admin page may still shift
    (sidebar, fonts) after the graph is drawn, and a loaded machine may take a first
    click for the start of a drag.
    """
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    page.locator("#graph").scroll_into_view_if_needed()
    for attempt in range(attempts):
        page.mouse.click(*rendered_point(page, script))
        try:
            page.wait_for_selector(selector, timeout=10_000)
            return
        except PlaywrightTimeout as e:
            if attempt == attempts - 1:
                status = page.inner_text("#graph-status")
                raise AssertionError(f"{selector} never appeared; the page says: {status}") from e


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_the_graph_draws_and_a_click_expands_a_node(town, browser_page, live_server, admin_login):
    ensure_all()  # dev.py has normally fetched it already
    page = browser_page
    admin_login(page, live_server)
    page.goto(live_server.url + urls(town)["explorer"])
    page.fill("#graph-entity", "Bob")
    page.click("#graph-search button[type=submit]")
    page.wait_for_selector('#graph[data-node-count="3"]')
    assert page.evaluate("window.retrievalGraph.edges().length") == 2

    # Click Carol Corp where Cytoscape drew it: its neighbour Dave joins the graph.
    carol = "window.retrievalGraph.getElementById('carol corp')"
    click_until(page, f"{carol}.renderedPosition()", '#graph[data-node-count="4"]')
    assert page.evaluate("window.retrievalGraph.getElementById('dave').nonempty()")

    # Click an edge: the triple and a link to its source chunk appear.
    employs = f"{carol}.connectedEdges('[predicate = \"employs\"]').renderedMidpoint()"
    click_until(page, employs, "#graph-chunk-link")
    assert "Carol Corp employs Dave" in page.inner_text("#graph-selection")
    assert screenshot(page, "graph-explorer").stat().st_size > 0
    page.click("#graph-chunk-link")
    assert "Carol_Corp employs Dave (0.7)." in page.content()
