"""One suite for every configured retriever, on every index backend: scope, filters, top_k,
ordering, an empty collection.

The retrievers are enumerated from ``RETRIEVAL["RETRIEVERS"]``, so a new one joins the suite
by being configured; one the suite cannot apply to must be listed in ``NOT_APPLICABLE`` with
the reason. Texts and vectors are those of the index conformance suite (keyword embedder:
"north" is [1, 0, 0]); the agentic retriever runs its offline stages (no LLM configured).
"""

from __future__ import annotations

import importlib
import inspect
import math
from dataclasses import replace
from pathlib import Path

import pytest
from django.db import connections
from django.db.models import Q
from django.test.utils import CaptureQueriesContext

from retrieval.models import Collection, Document
from retrieval.services.access import Scope
from retrieval.services.core.filters import Filters
from retrieval.services.indexes import external, index_for
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.ingest import Source, ingest
from retrieval.services.query.search import search as scoped_search
from retrieval.services.registry import llms, retrievers
from retrieval.services.retrievers import base
from retrieval.testing.indexes import TEXTS, make_collection
from tests.services.indexes.conftest import EXTERNAL

pytestmark = pytest.mark.django_db

# alias -> why the suite does not apply to it (none today).
NOT_APPLICABLE: dict[str, str] = {}
CONFIGURED = retrievers.aliases()
RETRIEVERS = [alias for alias in CONFIGURED if alias not in NOT_APPLICABLE]


def search(query: str, **options):
    return scoped_search(query, scope=Scope.ALL, **options)


def names(results) -> list[str]:
    return [r.chunk.document.external_id for r in results]


def shipped_retriever_classes() -> set[type]:
    """Every concrete retriever class in ``retrieval/services/retrievers/``."""
    package = Path(base.__file__).parent
    found = set()
    for path in package.glob("*.py"):
        module = importlib.import_module(f"retrieval.services.retrievers.{path.stem}")
        for value in vars(module).values():
            if (
                inspect.isclass(value)
                and issubclass(value, base.BaseRetriever)
                and not inspect.isabstract(value)
                and value.__module__.startswith("retrieval.")
            ):
                found.add(value)
    return found


def test_the_suite_covers_every_configured_and_shipped_retriever():
    assert set(NOT_APPLICABLE) <= set(CONFIGURED), "NOT_APPLICABLE names an unknown retriever"
    assert "default" not in llms, "the agentic retriever must run its offline stages here"
    covered = {type(retrievers[alias]) for alias in CONFIGURED}
    missing = shipped_retriever_classes() - covered
    assert not missing, f"configure an alias for {missing} in DEFAULTS or list it as not applicable"


@pytest.mark.parametrize("retriever", RETRIEVERS)
def test_results_are_ordered_ranked_and_limited(index_alias, retriever):
    make_collection("compass", index_alias)
    results = search("north", collection="compass", retriever=retriever, top_k=2)
    assert names(results) == ["n", "ne"]
    assert [r.rank for r in results] == [0, 1]
    assert results[0].score > results[1].score
    assert names(search("north", collection="compass", retriever=retriever, top_k=1)) == ["n"]
    every = search("north", collection="compass", retriever=retriever, top_k=10)
    assert names(every)[:2] == ["n", "ne"] and len(set(names(every))) == len(every) <= 4
    assert [r.rank for r in every] == list(range(len(every)))
    assert [r.score for r in every] == sorted((r.score for r in every), reverse=True)


@pytest.mark.parametrize("retriever", RETRIEVERS)
def test_top_k_must_be_a_positive_integer(index_alias, retriever):
    collection = make_collection("compass", index_alias)
    for top_k in (0, -1, True, 2.5):
        with pytest.raises(ValueError, match="top_k"):
            retrievers[retriever].retrieve("north", collection=collection, top_k=top_k)


@pytest.mark.parametrize("retriever", RETRIEVERS)
def test_scope_is_the_collection(index_alias, retriever):
    make_collection("compass", index_alias)
    make_collection("other", index_alias, {"far": "north north north"})
    assert set(names(search("north", collection="compass", retriever=retriever))) <= set(TEXTS)
    assert names(search("north", collection="other", retriever=retriever)) == ["far"]


@pytest.mark.parametrize("retriever", RETRIEVERS)
def test_filters_hold_on_every_leg(index_alias, retriever):
    make_collection("compass", index_alias)
    flat = search(
        "north", collection="compass", retriever=retriever, filters={"metadata": {"group": "flat"}}
    )
    assert set(names(flat)) <= {"n", "ne", "e"} and names(flat)[:2] == ["n", "ne"]
    only = search("north", collection="compass", retriever=retriever, filters={"documents": ["u"]})
    assert set(names(only)) <= {"u"}
    none = search("north", collection="compass", retriever=retriever, filters={"document_ids": []})
    assert none == []


