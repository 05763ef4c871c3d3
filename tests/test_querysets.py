"""Loading results' chunks: the ORM's instances, in one statement, within a scope."""

from __future__ import annotations

import pytest
from django.db.models import Model

from retrieval.models import Chunk, Document
from retrieval.querysets import UNLOADED, load_chunks
from retrieval.services.core.filters import Filters
from retrieval.services.ingestion.ingest import Source, ingest
from tests.conftest import collection_of


def loaded_fields(instance: Model) -> dict[str, object]:
    """Every loaded (not deferred) field's value."""
    deferred = instance.get_deferred_fields()
    return {
        f.attname: getattr(instance, f.attname)
        for f in type(instance)._meta.concrete_fields
        if f.attname not in deferred
    }


@pytest.fixture
def chunks():
    collection = collection_of("loading", {})
    ingest(
        collection,
        [
            Source.from_text(
                "# Winds\n\nNorth winds blow.\n\n## Poles\n\nCold at the pole.",
                external_id="winds.md",
                title="Winds",
                metadata={"team": "weather", "tags": ["a", "b"], "n": 1.5},
            ),
            Source.from_text("East of the river.", external_id="river", metadata={"team": "geo"}),
        ],
    )
    return list(Chunk.objects.filter(collection=collection).select_related("document"))


@pytest.mark.django_db
def test_chunks_and_documents_load_as_the_orm_loads_them_in_one_statement(
    chunks, django_assert_num_queries
):
    ids = [c.pk for c in chunks]
    with django_assert_num_queries(1):
        loaded = load_chunks([*reversed(ids), 10**9], using="default")  # one id missing
        titles = {chunk.document.title for chunk in loaded.values()}  # already there
    assert sorted(loaded) == sorted(ids)
    assert "Winds" in titles and len(titles) == 2
    for expected in chunks:
        chunk = loaded[expected.pk]
        assert chunk.get_deferred_fields() == set(UNLOADED["chunk"])
        assert chunk.document.get_deferred_fields() == set(UNLOADED["document"])
        # Every loaded value is the ORM's, converted alike (JSON decoded, aware datetimes).
        assert loaded_fields(chunk) == {
            k: v for k, v in loaded_fields(expected).items() if k not in UNLOADED["chunk"]
        }
        assert loaded_fields(chunk.document) == {
            k: v
            for k, v in loaded_fields(expected.document).items()
            if k not in UNLOADED["document"]
        }
        assert chunk._state.db == "default" and not chunk._state.adding
    winds = next(c for c in loaded.values() if c.document.external_id == "winds.md")
    assert winds.document.metadata.items() >= {"tags": ["a", "b"], "n": 1.5}.items()
    assert isinstance(winds.heading_path, list) and winds.document.created_at.tzinfo
    with django_assert_num_queries(1):  # a deferred field loads on demand, as with the ORM
        assert winds.embedding is not None and len(winds.embedding) == len(chunks[0].embedding)


@pytest.mark.django_db
def test_conditions_restrict_what_is_loaded(chunks):
    river = Document.objects.get(external_id="river")
    conditions, params = (
        Filters(documents_within=Document.objects.filter(pk=river.pk))
        .scope_only()
        .sql("c", collection_id=river.collection_id)
    )
    loaded = load_chunks(
        [c.pk for c in chunks], using="default", conditions=conditions, params=params
    )
    assert {c.document_id for c in loaded.values()} == {river.pk}
    nothing = Filters(documents_within=Document.objects.none()).sql("c", collection_id=0)
    assert load_chunks([c.pk for c in chunks], using="default", conditions=nothing[0]) == {}
