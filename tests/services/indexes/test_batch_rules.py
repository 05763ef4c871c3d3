"""A batch answered at once (one engine request for every query: Chroma, Milvus) applies the
editors' rules as one search does: promotions first, hidden results left out."""

from __future__ import annotations

import pytest

from retrieval.models import Document, HiddenResult, Promotion
from retrieval.services.access import Scope
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.ingest import Source, ingest
from retrieval.services.query.search import search_batch
from tests.services.indexes.conftest import BACKENDS, engine_for

TEXTS = {"n": "north", "nne": "north north east", "e": "east", "u": "up"}


@pytest.fixture
def chroma(engines, tmp_path_factory, keyword_settings, retrieval_settings):
    engine = engine_for(engines, "chroma", tmp_path_factory)
    retrieval_settings(INDEXES={"ext": {"BACKEND": BACKENDS["chroma"], "OPTIONS": engine.options}})
    collection, _ = get_or_create_collection("compass", index="ext")
    ingest(collection, [Source.from_text(t, external_id=k) for k, t in TEXTS.items()])
    return collection


def batch(collection, top_k: int) -> list[list[str]]:
    answers = search_batch(
        ["north", "east"], collection=collection, retriever="dense", scope=Scope.ALL, top_k=top_k
    )
    return [[r.chunk.document.external_id for r in answer] for answer in answers]


@pytest.mark.django_db(transaction=True)
def test_a_batch_answered_at_once_applies_promotions_and_hidden_results(chroma):
    assert batch(chroma, 2) == [["n", "nne"], ["e", "nne"]]
    document = {d.external_id: d for d in Document.objects.filter(collection=chroma)}
    HiddenResult.objects.create(collection=chroma, query="north", document=document["n"])
    Promotion.objects.create(collection=chroma, query="east", document=document["u"])
    north, east = batch(chroma, 2)
    assert north[0] == "nne" and "n" not in north and len(north) == 2  # still top_k
    assert east == ["u", "e"]