@pytest.mark.parametrize("retriever", RETRIEVERS)
def test_an_empty_collection_returns_nothing(index_alias, retriever):
    get_or_create_collection("empty", index=index_alias)
    assert search("north", collection="empty", retriever=retriever) == []


def flat_documents(user) -> Q:
    """DOCUMENT_ACCESS for the test below: the "flat" group only."""
    return Q(metadata__group="flat")


@pytest.mark.parametrize("plan", ["engine-filtered", "documents-confirmed", "unfiltered"])
@pytest.mark.parametrize("retriever", ["dense", "hybrid"])  # the legs that rank through an index
def test_the_access_scope_holds_on_every_index(
    index_alias, retriever, plan, retrieval_settings, django_user_model, monkeypatch
):
    retrieval_settings(DOCUMENT_ACCESS=f"{__name__}.flat_documents")
    collection = make_collection("compass", index_alias)
    index = index_for(collection)
    if isinstance(index, external.ExternalIndex):  # 1: a narrow scope's plan, 0: a wide one's
        monkeypatch.setattr(index, "prefilter_share", 0.0 if plan == "unfiltered" else 1.0)
    if plan == "documents-confirmed":
        # Too many documents to send to the engine: PostgreSQL's confirmation holds them.
        monkeypatch.setattr(external, "SCOPE_PREFILTER_LIMIT", 0)
    reader = django_user_model.objects.create_user(username="reader")
    seen = scoped_search("north up", collection="compass", retriever=retriever, user=reader)
    assert {"n", "ne"} <= set(names(seen)) <= {"n", "ne", "e"}
    asked = scoped_search(
        "up", collection="compass", retriever=retriever, user=reader, filters={"documents": ["u"]}
    )
    assert names(asked) == []
    everything = search("north up", collection="compass", retriever=retriever)
    assert "u" in names(everything)


@pytest.mark.parametrize("index_alias", ["pgvector"], indirect=True)  # no engine is asked
def test_a_scopes_documents_are_looked_up_unsorted(
    index_alias, retrieval_settings, django_user_model
):
    """Whether a scope is narrow enough to send to an engine is decided on at most 1,001 of
    its documents: read in no order, so the look-up stops there. Sorted by the model's
    ordering, every visible document was read and sorted first (27 ms at 50,000 of them)."""
    retrieval_settings(DOCUMENT_ACCESS=f"{__name__}.flat_documents")
    collection = make_collection("compass", index_alias)
    reader = django_user_model.objects.create_user(username="reader")
    filters = Scope.for_user(reader).filters()
    named = replace(filters, documents=("n", "e", "u"))
    with CaptureQueriesContext(connections[Document.objects.db]) as queries:
        ids = external.resolved_document_ids(filters, collection)
        named_ids = external.resolved_document_ids(named, collection)
    flat = Document.objects.filter(collection=collection, metadata__group="flat")
    assert sorted(ids) == sorted(flat.values_list("pk", flat=True)) and ids
    flat_named = flat.filter(external_id__in=["n", "e"])
    assert sorted(named_ids) == sorted(flat_named.values_list("pk", flat=True))
    assert queries.captured_queries and not any(
        "ORDER BY" in query["sql"] for query in queries.captured_queries
    )


def tagged_collection(index_alias: str, counts: dict[str, int]) -> Collection:
    """A collection of ``counts[tag]`` documents tagged ``tag`` each, its statistics fresh."""
    collection, _ = get_or_create_collection("tagged", index=index_alias)
    sources = [
        Source.from_text("north", external_id=f"{tag}{i}", metadata={"tags": [tag]})
        for tag, count in counts.items()
        for i in range(count)
    ]
    assert ingest(collection, sources).status == "succeeded"
    with connections[Document.objects.db].cursor() as cursor:
        cursor.execute("ANALYZE retrieval_chunk, retrieval_document")
    return Collection.objects.get(pk=collection.pk)


@pytest.mark.parametrize("index_alias", ["milvus"], indirect=True)  # the same for every engine
def test_a_wide_scope_is_searched_unfiltered_and_a_narrow_one_filtered(index_alias, monkeypatch):
    """An engine's filtered HNSW walk loses recall at middling shares (Milvus: 0.74 at a 10%
    scope): a scope wider than ``prefilter_share`` is not sent, and the fetch grows by
    what the confirmation drops. A narrow one is the engine's filter."""
    collection = tagged_collection(index_alias, {"wide": 30, "other": 29, "narrow": 1})
    index = index_for(collection)
    wide = Filters.parse({"metadata": {"tags": ["wide"]}})
    share = external.estimated_share(wide, collection)
    assert 0.3 < share < 0.7
    sent, fetch = index._engine_request(wide, collection, top_k=10)
    assert sent == Filters() and fetch == math.ceil(30 / share)
    narrow = Filters.parse({"metadata": {"tags": ["narrow"]}})
    assert external.estimated_share(narrow, collection) < index.prefilter_share
    assert index._engine_request(narrow, collection, top_k=10) == (narrow, 30)
    # Too wide a fetch for the engine's widest answer: PostgreSQL ranks.
    monkeypatch.setattr(index, "max_fetch", 50)
    assert index._engine_request(wide, collection, top_k=30)[0] is None


