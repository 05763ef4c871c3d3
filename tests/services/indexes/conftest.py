"""Every index backend on its real engine: pgvector in the test database; Chroma, Milvus Lite
and a Milvus server (2.3.5 standalone, from the ``milvus`` package) started here on
127.0.0.1, each once per session. Tests take ``index_alias`` and run once per backend."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engines import Engine

BACKENDS = {
    "pgvector": "retrieval.services.indexes.pgvector.PgvectorIndex",
    "chroma": "retrieval.services.indexes.chroma.ChromaIndex",
    "milvus": "retrieval.services.indexes.milvus.MilvusIndex",
    "milvus-server": "retrieval.services.indexes.milvus.MilvusIndex",
}
#: The backends on an engine outside PostgreSQL.
EXTERNAL = [kind for kind in BACKENDS if kind != "pgvector"]
HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Keep this folder's tests on one pytest-xdist worker (``dev.py test`` runs two, with
    ``--dist loadgroup``): its engines start once per session in the worker that first
    needs one, some through ``request.getfixturevalue``, and a Milvus server is worth
    starting once (30-45 s, and 15% of a core while it idles)."""
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.xdist_group("engines"))


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
