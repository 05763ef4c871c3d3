"""Rules around the matrix: no scope no search, hooks that return querysets, writes, quality."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import async_to_sync
from django.urls import reverse

import retrieval
from retrieval.models import (
    Chunk,
    Collection,
    Document,
    EvalRun,
    EvalSet,
    Judgment,
)
from retrieval.services.graph.traversal import neighbourhood
from retrieval.services.tools import collection_tools
from tests.scope.conftest import DOCS, QUERY, shown
from tests.scope.faces import QUALITY_MODELS, browser, collection_pk, legs

pytestmark = pytest.mark.django_db


def test_the_service_layer_refuses_to_run_without_a_user_or_scope(world):
    with pytest.raises(TypeError, match="needs user= .* or scope="):
        retrieval.search(QUERY, collection="Atlas")
    with pytest.raises(TypeError, match="needs user="):
        retrieval.search_batch([QUERY], collection="Atlas")
    with pytest.raises(TypeError, match="needs user="):
        async_to_sync(retrieval.asearch)(QUERY, collection="Atlas")
    with pytest.raises(TypeError, match="needs user="):
        collection_tools("Atlas")
    with pytest.raises(TypeError, match="needs user="):
        neighbourhood(Collection.objects.get(name="Atlas"), "North Hub")
    with pytest.raises(TypeError, match="not both"):
        retrieval.search(QUERY, collection="Atlas", user=world["root"], scope=retrieval.Scope.ALL)
    every = retrieval.search(QUERY, collection="Bestiary", scope=retrieval.Scope.ALL, top_k=10)
    assert shown(json.dumps([r.to_dict() for r in every])) == set(DOCS["Bestiary"])


def test_a_document_hook_may_return_a_queryset_and_filters_cannot_widen_it(
    world, retrieval_settings
):
    retrieval_settings(DOCUMENT_ACCESS="tests.scope.access.documents_as_queryset")
    hidden = Document.objects.get(external_id="doc-atlas-b")
    for leg in legs():
        results = retrieval.search(
            QUERY,
            collection="Atlas",
            user=world["alice"],
            retriever=leg,
            filters={"document_ids": [hidden.pk]},
        )
        assert list(results) == [], leg
        # The filter narrows within the scope.
        own = Document.objects.get(external_id="doc-atlas-a")
        narrowed = retrieval.search(
            QUERY, collection="Atlas", user=world["alice"], retriever=leg,
            filters={"document_ids": [own.pk, hidden.pk]},
        )  # fmt: skip
        assert {r.chunk.document.external_id for r in narrowed} == {"doc-atlas-a"}, leg


def test_staff_restricted_to_collections_only_see_their_quality_records(
    world, quality, retrieval_settings
):
    retrieval_settings(DOCUMENT_ACCESS=None)  # stella: every document of Bestiary, no Atlas
    client = browser(world["stella"])
    for model_name, (path, model) in QUALITY_MODELS.items():
        listed = client.get(reverse(f"admin:retrieval_{model_name}_changelist"))
        assert listed.status_code == 200, model_name
        rows = set(listed.context["cl"].result_list)
        assert rows == set(model.objects.filter(**{f"{path}__name": "Bestiary"})), model_name
        assert rows, model_name  # root's trace of Bestiary too, not only her own
        missing = client.get(reverse(f"admin:retrieval_{model_name}_change", args=[999_999]))
        for obj in model.objects.filter(**{f"{path}__name": "Atlas"}):
            url = reverse(f"admin:retrieval_{model_name}_change", args=[obj.pk])
            assert client.get(url).status_code == missing.status_code != 200, model_name
    atlas_set = EvalSet.objects.get(name="Atlas gold")
    chunk = Chunk.objects.filter(collection__name="Atlas").first()
    before = Judgment.objects.count()
    vote = {"eval_set": atlas_set.pk, "chunk": chunk.pk, "grade": 0, "query": "judged"}
    client.post(reverse("admin:retrieval_judge"), vote)
    assert Judgment.objects.count() == before
    runs = EvalRun.objects.order_by("pk")
    compare = {"first": runs[0].pk, "second": runs[0].pk}  # Atlas's run
    shown_runs = client.get(reverse("admin:retrieval_evalrun_compare"), compare, follow=True)
    assert "Choose two existing runs to compare." in shown_runs.content.decode()


def test_judge_buttons_are_offered_only_to_staff_who_may_judge(world, quality):
    params = {"collection": collection_pk("Bestiary"), "query": QUERY, "left": "bm25"}
    params |= {"right": "dense", "top_k": 10}
    url = reverse("admin:retrieval_playground")
    restricted = browser(world["stella"]).get(url, params)
    assert restricted.status_code == 200 and restricted.context["columns"]
    assert "retrieval-judge" not in restricted.content.decode()
    assert "retrieval-judge" in browser(world["root"]).get(url, params).content.decode()
