"""Each chunk's copy of its document's host visibility (``retrieval/sql/chunk_access.sql``).

A signed-in reader's scope is checked on the chunk row (``c.access ?| tokens``), so the
copy must equal its document's ``access`` whatever writes either row: a host save, a
queryset update, a chunk written later, raw SQL on the chunk.
"""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection
from django.db.models import Q

from retrieval.models import Chunk, Document
from retrieval.services.access import Scope
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.query.search import search
from tests.host_app.models import Story

pytestmark = pytest.mark.django_db


def copies(document: Document) -> list[object]:
    """The access each of the document's chunks carries."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT access::text FROM retrieval_chunk WHERE document_id = %s ORDER BY id",
            [document.pk],
        )
        return [json.loads(row[0]) for row in cursor.fetchall()]


def document_of(story: Story) -> Document:
    return Document.objects.get(external_id=f"host_app.story:{story.pk}")


def titles(user, query: str = "north") -> set[str]:
    hits = search(query, collection="stories", top_k=20, user=user)
    return {hit.chunk.document.title for hit in hits}


def only_titles_starting_with_a(user) -> Q:
    """A DOCUMENT_ACCESS hook beside the hosts' visibility."""
    return Q(title__startswith="a")


@pytest.fixture
def editors():
    return Group.objects.create(name="editors")


@pytest.fixture
def reader():
    return get_user_model().objects.create_user(username="reader", password="x")


def test_each_chunk_carries_its_documents_access_whatever_writes_it(keyword_settings, editors):
    story = Story.objects.create(
        title="North",
        slug="n",
        body="<p>North is up. The pole is north.</p>" * 3,
        audience="group:editors",
    )
    document = document_of(story)
    assert len(copies(document)) > 1
    assert copies(document) == [[f"group:{editors.pk}"]] * len(copies(document))
    # The host changes who may see it: every chunk follows in the same transaction.
    story.audience = "members"
    story.save()
    assert set(map(tuple, copies(document))) == {("signed-in",)}
    # A queryset update, which no model signal sees; then no restriction at all.
    Document.objects.filter(pk=document.pk).update(access=["user:1"])
    assert set(map(tuple, copies(document))) == {("user:1",)}
    Document.objects.filter(pk=document.pk).update(access=None)
    assert set(map(tuple, copies(document))) == {("public",)}  # every reader holds it
    # A chunk written later takes its document's value; raw SQL cannot set another.
    Document.objects.filter(pk=document.pk).update(access=[])
    first = Chunk.objects.filter(document=document).order_by("pk").first()
    added = Chunk.objects.create(
        collection=document.collection, document=document, index=99, content="x", start=0, end=1
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE retrieval_chunk SET access = '[\"public\"]' WHERE id = ANY(%s)",
            [[first.pk, added.pk]],
        )
    assert set(map(tuple, copies(document))) == {()}  # nobody


def test_a_readers_scope_is_a_condition_on_the_chunk_rows(keyword_settings, editors, reader):
    Story.objects.create(title="north", slug="n", body="<p>North.</p>", audience="group:editors")
    filters = Scope.for_user(reader).filters()
    conditions, params = filters.sql("c", collection_id=1)
    assert conditions == ["c.access ?| %s"]  # no look-up of the allowed documents
    assert sorted(params[0]) == sorted(["public", "signed-in", f"user:{reader.pk}"])


def test_a_document_restricted_by_a_queryset_update_is_hidden_at_once(
    keyword_settings, editors, reader
):
    story = Story.objects.create(title="north", slug="n", body="<p>North is up.</p>")
    assert titles(reader) == {"north"}
    Document.objects.filter(pk=document_of(story).pk).update(access=[f"group:{editors.pk}"])
    assert titles(reader) == set()
    reader.groups.add(editors)
    assert titles(reader) == {"north"}


def test_a_document_access_hook_applies_beside_the_chunk_rows(
    keyword_settings, retrieval_settings, editors, reader
):
    retrieval_settings(DOCUMENT_ACCESS=f"{__name__}.only_titles_starting_with_a")
    for title, audience in [
        ("a open", "public"),
        ("a editors", "group:editors"),
        ("b open", "public"),
    ]:
        Story.objects.create(title=title, slug=title[0], body="<p>North.</p>", audience=audience)
    conditions, _ = Scope.for_user(reader).filters().sql("c", collection_id=1)
    assert conditions[0] == "c.access ?| %s" and "document_id IN" in conditions[1]
    assert titles(reader) == {"a open"}
    reader.groups.add(editors)
    assert titles(reader) == {"a open", "a editors"}


def test_a_chunk_written_before_its_document_is_hidden_until_the_document_says(
    keyword_settings, editors
):
    """Foreign keys are checked at commit, so a fixture may list a chunk before its
    document: the chunk must not default to everyone."""
    collection, _ = get_or_create_collection("early")
    document_id = (Document.objects.order_by("-pk").values_list("pk", flat=True).first() or 0) + 7
    Chunk.objects.create(
        collection=collection, document_id=document_id, index=0, content="x", start=0, end=1
    )
    assert copies(Document(pk=document_id)) == [[]]  # nobody, yet
    document = Document.objects.create(
        pk=document_id, collection=collection, external_id="x", access=[f"group:{editors.pk}"]
    )
    assert copies(document) == [[f"group:{editors.pk}"]]
