"""Each chunk's scope marks in its BM25 row (``retrieval/sql/bm25_scope_marks.sql``).

A narrow scoped search finds the scope's chunks through these marks, so they must be the
current row's whatever writes it, and a metadata filter's marks must be among those of
every metadata containing it (the marks find a superset; the exact conditions decide).
"""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection

from retrieval.models import Chunk, Document
from retrieval.services.access import Scope
from retrieval.services.core.filters import Filters
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.ingest import Source, ingest
from retrieval.services.retrievers.bm25 import BM25Retriever
from retrieval.services.sparse.analyzer import Analyzer
from retrieval.services.sparse.index import rebuild_postings
from retrieval.services.sparse.scoped import index_marks

pytestmark = pytest.mark.django_db

#: Always through the marks, as a narrow scope is.
MARKED = BM25Retriever(scope_scan_limit=1_000_000)


def stale_marks() -> list[int]:
    """The chunks whose BM25 row's marks are not those of the chunk row as it is now."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT d.chunk_id FROM retrieval_bm25_chunk d "
            "LEFT JOIN retrieval_chunk c ON c.id = d.chunk_id "
            "WHERE ARRAY(SELECT u.lexeme FROM unnest(d.lexemes) AS u "
            "            WHERE u.lexeme LIKE '%%#%%' ORDER BY 1) "
            "IS DISTINCT FROM ARRAY(SELECT m FROM unnest(retrieval_bm25_marks("
            "    c.collection_id, c.document_id, c.access, c.metadata)) AS m ORDER BY 1)"
        )
        return [row[0] for row in cursor.fetchall()]


def found(collection, query: str, filters) -> set[str]:
    """External ids of the documents a marked scoped BM25 search finds."""
    terms = Analyzer().terms(query)
    ranked = MARKED.score(terms, collection=collection, top_k=50, filters=filters)
    chunks = Chunk.objects.filter(pk__in=[chunk_id for chunk_id, _ in ranked])
    return set(chunks.values_list("document__external_id", flat=True))


def test_the_marks_follow_every_write_of_the_chunk_row(keyword_settings):
    readers = Group.objects.create(name="readers")
    reader = get_user_model().objects.create_user("reader")
    reader.groups.add(readers)
    collection, _ = get_or_create_collection("marks")
    text = (
        "The north pole is cold and dark in the long winter. Penguins live in the south "
        "near the ice shelf. Bears walk north across the frozen sea in the spring."
    )
    sources = [
        Source.from_text(text, external_id="a", metadata={"team": "red", "n": 1}),
        Source.from_text(text, external_id="b", metadata={"team": "blue", "n": 2.0}),
    ]
    assert ingest(collection, sources).status == "succeeded"
    assert Chunk.objects.filter(collection=collection).count() > 2
    assert stale_marks() == []
    red = {"metadata": {"team": "red"}}
    assert found(collection, "north penguins", red) == {"a"}
    assert found(collection, "north penguins", {"metadata": {"n": 2}}) == {"b"}  # 2.0 = 2

    # Ingested again with other metadata: the chunks' metadata is rewritten.
    sources[1] = Source.from_text(text, external_id="b", metadata={"team": "red"})
    assert ingest(collection, sources).status == "succeeded"
    assert stale_marks() == []
    assert found(collection, "north penguins", red) == {"a", "b"}

    # A queryset update of the chunks, which no model signal sees.
    Chunk.objects.filter(document__external_id="a").update(metadata={"team": "green"})
    assert stale_marks() == []
    assert found(collection, "north penguins", red) == {"b"}

    # The document's access changes: its chunks' copies, then their marks.
    scope = lambda: Scope.for_user(reader).filters()  # noqa: E731 (read at each call)
    assert found(collection, "north penguins", scope()) == {"a", "b"}  # public
    Document.objects.filter(external_id="b").update(access=[f"group:{readers.pk}"])
    Document.objects.filter(external_id="a").update(access=["group:nobody"])
    assert stale_marks() == []
    assert found(collection, "north penguins", scope()) == {"b"}

    # A chunk moved to another document (raw SQL); the postings rebuilt from scratch.
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE retrieval_chunk SET document_id = %s, index = 1000 WHERE id = %s",
            [
                Document.objects.get(external_id="a").pk,
                Chunk.objects.filter(document__external_id="b").values_list("pk", flat=True)[0],
            ],
        )
    assert stale_marks() == []
    rebuild_postings(collection.pk, Analyzer())
    assert stale_marks() == []
    ids = Document.objects.filter(external_id="b").values_list("pk", flat=True)
    assert found(collection, "north penguins", {"document_ids": list(ids)}) == {"b"}


#: (metadata, filter) pairs, contained or not: numbers in several forms, strings that
#: look like numbers, nested objects, arrays of scalars and of objects, null, booleans,
#: keys holding the path's own punctuation.
PAIRS = [
    ({"tags": ["a", "b"], "n": 1}, {"tags": ["b"]}),
    ({"tags": ["a", "b"], "n": 1}, {"tags": ["c"]}),
    ({"n": 1.0}, {"n": 1}),
    ({"n": 100}, {"n": 1e2}),
    ({"n": 1}, {"n": "1"}),
    ({"n": "1"}, {"n": 1}),
    ({"a": {"b": {"c": True}}}, {"a": {"b": {"c": True}}}),
    ({"a": {"b": {"c": True}}}, {"a": {"b": {"c": False}}}),
    ({"a": [{"x": 1}, {"y": 2}]}, {"a": [{"x": 1}]}),
    ({"a": [{"x": 1}, {"y": 2}]}, {"a": [{"x": 1, "y": 2}]}),
    ({"a": ["x"]}, {"a": "x"}),
    ({"a": [[1, 2], [3]]}, {"a": [[3]]}),
    ({"k": None}, {"k": None}),
    ({"k": None}, {"k": "null"}),
    ({"a.b": 1, "a": {"b": 2}}, {"a.b": 1}),
    ({'q"uote': "é"}, {'q"uote': "é"}),
    ({"tags": []}, {"tags": []}),
    ({"e": {}}, {"e": {}}),
    ({"a": "x"}, {"a": ["x"]}),
    ({"a": [1]}, {"a": [1, 2]}),
    ({"a": [[1, 2]]}, {"a": [1]}),
    ({"a": [1, [2]]}, {"a": [[2]]}),
    ({"a": [{"x": [1]}]}, {"a": [{"x": 1}]}),
]


def test_a_metadata_filters_marks_are_among_those_of_every_metadata_containing_it():
    """And, for a filter the marks express exactly (``index_marks``), only among theirs."""
    contained = marked = exact = 0
    with connection.cursor() as cursor:
        for metadata, filter_ in PAIRS:
            cursor.execute(
                "SELECT %s::jsonb @> %s::jsonb, "
                "retrieval_bm25_marks(1, NULL, NULL, %s::jsonb) "
                "@> retrieval_bm25_marks(1, NULL, NULL, %s::jsonb)",
                [json.dumps(metadata), json.dumps(filter_), json.dumps(metadata)]
                + [json.dumps(filter_)],
            )
            contains, marks_contain = cursor.fetchone()
            if contains:
                assert marks_contain, (metadata, filter_)
            marks = index_marks(Filters.parse({"metadata": filter_}))
            if marks is not None and marks.exact:
                assert marks_contain == contains, (metadata, filter_)
                exact += 1
            contained += contains
            marked += marks_contain and not contains
    # Both kinds are in the list, and the marks tell most non-containing pairs apart.
    assert contained >= 8
    assert 0 < marked <= 3
    assert exact >= 16


def test_a_superset_found_through_the_marks_is_checked_exactly(keyword_settings):
    """An array of objects: the filter's leaves are all in the chunk's, in two different
    objects, so the marks find it, and containment refuses it."""
    collection, _ = get_or_create_collection("lossy")
    text = "The north pole is cold."
    sources = [
        Source.from_text(text, external_id="apart", metadata={"a": [{"x": 1}, {"y": 2}]}),
        Source.from_text(text, external_id="together", metadata={"a": [{"x": 1, "y": 2}]}),
    ]
    assert ingest(collection, sources).status == "succeeded"
    filters = Filters.parse({"metadata": {"a": [{"x": 1, "y": 2}]}})
    assert found(collection, "north pole", filters) == {"together"}
