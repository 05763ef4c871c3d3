"""Shared fixtures. Every test that touches the database uses the real PostgreSQL
+ pgvector of ``project.settings`` (embedded, or ``DATABASE_URL``)."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from retrieval.conf import DEFAULTS

pytest_plugins = ["tests.support.browser"]

WAGTAIL_SETTINGS = "tests.wagtail_site.settings"


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Collect tests/wagtail_site only under its own settings (tests/test_wagtail.py runs
    it in a process of its own), and only its tests then."""
    import os

    if not collection_path.name.startswith("test_") or collection_path.suffix != ".py":
        return None
    wagtail_run = os.environ.get("DJANGO_SETTINGS_MODULE") == WAGTAIL_SETTINGS
    return ("wagtail_site" in collection_path.parts) != wagtail_run or None


SAMPLE_DOCS = Path(__file__).resolve().parent.parent / "project" / "sample_docs"
#: A small BEIR-layout set written for the tests: 40 how-to notes, 14 judged questions.
MINIBEIR = Path(__file__).resolve().parent / "data" / "minibeir"

KEYWORD_EMBEDDER = {"BACKEND": "retrieval.testing.KeywordEmbedder"}


def collection_of(name: str, texts: dict[str, str]):
    """Collection ``name`` holding one indexed document per ``{external id: text}``."""
    from retrieval.services.ingestion.collections import get_or_create_collection
    from retrieval.services.ingestion.ingest import Source, ingest

    collection, _ = get_or_create_collection(name)
    ingest(collection, [Source.from_text(text, external_id=key) for key, text in texts.items()])
    return collection


def editor(username: str = "editor", **fields: Any):
    """A user holding every model permission of the app (not a superuser)."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission

    model = get_user_model()
    user = model.objects.create_user(username=username, password="x", **fields)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="retrieval"))
    return model.objects.get(pk=user.pk)  # no stale permission cache


def chunk_ids() -> dict[str, list[int]]:
    """Each document's chunk ids, by external id, in chunk order."""
    from retrieval.models import Chunk

    ids: dict[str, list[int]] = {}
    for external_id, pk in Chunk.objects.order_by("document__external_id", "index").values_list(
        "document__external_id", "pk"
    ):
        ids.setdefault(external_id, []).append(pk)
    return ids


def analyze_tables() -> None:
    """Give the planner the statistics autovacuum would keep for what a test wrote.

    A test's rows are never committed, so autovacuum never analyzes them; and a table
    it vacuumed after an earlier test's rollback reads as empty (no live rows on its
    pages), which makes the planner nest loops over thousands of postings."""
    from django.db import connection

    tables = [
        "retrieval_chunk",
        "retrieval_document",
        "retrieval_bm25_posting",
        "retrieval_bm25_chunk",
        "retrieval_bm25_term",
    ]
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {', '.join(tables)}")


@pytest.fixture(autouse=True)
def _media_root(settings, tmp_path_factory):
    """Keep stored uploads out of the example site's data folder."""
    settings.MEDIA_ROOT = str(tmp_path_factory.mktemp("media"))


@pytest.fixture
def retrieval_settings(settings):
    """Return a function that replaces parts of ``RETRIEVAL`` for one test."""

    def configure(**overrides: Any) -> None:
        current = dict(getattr(settings, "RETRIEVAL", {}) or {})
        for key, value in overrides.items():
            if isinstance(value, dict) and key in DEFAULTS and isinstance(DEFAULTS[key], dict):
                current[key] = {**current.get(key, {}), **value}
            else:
                current[key] = value
        settings.RETRIEVAL = current

    return configure


@pytest.fixture
def keyword_settings(retrieval_settings):
    """Make the hand-checkable keyword embedder the default, with small chunks."""
    retrieval_settings(
        EMBEDDERS={"default": KEYWORD_EMBEDDER},
        CHUNKERS={
            "default": {
                "BACKEND": "retrieval.services.chunkers.recursive.RecursiveChunker",
                "OPTIONS": {"max_tokens": 12, "min_tokens": 1},
            }
        },
    )


@pytest.fixture(scope="session")
def pooled_database(django_db_setup):
    """The ``pooled`` alias (tests/support/settings.py), its pool's connections all opened.

    Its pool is closed before the test database is dropped: open connections would
    keep ``DROP DATABASE`` from running.
    """
    from django.db import connections

    connections["pooled"].pool.open(wait=True)
    yield "pooled"
    connections["pooled"].close()
    connections["pooled"].close_pool()


@pytest.fixture
def new_database():
    """The name of a new, empty database on the test server, dropped afterwards: for a
    site that a test installs and migrates in another process (tests/test_packaging.py,
    tests/test_tutorial.py)."""
    import uuid

    import psycopg
    from django.db import connection

    from tests.support.processes import database_url

    name = f"retrieval_site_{uuid.uuid4().hex[:8]}"
    admin_url = database_url(connection.settings_dict, "postgres")
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield name
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def sample_docs() -> Path:
    return SAMPLE_DOCS


@pytest.fixture
def llm_server(retrieval_settings):
    """A scripted OpenAI-compatible server configured as the ``default`` LLM.

    Queue answers with ``llm_server.queue_chat(...)``; the Django cache is cleared so
    no answer leaks between tests.
    """
    from django.core.cache import cache

    from tests.support.openai_server import OpenAIServer

    cache.clear()
    with OpenAIServer(models=("test-chat",)) as server:
        retrieval_settings(
            LLMS={
                "default": {
                    "BACKEND": "retrieval.services.llms.openai.OpenAIChatLLM",
                    "OPTIONS": {"model": "test-chat", "base_url": server.base_url, "timeout": 5},
                }
            }
        )
        yield server
    cache.clear()


@pytest.fixture
def graph_settings(retrieval_settings):
    """Keyword embedder, one chunk per short paragraph, the sentence extractor as default.

    Returns the extractor, whose ``seen`` lists every text it was asked about.
    """
    from retrieval.services.registry import extractors

    retrieval_settings(
        EMBEDDERS={"default": KEYWORD_EMBEDDER},
        CHUNKERS={
            "default": {
                "BACKEND": "retrieval.services.chunkers.paragraph.ParagraphChunker",
                "OPTIONS": {"max_chars": 50},
            }
        },
        EXTRACTORS={"default": {"BACKEND": "tests.support.extractors.SentenceExtractor"}},
    )
    return extractors["default"]


#: Four facts for the sentence extractor: Bob owns Carol Corp, which employs Dave, ...
TOWN = [
    "Bob owns Carol_Corp (0.9).",
    "Carol_Corp employs Dave (0.7).",
    "Alice knows Bob (0.4).",
    "Dave trains Eve.",
]


@pytest.fixture
def town(graph_settings):
    """A collection of the :data:`TOWN` paragraphs, its graph extracted."""
    from retrieval.services.graph.extraction import extract_graph

    collection = collection_of("town", {f"p{i}": text for i, text in enumerate(TOWN)})
    extract_graph(collection)
    return collection


def run_async(coroutine):
    """Run ``coroutine`` in a fresh event loop on its own thread: the screen tests' browser
    may keep a loop running in this one."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
