"""Every index backend of the app through the public suite (retrieval.testing.indexes),
each on its real engine: pgvector in the test database; Chroma, Milvus Lite and a Milvus
server started here on 127.0.0.1 (see conftest)."""

from __future__ import annotations

from typing import Any

from retrieval.testing.indexes import IndexSuite
from tests.services.indexes.conftest import BACKENDS, engine_for


class EngineIndexSuite(IndexSuite):
    """The suite on an engine this test session starts once."""

    kind = ""

    def index_config(self, request) -> dict[str, Any]:
        engines = request.getfixturevalue("engines")
        engine = engine_for(engines, self.kind, request.getfixturevalue("tmp_path_factory"))
        return {"BACKEND": BACKENDS[self.kind], "OPTIONS": dict(engine.options)}


class TestPgvectorIndex(IndexSuite):
    backend = BACKENDS["pgvector"]


class TestChromaIndex(EngineIndexSuite):
    kind = "chroma"


class TestMilvusIndex(EngineIndexSuite):
    kind = "milvus"


class TestMilvusServerIndex(EngineIndexSuite):
    kind = "milvus-server"
