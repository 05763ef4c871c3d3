"""The index suite: store and rank chunk vectors, one space per collection, on the real engine.

Vectors come from :class:`~retrieval.testing.KeywordEmbedder` (axes north, east, up),
so every similarity is worked out by hand: "north" is [1, 0, 0], "north east"
[1, 1, 0]/√2. The suite ingests through the app (PostgreSQL and the outbox), then asks
the index; it needs pytest-django's database.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import pytest

from retrieval.exceptions import InvalidFilterError
from retrieval.models import Collection, Document, IndexOperation, IndexRun
from retrieval.services.core.filters import Filters
from retrieval.services.indexes import index_for, outbox, sync
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.ingest import Source, ingest
from retrieval.services.ingestion.reembedding import reembed
from retrieval.testing.base import KEYWORD_EMBEDDER, Suite, configure

__all__ = ["META", "TEXTS", "IndexSuite", "make_collection"]

NORTH = [1.0, 0.0, 0.0]
TEXTS = {"n": "north", "ne": "north east", "e": "east", "u": "up"}
META = {
    "n": {"axis": "n", "group": "flat", "rank": 1, "tags": ["a", "b"], "geo": {"deg": 0}},
    "ne": {"axis": "ne", "group": "flat", "rank": 2, "tags": ["a"], "geo": {"deg": 45}},
    "e": {"axis": "e", "group": "flat", "rank": 3, "tags": ["c"], "geo": {"deg": 90}},
    "u": {"axis": "u", "group": "vertical", "rank": 4, "tags": [], "geo": {"deg": None}},
}


def make_collection(name: str, alias: str, texts: dict[str, str] = TEXTS) -> Collection:
    """Collection ``name`` on index ``alias``: one document per text (metadata from
    ``META``), indexed and drained to the engine."""
    collection, _ = get_or_create_collection(name, index=alias)
    sources = [
        Source.from_text(text, external_id=key, metadata=META.get(key, {}))
        for key, text in texts.items()
    ]
    run = ingest(collection, sources)
    assert run.status == "succeeded", run.errors
    drained = outbox.drain()  # on a worker the commit triggers it
    assert drained.failed == 0, drained.errors
    return Collection.objects.get(pk=collection.pk)


class IndexSuite(Suite):
    """The ``BaseIndex`` contract. Set ``backend`` and ``options``, or override
    :meth:`index_config` (e.g. to start the engine in a fixture)."""

    pytestmark = pytest.mark.django_db
    backend: ClassVar[str] = ""
    options: ClassVar[dict[str, Any]] = {}

    def index_config(self, request: pytest.FixtureRequest) -> dict[str, Any]:
        return {"BACKEND": self.backend, "OPTIONS": dict(self.options)}

    @pytest.fixture(autouse=True)
    def index_alias(self, request: pytest.FixtureRequest, settings: Any) -> str:
        configure(
            settings,
            EMBEDDERS={"default": KEYWORD_EMBEDDER},
            INDEXES={"under_test": self.index_config(request)},
        )
        return "under_test"

    def make(self, name: str, texts: dict[str, str] = TEXTS) -> Collection:
        return make_collection(name, "under_test", texts)

    def rank(
        self, collection: Collection, vector: list[float] = NORTH, top_k: int = 10, filters=None
    ) -> list[tuple[str, float]]:
        """Return [(external id, similarity rounded)] best first."""
        scored = index_for(collection).rank(
            vector, collection=collection, top_k=top_k, filters=Filters.parse(filters)
        )
        names = dict(
            Document.objects.filter(chunks__pk__in=[s.chunk_id for s in scored]).values_list(
                "chunks__pk", "external_id"
            )
        )
        return [(names[s.chunk_id], round(s.score, 4)) for s in scored]

    def test_written_vectors_rank_by_cosine_similarity(self) -> None:
        collection = self.make("compass")
        ranked = self.rank(collection)
        assert ranked[:2] == [("n", 1.0), ("ne", round(1 / math.sqrt(2), 4))]
        assert sorted(ranked[2:]) == [("e", 0.0), ("u", 0.0)]
        assert index_for(collection).count(collection) == 4

    def test_top_k_keeps_the_best(self) -> None:
        collection = self.make("compass")
        assert self.rank(collection, top_k=1) == [("n", 1.0)]
        east = [0.0, 1.0, 0.0]
        assert [name for name, _ in self.rank(collection, east, top_k=2)] == ["e", "ne"]

    def test_document_filters(self) -> None:
        collection = self.make("compass")
        found = {n for n, _ in self.rank(collection, filters={"documents": ["e", "u"]})}
        assert found == {"e", "u"}
        up = Document.objects.get(collection=collection, external_id="u").pk
        assert self.rank(collection, filters={"document_ids": [up]}) == [("u", 0.0)]
        assert self.rank(collection, filters={"document_ids": []}) == []
        assert self.rank(collection, filters={"documents": ["nope"]}) == []

    def test_scalar_metadata_filters(self) -> None:
        collection = self.make("compass")
        flat = self.rank(collection, filters={"metadata": {"group": "flat"}})
        assert [n for n, _ in flat][:2] == ["n", "ne"] and {n for n, _ in flat} == {"n", "ne", "e"}
        assert self.rank(collection, filters={"metadata": {"rank": 2}}) == [("ne", 0.7071)]
        both = {"metadata": {"group": "flat", "axis": "e"}, "documents": ["e", "n"]}
        assert self.rank(collection, filters=both) == [("e", 0.0)]
        # Quotes and backslashes are literals, not syntax: no match, no error.
        hostile = {"metadata": {"group": 'flat" or 1 == 1 or "\\'}}
        assert self.rank(collection, filters=hostile) == []

    def test_nested_list_and_null_filters_match_or_are_refused_as_the_features_say(self) -> None:
        collection = self.make("compass")
        features = index_for(collection).features
        cases = [
            (features.filter_objects, {"geo": {"deg": 45}}, [("ne", 0.7071)]),
            (features.filter_lists, {"tags": ["a"]}, [("n", 1.0), ("ne", 0.7071)]),
            (
                features.filter_objects and features.filter_nulls,
                {"geo": {"deg": None}},
                [("u", 0.0)],
            ),
        ]
        for supported, metadata, expected in cases:
            if supported:
                assert self.rank(collection, filters={"metadata": metadata}) == expected, metadata
            else:
                with pytest.raises(InvalidFilterError, match="cannot filter"):
                    self.rank(collection, filters={"metadata": metadata})

    def test_ranking_stays_inside_the_collection(self) -> None:
        compass = self.make("compass")
        other = self.make("other", {"n2": "north north", "x": "up up"})
        assert {n for n, _ in self.rank(compass)} == set(TEXTS)
        assert [n for n, _ in self.rank(other)] == ["n2", "x"]

    def test_deleted_chunks_disappear_at_once_and_from_the_engine_after_the_drain(self) -> None:
        collection = self.make("compass")
        index = index_for(collection)
        Document.objects.filter(collection=collection, external_id="n").delete()
        # Before the drain: the engine may still hold them, PostgreSQL's check drops them.
        top = self.rank(collection, top_k=2)
        assert top[0] == ("ne", 0.7071) and top[1] in {("e", 0.0), ("u", 0.0)}
        assert "n" not in {name for name, _ in self.rank(collection)}
        assert outbox.drain().failed == 0
        assert index.count(collection) == 3
        assert not sync.compare(collection)

    def test_chunks_the_engine_has_not_caught_up_on_are_found_at_once(self) -> None:
        """Read-your-writes: what PostgreSQL committed ranks before the outbox is drained."""
        collection = self.make("compass")
        ingest(collection, [Source.from_text("north north east", external_id="nne")])
        Document.objects.filter(collection=collection, external_id="ne").delete()
        expected = [("n", 1.0), ("nne", round(2 / math.sqrt(5), 4))]
        # Not drained: on a worker the commit would trigger it; here nothing has run.
        assert self.rank(collection, top_k=2) == expected
        assert "ne" not in {name for name, _ in self.rank(collection)}
        assert self.rank(collection, filters={"documents": ["nne", "e"]})[0] == expected[1]
        flat = {"metadata": {"group": "flat"}}
        assert self.rank(collection, filters=flat) == [("n", 1.0), ("e", 0.0)]
        assert outbox.drain().failed == 0
        assert self.rank(collection, top_k=2) == expected
        assert not sync.compare(collection)

    def test_many_vectors_rank_as_each_alone(self) -> None:
        collection = self.make("compass")
        ingest(collection, [Source.from_text("north north east", external_id="nne")])
        index = index_for(collection)
        vectors = [NORTH, [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.6, 0.8, 0.0]]
        for filters in (None, {"documents": ["n", "e", "nne"]}, {"metadata": {"rank": 3}}):
            parsed = Filters.parse(filters)
            alone = [index.rank(v, collection=collection, top_k=3, filters=parsed) for v in vectors]
            together = index.rank_many(vectors, collection=collection, top_k=3, filters=parsed)
            assert together == alone, filters
        assert index.rank_many([], collection=collection, top_k=3) == []

    def test_drift_is_named_and_a_rebuild_repairs_it(self) -> None:
        collection = self.make("compass")
        assert not sync.compare(collection)
        if index_for(collection).features.transactional:
            return  # the vectors are the chunk rows: nothing can drift
        gone = Document.objects.get(collection=collection, external_id="e").chunks.get().pk
        IndexOperation.objects.all().delete()  # a lost operation: what the outbox prevents
        Document.objects.filter(collection=collection, external_id="e").delete()
        IndexOperation.objects.all().delete()
        drift = sync.compare(collection)
        assert drift.extra == {gone} and not drift.missing
        assert "PostgreSQL holds 3 chunk vectors, the index 4" in drift.describe()
        before = Collection.objects.get(pk=collection.pk).index_space
        sync.rebuild(collection)
        assert Collection.objects.get(pk=collection.pk).index_space != before
        assert not sync.compare(collection)
        assert [n for n, _ in self.rank(collection)][:2] == ["n", "ne"]

    def test_re_embedding_moves_the_index_to_the_new_space(self, settings: Any) -> None:
        turned = {"keywords": ["east", "north", "up", "west"], "model": "turned"}
        configure(settings, EMBEDDERS={"turned": {**KEYWORD_EMBEDDER, "OPTIONS": turned}})
        collection = self.make("compass")
        run = IndexRun.objects.create(collection=collection, task="reembed_collection")
        reembed(collection, "turned", run=run)
        collection = Collection.objects.get(pk=collection.pk)
        assert collection.dimensions == 4
        east_in_new_space = [1.0, 0.0, 0.0, 0.0]
        # Before the outbox rebuilds the engine's space, PostgreSQL ranks the new vectors.
        assert [n for n, _ in self.rank(collection, east_in_new_space)][:2] == ["e", "ne"]
        assert outbox.drain().failed == 0
        collection = Collection.objects.get(pk=collection.pk)  # the rebuilt space's name
        assert [n for n, _ in self.rank(collection, east_in_new_space)][:2] == ["e", "ne"]
        assert not sync.compare(collection)
