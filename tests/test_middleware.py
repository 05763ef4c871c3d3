"""WarmUpMiddleware: what searches load on first use is loaded when a process builds its
application (WSGI or ASGI), so no search waits for it; a component that cannot load
leaves the application serving."""

from __future__ import annotations

import logging

import pytest
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.wsgi import WSGIHandler
from django.test import Client

from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.registry import embedders

pytestmark = pytest.mark.django_db
WARM_UP = "retrieval.middleware.WarmUpMiddleware"
LOCAL = "retrieval.services.embedders.local.LocalEmbedder"


@pytest.fixture
def warming(settings):
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, WARM_UP]


@pytest.mark.parametrize("handler", [WSGIHandler, ASGIHandler])
def test_building_the_application_loads_the_collections_embedders(
    handler, warming, retrieval_settings
):
    retrieval_settings(EMBEDDERS={"minilm": {"BACKEND": LOCAL, "OPTIONS": {"query_threads": 1}}})
    get_or_create_collection("guide", embedder="minilm")  # its dimension needs no model
    assert embedders["minilm"]._session is None
    handler()
    assert embedders["minilm"]._session is not None  # the model and the query's session
    assert embedders["minilm"]._query_session is not None


def test_a_component_that_cannot_load_leaves_the_application_serving(
    warming, retrieval_settings, caplog
):
    retrieval_settings(
        EMBEDDERS={"default": {"BACKEND": LOCAL, "OPTIONS": {"model_path": "/nowhere.onnx"}}},
    )
    with caplog.at_level(logging.WARNING, logger="retrieval.services.warmup"):
        assert Client().get("/api/schema/").status_code == 200
    assert "Warm-up of EMBEDDERS 'default' failed" in caplog.text
    assert "/nowhere.onnx" in caplog.text