def test_a_scope_too_wide_to_send_grows_the_fetch_by_its_share(
    keyword_settings, retrieval_settings, django_user_model, monkeypatch
):
    """A narrow scope of more documents than the engine is sent: the rest of the filter
    is sent, and the fetch grows by the share of it the scope keeps."""
    retrieval_settings(
        INDEXES={"under_test": {"BACKEND": "retrieval.services.indexes.milvus.MilvusIndex",
                                "OPTIONS": {"uri": "http://127.0.0.1:9"}}},
        DOCUMENT_ACCESS=f"{__name__}.narrow_documents",
    )  # fmt: skip
    monkeypatch.setattr(external, "SCOPE_PREFILTER_LIMIT", 0)
    collection = tagged_collection("under_test", {"wide": 30, "other": 29, "narrow": 1})
    index = index_for(collection)
    reader = django_user_model.objects.create_user(username="reader")
    filters = replace(Scope.for_user(reader).filters(), metadata={"tags": ["wide"]})
    share = external.estimated_share(filters, collection)
    monkeypatch.setattr(index, "prefilter_share", 1.0)
    sent, fetch = index._engine_request(filters, collection, top_k=10)
    assert sent == Filters(metadata={"tags": ["wide"]})
    assert fetch == math.ceil(30 / (share / external.estimated_share(sent, collection)))
    assert fetch > 30


def wide_documents(user) -> Q:
    """DOCUMENT_ACCESS for the test below: the documents tagged "wide" (named so: the
    planner estimates a prefix of a column with statistics)."""
    return Q(external_id__startswith="wide")


@pytest.mark.parametrize("index_alias", ["pgvector"], indirect=True)  # no engine is asked
def test_a_scope_estimated_far_wider_than_an_engine_is_sent_is_not_looked_up(
    index_alias, retrieval_settings, django_user_model, monkeypatch
):
    """Reading a scope's first documents to learn it is too wide costs milliseconds; an
    estimate of ten times the limit is enough to know it is (and a narrow one is read)."""
    monkeypatch.setattr(external, "SCOPE_PREFILTER_LIMIT", 2)
    collection = tagged_collection(index_alias, {"wide": 30, "other": 29, "narrow": 1})
    reader = django_user_model.objects.create_user(username="reader")
    for hook, looked_up in [("wide_documents", False), ("narrow_documents", True)]:
        retrieval_settings(DOCUMENT_ACCESS=f"{__name__}.{hook}")
        filters = Scope.for_user(reader).filters()
        with CaptureQueriesContext(connections[Document.objects.db]) as queries:
            ids = external.resolved_document_ids(filters, collection)
        reads = [q for q in queries.captured_queries if not q["sql"].startswith("EXPLAIN")]
        assert bool(reads) is looked_up
        narrow = Document.objects.filter(collection=collection, external_id="narrow0")
        assert ids == (list(narrow.values_list("pk", flat=True)) if looked_up else None)


def narrow_documents(user) -> Q:
    """DOCUMENT_ACCESS for the tests above: the document tagged "narrow"."""
    return Q(external_id="narrow0")


def vertical_documents(user) -> Q:
    """DOCUMENT_ACCESS for the test below: the "vertical" group only ("up")."""
    return Q(metadata__group="vertical")


@pytest.mark.parametrize("index_alias", EXTERNAL, indirect=True)
def test_a_scope_past_the_engines_widest_answer_is_ranked_in_postgresql(
    index_alias, retrieval_settings, django_user_model, monkeypatch
):
    # "up" is the farthest from "north"; the engine's widest answer (2 hits) holds none of
    # the scope, which is too wide to send to the engine: PostgreSQL ranks it instead of
    # answering nothing.
    retrieval_settings(DOCUMENT_ACCESS=f"{__name__}.vertical_documents")
    monkeypatch.setattr(external, "SCOPE_PREFILTER_LIMIT", 0)
    collection = make_collection("compass", index_alias)
    monkeypatch.setattr(type(index_for(collection)), "max_fetch", 2)
    reader = django_user_model.objects.create_user(username="reader")
    seen = scoped_search("north", collection="compass", retriever="dense", user=reader)
    assert names(seen) == ["u"]
