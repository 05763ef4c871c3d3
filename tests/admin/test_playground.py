"""The search playground: two retrievers side by side; bad input as messages, never a 500."""

from __future__ import annotations

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db

URL = "admin:retrieval_playground"
PATH = "/v1/chat/completions"


def messages_of(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


def test_two_retrievers_side_by_side_with_hybrid_legs(admin_client, atlas):
    response = admin_client.get(
        reverse(URL),
        {"collection": atlas.pk, "query": "hill", "left": "bm25", "right": "hybrid", "top_k": 5},
    )
    assert response.status_code == 200
    left, right = response.context["columns"]
    assert (left.searcher, right.searcher) == ("bm25", "hybrid")
    assert [item["chunk"].content for item in left.results] == ["Up the hill we go."]
    top = right.results[0]
    assert top["chunk"].content == "Up the hill we go."
    assert dict(top["legs"])["bm25"]["rank"] == 1 and "dense" in dict(top["legs"])
    assert left.results[0]["other_rank"] == 1
    body = response.content.decode()
    assert body.count('class="retrieval-legs"') == len(right.results)
    assert not messages_of(response)


def test_the_choices_are_the_configured_retrievers(admin_client, atlas, retrieval_settings):
    retrieval_settings(
        RETRIEVERS={"bm25-strict": {"BACKEND": "retrieval.services.retrievers.bm25.BM25Retriever"}}
    )
    body = admin_client.get(reverse(URL)).content.decode()
    for alias in ("dense", "bm25", "hybrid", "bm25-strict"):
        assert f'<option value="{alias}"' in body


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"query": ""}, "Query: This field is required."),
        ({"query": "hill", "left": "nope"}, "Left: Select a valid choice."),
        ({"query": "hill", "collection": "999999"}, "Collection: Select a valid choice."),
        (
            {"query": "hill", "top_k": "0"},
            "Top k: Ensure this value is greater than or equal to 1.",
        ),
    ],
)
def test_bad_input_is_a_message(admin_client, atlas, params, message):
    query = {"collection": atlas.pk, "left": "bm25", "right": "dense", "top_k": 5, **params}
    response = admin_client.get(reverse(URL), query)
    assert response.status_code == 200
    assert any(m.startswith(message) for m in messages_of(response)), messages_of(response)
    assert response.context["columns"] == []


def test_a_retriever_that_fails_is_a_message_and_the_other_side_still_answers(
    admin_client, atlas, retrieval_settings
):
    retrieval_settings(RETRIEVERS={"broken": {"BACKEND": "no.such.Retriever"}})
    response = admin_client.get(
        reverse(URL),
        {"collection": atlas.pk, "query": "hill", "left": "broken", "right": "bm25", "top_k": 5},
    )
    assert response.status_code == 200
    left, right = response.context["columns"]
    assert "cannot import BACKEND" in left.error and right.results
    assert any(m.startswith("broken: ") for m in messages_of(response))


def test_only_staff_may_use_it(client, atlas):
    response = client.get(reverse(URL), {"query": "hill"})
    assert response.status_code == 302 and "/login/" in response.url


def test_pipelines_compare_with_retrievers_and_show_the_trace(
    admin_client, atlas, retrieval_settings
):
    retrieval_settings(PIPELINES={"expanded": {"rewriter": "prf", "retrievers": ["bm25"]}})
    response = admin_client.get(
        reverse(URL),
        {
            "collection": atlas.pk,
            "query": "hill",
            "left": "pipeline:expanded",
            "right": "agentic",
            "top_k": 3,
        },
    )
    left, right = response.context["columns"]
    assert not left.error and not right.error, messages_of(response)
    assert '"stage": "rewrite"' in left.trace and '"stage": "pipeline"' in left.trace
    assert '"stage": "agentic_round"' in right.trace
    assert "pipeline expanded" in response.content.decode()  # offered as a choice


def test_a_comparison_another_site_links_to_is_shown_but_not_traced(
    admin_client, atlas, retrieval_settings
):
    from retrieval.models import QueryTrace

    retrieval_settings(TRACE_SAMPLE_RATE=1)
    params = {"collection": atlas.pk, "query": "hill", "left": "bm25", "right": "dense"}
    planted = admin_client.get(reverse(URL), params, HTTP_SEC_FETCH_SITE="cross-site")
    assert [c.searcher for c in planted.context["columns"]] == ["bm25", "dense"]
    assert not QueryTrace.objects.exists()
    admin_client.get(reverse(URL), params, HTTP_SEC_FETCH_SITE="same-origin")
    assert QueryTrace.objects.count() == 2


def test_the_answer_tab_answers_beside_the_results_and_stays_out_of_analytics(
    admin_client, atlas, retrieval_settings, llm_server
):
    from retrieval.models import QueryTrace
    from retrieval.services.quality.analytics import readers_only

    retrieval_settings(TRACE_SAMPLE_RATE=1)
    llm_server.queue_chat("North is up [1][8].")
    params = {"collection": atlas.pk, "query": "north up", "left": "bm25", "right": "dense"}
    plain = admin_client.get(reverse(URL), params)
    assert plain.context["answer"] is None and llm_server.requests_to(PATH) == []
    tab = [t for t in plain.context["tabs"] if t["label"] == "Answer"][0]
    assert "answer=1" in tab["url"] and not tab["current"]

    response = admin_client.get(reverse(URL), {**params, "answer": "1"})
    assert response.status_code == 200 and not messages_of(response)
    panel = response.context["answer"]
    assert panel.mode == "llm" and "".join(text for text, _ in panel.segments) == "North is up [1]."
    (source,) = panel.sources
    left = response.context["columns"][0]
    cited = [item for item in left.results if f"-{item['chunk'].pk}" in source["result"]]
    assert cited and cited[0]["document"].external_id == "map.txt"
    body = response.content.decode()
    assert f'id="{source["result"]}"' in body and f'href="#{source["result"]}"' in body
    trace = QueryTrace.objects.get(pk=panel.trace_id)
    assert reverse("admin:retrieval_querytrace_change", args=[trace.pk]) in body
    assert trace.source == QueryTrace.Source.PLAYGROUND  # an editor's: out of the figures
    assert not readers_only(QueryTrace.objects.filter(pk=trace.pk)).exists()
    assert [e["face"] for e in trace.trace["events"] if e["stage"] == "answer"] == ["playground"]
