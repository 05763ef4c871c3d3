"""Golden sets, evaluation runs and traces in a real headless Chromium.

Screenshots go to ``test-artifacts/quality-*.png`` (not committed).
"""

from __future__ import annotations

import re

import pytest

from retrieval.models import EvalRun, EvalSet, Judgment, QueryTrace
from tests.conftest import collection_of
from tests.support.browser import screenshot

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

TEXTS = {
    "river": "the river runs north",
    "sun": "the sun rises east",
    "hill": "up the hill",
    "mix": "north east up",
}


def test_judge_evaluate_compare_and_read_a_trace(
    keyword_settings, retrieval_settings, browser_page, live_server, admin_login
):
    retrieval_settings(
        TRACE_SAMPLE_RATE=1,
        PIPELINES={
            "lexical": {"retrievers": {"bm25": 1.0}},
            "semantic": {"retrievers": {"dense": 1.0}},
        },
    )
    atlas = collection_of("atlas", TEXTS)
    EvalSet.objects.create(name="gold", collection=atlas)
    page = browser_page
    admin_login(page, live_server)
    base = f"{live_server.url}/admin/retrieval"

    # Judge results in the playground: each press records a judgment and comes back.
    for query, document, button in [
        ("hill", "hill", "Relevant"),
        ("hill", "mix", "Not relevant"),
        ("river north", "river", "Relevant"),
    ]:
        page.goto(f"{base}/collection/playground/")
        page.select_option("#id_collection", str(atlas.pk))
        page.fill("#id_query", query)
        page.select_option("#id_left", "bm25")
        page.select_option("#id_right", "dense")
        page.click("#retrieval-playground-form input[type=submit]")
        result = page.locator(
            "section[data-searcher='dense'] .retrieval-result", has_text=TEXTS[document]
        )
        result.get_by_role("button", name=button, exact=True).click()
        page.wait_for_selector(".messagelist .success")
        verdict = "relevant (1)" if button == "Relevant" else "not relevant"
        assert (
            f"gold: {verdict}"
            in page.locator(
                "section[data-searcher='dense'] .retrieval-result", has_text=TEXTS[document]
            ).inner_text()
        )
    screenshot(page, "quality-playground-judged")
    assert Judgment.objects.filter(query__eval_set__name="gold").count() == 3

    # Evaluate the set with two pipelines through the changelist action.
    for pipeline in ("lexical", "semantic"):
        page.goto(f"{base}/evalset/")
        page.locator("#result_list input.action-select").first.check()
        page.select_option("select[name=action]", "evaluate_sets")
        page.click("button[name=index]")
        page.select_option("#id_pipeline", pipeline)
        page.click("input[name=apply]")
        page.wait_for_url(re.compile(r".*/admin/retrieval/evalrun/$"))
        assert "succeeded" in page.locator(".messagelist").inner_text()
    assert EvalRun.objects.filter(status="succeeded").count() == 2
    screenshot(page, "quality-eval-runs")

    # Compare them: select both runs, run the compare action.
    page.locator("#action-toggle").check()
    page.select_option("select[name=action]", "compare_runs")
    page.click("button[name=index]")
    page.wait_for_url(re.compile(r".*/evalrun/compare/\?first=\d+&second=\d+$"))
    assert page.locator("[data-count=losses]").inner_text() == "1 loss"
    assert page.locator("tr.retrieval-loss").first.get_attribute("data-query") == "q1"
    screenshot(page, "quality-compare")

    # The set's page draws its metric history.
    page.goto(f"{base}/evalset/")
    page.locator("#result_list tbody th a", has_text="gold").click()
    page.wait_for_selector(".retrieval-chart svg")
    chart = page.locator(".retrieval-chart svg")
    assert chart.locator("polyline").count() == 4 and chart.locator("circle").count() == 8
    screenshot(page, "quality-history")

    # Traces: the playground's searches were kept; one trace's page, then replay it.
    # Three searches and three reloads after judging, two sides each.
    assert QueryTrace.objects.count() == 12
    page.goto(f"{base}/querytrace/?pipeline=retriever:dense")
    page.locator("#result_list tbody th a").first.click()
    page.wait_for_url(re.compile(r".*/querytrace/\d+/change/"))
    page.wait_for_selector("#retrieval-results")
    assert page.locator("#retrieval-results tbody tr").count() == 4
    screenshot(page, "quality-trace")
    page.select_option("#id_right", "pipeline:lexical")
    page.click(".retrieval-replay input[type=submit]")
    page.wait_for_selector("section[data-searcher='pipeline:lexical'] .retrieval-result")
    assert page.locator("#id_left").input_value() == "dense"
    screenshot(page, "quality-replay")
