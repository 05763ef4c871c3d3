"""Every index backend on its real engine: pgvector in the test database; Chroma, Milvus Lite
and a Milvus server (2.3.5 standalone, from the ``milvus`` package) started here on
127.0.0.1, each once per session. Tests take ``index_alias`` and run once per backend."""

from __future__ import annotations

import pytest

from tests.support.engines import Engine

BACKENDS = {
    "pgvector": "retrieval.services.indexes.pgvector.PgvectorIndex",
    "chroma": "retrieval.services.indexes.chroma.ChromaIndex",
    "milvus": "retrieval.services.indexes.milvus.MilvusIndex",
    "milvus-server": "retrieval.services.indexes.milvus.MilvusIndex",
}
#: The backends on an engine outside PostgreSQL.
EXTERNAL = [kind for kind in BACKENDS if kind != "pgvector"]


@pytest.fixture(scope="session")
def engines(tmp_path_factory):
    started: dict[str, Engine] = {}
    yield started
    for engine in started.values():
        engine.stop()


def engine_for(engines: dict, kind: str, tmp_path_factory) -> Engine:
    if kind not in engines:
        engine = Engine(kind, tmp_path_factory.mktemp(kind) / "data")
        engine.start()
        engines[kind] = engine
    engine = engines[kind]
    if engine.process is None or engine.process.poll() is not None:
        engine.start()
    return engine


@pytest.fixture(params=list(BACKENDS))
def index_alias(request, engines, tmp_path_factory, keyword_settings, retrieval_settings):
    """Configure index "under_test" on one backend (its engine running) and return the alias."""
    kind = request.param
    options = {}
    if kind != "pgvector":
        options = dict(engine_for(engines, kind, tmp_path_factory).options)
    retrieval_settings(INDEXES={"under_test": {"BACKEND": BACKENDS[kind], "OPTIONS": options}})
    return "under_test"
