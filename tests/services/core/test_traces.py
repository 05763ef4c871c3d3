"""Query traces: one per search on every face when sampled, none when not; pruning."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from retrieval.models import QueryTrace
from retrieval.services.access import Scope
from retrieval.services.query.search import search as scoped_search
from retrieval.services.query.search_log import prune_traces
from tests.conftest import collection_of

pytestmark = pytest.mark.django_db

TEXTS = {"river": "the river runs north", "sun": "the sun rises east", "hill": "up the hill"}


@pytest.fixture
def atlas(keyword_settings):
    return collection_of("atlas", TEXTS)


def search(query: str, **options):
    return scoped_search(query, scope=Scope.ALL, **options)


def reader():
    return get_user_model().objects.get_or_create(username="reader")[0]


def search_api(query: str):
    client = APIClient()
    client.force_authenticate(reader())
    answer = client.post("/api/search/", {"query": query, "collection": "atlas"}, format="json")
    assert answer.status_code == 200, answer.content
    return reader()


def search_batch_api(query: str):
    client = APIClient()
    client.force_authenticate(reader())
    body = {"queries": [query], "collection": "atlas"}
    assert client.post("/api/search/batch/", body, format="json").status_code == 200
    return reader()


def search_page(query: str):
    from django.test import Client

    client = Client()
    client.force_login(reader())
    assert client.get("/", {"q": query, "collection": "atlas"}).status_code == 200
    return reader()


def command(query: str):
    call_command("retrieval_search", query, "--collection", "atlas", stdout=StringIO())
    return None  # a command acts for no user


def tool_api(query: str):
    client = APIClient()
    client.force_authenticate(reader())
    call = {"collection": "atlas", "name": "retrieve", "arguments": {"query": query}}
    assert client.post("/api/tools/call/", call, format="json").status_code == 200
    return reader()


def python_facade(query: str):
    import retrieval

    retrieval.search(query, collection="atlas", user=reader())
    return reader()


FACES = [search_api, search_batch_api, search_page, command, tool_api, python_facade]
#: The source each face's traces name (analytics count readers' faces, not editors').
SOURCES = {
    "search_api": "api",
    "search_batch_api": "api",
    "search_page": "page",
    "command": "command",
    "tool_api": "tool",
    "python_facade": "python",
}


@pytest.mark.parametrize("face", FACES, ids=lambda face: face.__name__)
def test_each_face_leaves_one_trace_at_rate_1_and_none_at_0(atlas, retrieval_settings, face):
    retrieval_settings(TRACE_SAMPLE_RATE=0)
    face("north river")
    assert not QueryTrace.objects.exists()
    retrieval_settings(TRACE_SAMPLE_RATE=1)
    user = face("north river")
    (trace,) = QueryTrace.objects.all()
    assert trace.query == "north river" and trace.collection == atlas
    assert trace.user == user  # the user the search ran for
    assert trace.source == SOURCES[face.__name__]
    assert trace.results[0]["document"] == "river" and trace.result_count == len(trace.results)


def test_the_playground_leaves_one_trace_per_side(admin_client, atlas, retrieval_settings):
    retrieval_settings(TRACE_SAMPLE_RATE=1)
    query = {"collection": atlas.pk, "query": "north", "left": "bm25", "right": "dense", "top_k": 5}
    assert admin_client.get(reverse("admin:retrieval_playground"), query).status_code == 200
    assert sorted(QueryTrace.objects.values_list("pipeline", flat=True)) == [
        "retriever:bm25",
        "retriever:dense",
    ]
    assert set(QueryTrace.objects.values_list("source", flat=True)) == {"playground"}


def test_a_trace_keeps_each_legs_candidates_scores_and_ranks(atlas, retrieval_settings):
    retrieval_settings(
        TRACE_SAMPLE_RATE=1, PIPELINES={"both": {"retrievers": {"bm25": 1.0, "dense": 1.0}}}
    )
    results = search("north hill", collection=atlas, pipeline="both", top_k=1, filters={})
    trace = QueryTrace.objects.get()
    assert trace.pipeline == "both" and trace.top_k == 1
    assert [r["chunk_id"] for r in trace.results] == [r.chunk.pk for r in results]
    (first,) = trace.results
    assert set(first["legs"]) == {"bm25", "dense"}
    assert first["legs"]["bm25"]["rank"] >= 1
    (pipeline,) = [e for e in trace.trace["events"] if e["stage"] == "pipeline"]
    candidates = pipeline["candidates"]
    assert len(candidates["dense"]) == 3  # every candidate, not only the one result
    assert set(pipeline["leg_ms"]) == {"bm25", "dense"}
    bm25_ids = {chunk_id for chunk_id, _ in candidates["bm25"]}
    assert bm25_ids == set(
        atlas.chunks.filter(document__external_id__in=["river", "hill"]).values_list(
            "pk", flat=True
        )
    )  # the documents holding "north" or "hill"
    assert trace.ms > 0


def test_a_trace_that_cannot_be_stored_leaves_a_bare_one(atlas, retrieval_settings, caplog):
    """A NUL in the trace (here in the query, which Python does not refuse) made its write
    fail; the failure was logged, but the search left no trace at all."""
    retrieval_settings(TRACE_SAMPLE_RATE=1)
    results = scoped_search("north\x00 river", collection=atlas, user=reader())
    assert "Could not store the trace" in caplog.text
    (trace,) = QueryTrace.objects.all()
    assert (trace.query, trace.user, trace.collection) == ("north\ufffd river", reader(), atlas)
    assert [r["chunk_id"] for r in trace.results] == [r.chunk.pk for r in results]
    assert trace.result_count == len(results) > 0
    assert trace.trace["unstored"].startswith("DataError")


def test_sampling_between_0_and_1_keeps_some(atlas, retrieval_settings):
    retrieval_settings(TRACE_SAMPLE_RATE=0.5)
    for _ in range(40):
        search("north", collection=atlas)
    assert 0 < QueryTrace.objects.count() < 40  # 1 in 2**39 chance of failing each way


def test_old_traces_are_deleted_in_batches(atlas, retrieval_settings):
    retrieval_settings(TRACE_SAMPLE_RATE=1, TRACE_RETENTION_DAYS=7)
    for _ in range(5):
        search("north", collection=atlas)
    old = list(QueryTrace.objects.values_list("pk", flat=True)[:3])
    QueryTrace.objects.filter(pk__in=old).update(created_at=timezone.now() - timedelta(days=8))
    assert prune_traces(batch_size=2) == 3
    assert QueryTrace.objects.count() == 2
    out = StringIO()
    call_command("retrieval_prune_traces", "--days", "0", stdout=out)
    assert out.getvalue().strip() == "Deleted 2 traces." and not QueryTrace.objects.exists()
    with pytest.raises(CommandError, match="batch-size must be at least 1"):
        call_command("retrieval_prune_traces", "--batch-size", "0")
