"""The scope matrix's world: two collections, five documents of three teams, five users."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser, Permission

import retrieval
from retrieval.models import (
    BlockedSuggestion,
    Chunk,
    Collection,
    EvalRun,
    EvalSet,
    HiddenResult,
    Promotion,
    QueryTrace,
    SearchClick,
    Synonym,
    Triple,
)
from retrieval.services.graph.extraction import extract_graph
from retrieval.services.results.page import document_positions
from tests.conftest import collection_of
from tests.scope.access import COLLECTIONS, TEAMS

#: collection -> {external id: team}
DOCS = {
    "Atlas": {"doc-atlas-a": "a", "doc-atlas-b": "b", "doc-atlas-pub": "public"},
    "Bestiary": {"doc-best-a": "a", "doc-best-b": "b"},
}
ALL_DOCS = {doc for docs in DOCS.values() for doc in docs}
USERS = ["anonymous", "alice", "bob", "stella", "root"]  # stella: staff; root: superuser
QUERY = "north up"
MISSING = "Nowhere"


def marker(external_id: str) -> str:
    return "mark" + external_id.removeprefix("doc-").replace("-", "")


def visible(username: str, collection: str) -> set[str] | None:
    """What the grants allow in ``collection``: document ids, or None if it is hidden."""
    if username == "root":
        return set(DOCS[collection])
    if collection not in COLLECTIONS.get(username, []):
        return None
    return {doc for doc, team in DOCS[collection].items() if team in TEAMS[username]}


def everything_visible(username: str) -> set[str]:
    return {doc for name in DOCS for doc in visible(username, name) or ()}


def shown(body: str) -> set[str]:
    """The documents a response shows: by external id or by the marker in their text."""
    return {doc for doc in ALL_DOCS if doc in body or marker(doc) in body}


@pytest.fixture
def world(graph_settings, retrieval_settings):
    retrieval_settings(
        COLLECTION_ACCESS="tests.scope.access.collections",
        DOCUMENT_ACCESS="tests.scope.access.documents",
        # The graph leg expands hybrid hits whatever the collection's default retriever.
        RETRIEVERS={
            "graph": {
                "BACKEND": "retrieval.services.retrievers.graph.GraphRetriever",
                "OPTIONS": {"retriever": "hybrid"},
            }
        },
    )
    from retrieval.services.ingestion.ingest import Source, ingest

    for name, docs in DOCS.items():
        collection = collection_of(name, {})
        ingest(
            collection,
            [
                Source.from_text(
                    f"North is up. North_Hub links {marker(doc)}.",
                    external_id=doc,
                    metadata={"team": team},
                )
                for doc, team in docs.items()
            ],
        )
        extract_graph(collection)
        # Editors' picks: team b's documents first for every query starting "north", so
        # every face shows them to who may read them, and to nobody else.
        for document in collection.documents.filter(metadata__team="b"):
            Promotion.objects.create(collection=collection, query="north*", document=document)
            HiddenResult.objects.create(collection=collection, query="south*", document=document)
        # The other rules, of no document: shown to who sees the collection.
        Synonym.objects.create(collection=collection, rule="south -> austral")
        BlockedSuggestion.objects.create(collection=collection, query="*rude*")
    assert Triple.objects.filter(object_key__startswith="mark").count() == len(ALL_DOCS)
    users = {"anonymous": AnonymousUser()}
    model = get_user_model()
    for username in USERS[1:]:
        user = model.objects.create_user(username=username, password="x")
        if username == "stella":
            user.is_staff = True
            user.save()
            user.user_permissions.set(
                Permission.objects.filter(content_type__app_label="retrieval")
            )
            user = model.objects.get(pk=user.pk)  # no stale permission cache
        if username == "root":
            user.is_staff = user.is_superuser = True
            user.save()
        users[username] = user
    return users


@pytest.fixture
def quality(world, retrieval_settings):
    """Per collection: a golden set judging every chunk, a finished run, and traces."""
    from retrieval.services.quality import goldens
    from retrieval.services.quality.eval_runs import create_eval_run

    retrieval_settings(TRACE_SAMPLE_RATE=1)
    for name in DOCS:
        collection = Collection.objects.get(name=name)
        eval_set = EvalSet.objects.create(name=f"{name} gold", collection=collection)
        for chunk in Chunk.objects.filter(collection=collection).select_related("document"):
            goldens.judge(eval_set, QUERY, chunk, grade=1)
        run = create_eval_run(eval_set, "default", top_k=10, sync=True)
        assert run.status == EvalRun.Status.SUCCEEDED, run.message
        retrieval.search(QUERY, collection=name, user=world["root"])  # names every document
    retrieval.search(QUERY, collection="Bestiary", user=world["stella"])  # her own trace
    assert QueryTrace.objects.filter(user=world["stella"]).count() == 1
    # A click on every document each of these searches found: root's name every one.
    for made in QueryTrace.objects.all():
        for document_id, position in document_positions(made.results).items():
            SearchClick.objects.create(trace=made, document_id=document_id, position=position)
    # Queries naming each document, asked on the API by three readers who see it: popular
    # enough to be suggested, to readers who may see every document of its collection.
    fans = [get_user_model().objects.create_user(username=f"fan{i}") for i in range(3)]
    for name, docs in DOCS.items():
        collection = Collection.objects.get(name=name)
        for doc in docs:
            for fan in fans:
                QueryTrace.objects.create(
                    collection=collection, query=f"{marker(doc)} plans", user=fan,
                    pipeline="default", source=QueryTrace.Source.API, result_count=1,
                )  # fmt: skip
    retrieval_settings(TRACE_SAMPLE_RATE=0)


from tests.scope.writes import write_world  # noqa: E402, F401  (the write matrix's world)
