"""Admin for the app's models: one module per screen, each registering its ModelAdmin.

Records the system writes (chunks, triples, runs) are read-only. Everything that
starts indexing goes through :mod:`retrieval.admin.enqueue`.
"""

from django.contrib import admin

from . import (  # noqa: F401  (they register)
    chunks,
    clicks,
    collections,
    documents,
    evals,
    goldens,
    graph,
    promotions,
    relevance,
    runs,
    traces,
    triples,
)
from .index import list_screens

list_screens(admin.site)
