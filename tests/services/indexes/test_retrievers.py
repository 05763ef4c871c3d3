"""The retrievers that rank vectors, on every index backend: scope, filters, top_k, order."""

from __future__ import annotations

import pytest
from django.db.models import Q

from retrieval.services.collections import get_or_create_collection
from retrieval.services.indexes import external
from retrieval.services.scope import Scope
from retrieval.services.search import search as scoped_search
from tests.services.indexes.test_conformance import TEXTS, make

pytestmark = pytest.mark.django_db

RETRIEVERS = ["dense", "hybrid"]


def search(query: str, **options):
    return scoped_search(query, scope=Scope.ALL, **options)


def names(results) -> list[str]:
    return [r.chunk.document.external_id for r in results]


@pytest.mark.parametrize("retriever", RETRIEVERS)
def test_results_are_ordered_ranked_and_limited(index_alias, retriever):
    make("compass", index_alias)
    results = search("north", collection="compass", retriever=retriever, top_k=3)
    assert names(results)[:2] == ["n", "ne"] and len(results) == 3
    assert [r.rank for r in results] == [0, 1, 2]
    assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)


@pytest.mark.parametrize("retriever", RETRIEVERS)
def test_scope_is_the_collection(index_alias, retriever):
    make("compass", index_alias)
    make("other", index_alias, {"far": "north north north"})
    assert set(names(search("north", collection="compass", retriever=retriever))) <= set(TEXTS)
    assert names(search("north", collection="other", retriever=retriever)) == ["far"]


@pytest.mark.parametrize("retriever", RETRIEVERS)
def test_filters_hold_on_every_leg(index_alias, retriever):
    make("compass", index_alias)
    flat = search(
        "north", collection="compass", retriever=retriever, filters={"metadata": {"group": "flat"}}
    )
    assert set(names(flat)) <= {"n", "ne", "e"} and names(flat)[0] == "n"
    only = search("north", collection="compass", retriever=retriever, filters={"documents": ["u"]})
    assert set(names(only)) <= {"u"}


@pytest.mark.parametrize("retriever", RETRIEVERS)
def test_an_empty_collection_returns_nothing(index_alias, retriever):
    get_or_create_collection("empty", index=index_alias)
    assert search("north", collection="empty", retriever=retriever) == []


def flat_documents(user) -> Q:
    """DOCUMENT_ACCESS for the test below: the "flat" group only."""
    return Q(metadata__group="flat")


@pytest.mark.parametrize("prefilter", [True, False], ids=["engine-filtered", "confirmed-only"])
@pytest.mark.parametrize("retriever", RETRIEVERS)
def test_the_access_scope_holds_on_every_index(
    index_alias, retriever, prefilter, retrieval_settings, django_user_model, monkeypatch
):
    retrieval_settings(DOCUMENT_ACCESS=f"{__name__}.flat_documents")
    if not prefilter:
        # A scope too wide to send to the engine: PostgreSQL's confirmation alone holds it.
        monkeypatch.setattr(external, "SCOPE_PREFILTER_LIMIT", 0)
    make("compass", index_alias)
    reader = django_user_model.objects.create_user(username="reader")
    seen = scoped_search("north up", collection="compass", retriever=retriever, user=reader)
    assert {"n", "ne"} <= set(names(seen)) <= {"n", "ne", "e"}
    asked = scoped_search(
        "up", collection="compass", retriever=retriever, user=reader, filters={"documents": ["u"]}
    )
    assert names(asked) == []
    everything = search("north up", collection="compass", retriever=retriever)
    assert "u" in names(everything)
