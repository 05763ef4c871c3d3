"""System checks on collections' indexes."""

from __future__ import annotations

import pytest

from retrieval.checks import check_collection_embedders, check_components
from retrieval.services.ingestion.collections import get_or_create_collection

pytestmark = pytest.mark.django_db


def ids(messages) -> list[str]:
    return [m.id for m in messages]


def test_an_unconfigured_index_is_named(keyword_settings, retrieval_settings):
    retrieval_settings(
        INDEXES={"other": {"BACKEND": "retrieval.services.indexes.pgvector.PgvectorIndex"}}
    )
    get_or_create_collection("maps", index="other")
    assert "retrieval.E016" not in ids(check_collection_embedders(databases=["default"]))
    retrieval_settings(INDEXES={"other": {"BACKEND": "retrieval.services.indexes.pgvector.X"}})
    assert "retrieval.E003" in ids(check_components())


def test_an_index_moved_to_another_kind_is_an_error(keyword_settings, retrieval_settings, settings):
    retrieval_settings(
        INDEXES={"other": {"BACKEND": "retrieval.services.indexes.pgvector.PgvectorIndex"}}
    )
    get_or_create_collection("maps", index="other")
    chroma = {"BACKEND": "retrieval.services.indexes.chroma.ChromaIndex"}
    retrieval_settings(INDEXES={"other": {**chroma, "OPTIONS": {"host": "127.0.0.1"}}})
    messages = check_collection_embedders(databases=["default"])
    assert "retrieval.E016" in ids(messages)
    assert "now in an external engine" in " ".join(m.msg for m in messages)
    settings.RETRIEVAL = {**settings.RETRIEVAL, "INDEXES": {}}
    messages = check_collection_embedders(databases=["default"])
    assert any("not in RETRIEVAL['INDEXES']" in m.msg for m in messages)


def test_bad_index_options_are_reported(retrieval_settings):
    chroma = "retrieval.services.indexes.chroma.ChromaIndex"
    retrieval_settings(INDEXES={"bad": {"BACKEND": chroma}})
    errors = [m for m in check_components() if m.id == "retrieval.E003"]
    assert any("either host" in m.msg for m in errors)
    milvus = "retrieval.services.indexes.milvus.MilvusIndex"
    refused = "timeout must be a number of seconds > 0"
    for timeout in (0, -1, "10"):
        retrieval_settings(
            INDEXES={"bad": {"BACKEND": milvus, "OPTIONS": {"uri": "x", "timeout": timeout}}}
        )
        errors = [m for m in check_components() if m.id == "retrieval.E003"]
        assert any(refused in m.msg for m in errors), timeout
    refused = "prefilter_share must be a number in [0, 1]"
    for share in (-0.1, 1.5, True, "0.05"):
        retrieval_settings(
            INDEXES={"bad": {"BACKEND": milvus, "OPTIONS": {"uri": "x", "prefilter_share": share}}}
        )
        errors = [m for m in check_components() if m.id == "retrieval.E003"]
        assert any(refused in m.msg for m in errors), share
