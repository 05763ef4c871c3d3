"""Rate limits for the API by scope, set by the host in DRF's ``DEFAULT_THROTTLE_RATES``.

=====================  ==============================================================
``retrieval_search``   searches, batch searches, tool calls that search (``retrieve``)
``retrieval_upload``   creating a document (``POST /api/documents/``, text or file)
``retrieval_write``    every other write: collections, document delete and reindex,
                       index-run cancel and retry, feedback, tool calls that index
``retrieval_graph``    an entity's neighbourhood (a recursive walk of the graph)
``retrieval_click``    a click on a search result (``POST /api/clicks/``)
``retrieval_suggest``  query suggestions (``GET /api/suggest/``, one a keystroke)
=====================  ==============================================================

A scope without a rate lets every request through. A view says its scope with a
mixin below; views that read and write alike pick it per request, from the method.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework.permissions import SAFE_METHODS
from rest_framework.settings import api_settings
from rest_framework.throttling import BaseThrottle, ScopedRateThrottle

SEARCH_SCOPE = "retrieval_search"
UPLOAD_SCOPE = "retrieval_upload"
WRITE_SCOPE = "retrieval_write"
GRAPH_SCOPE = "retrieval_graph"
CLICK_SCOPE = "retrieval_click"
SUGGEST_SCOPE = "retrieval_suggest"

#: Tools of ``services.tools.collection_tools`` whose calls write (index) rather than search.
WRITING_TOOLS = frozenset({"index_document"})


class RetrievalRateThrottle(ScopedRateThrottle):
    """DRF's scoped throttle that lets requests through while their scope has no rate.

    A host limits, say, uploads with ``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"] =
    {"retrieval_upload": "10/min"}``; without that entry nothing is throttled. Rates
    are read per request, so ``override_settings`` applies at once.
    """

    def get_rate(self) -> str | None:
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)

    def allow_request(self, request: Any, view: Any) -> bool:
        if not api_settings.DEFAULT_THROTTLE_RATES.get(getattr(view, self.scope_attr, None)):
            return True
        return super().allow_request(request, view)


#: The name this throttle had while searches were the only scope.
SearchRateThrottle = RetrievalRateThrottle


class ScopedThrottleMixin:
    """Throttle a view under its ``throttle_scope`` (None: not at all), beside the host's.

    DRF's own scoped throttle would fail these views when the host has no rate for
    the scope, so ours stands in for it, and a host's subclass of it is left out
    then (it would fail too); with a rate, a host's subclass counts the requests
    itself; otherwise ours is added.
    """

    throttle_scope: str | None = None

    def get_throttles(self) -> list[BaseThrottle]:
        rated = bool(api_settings.DEFAULT_THROTTLE_RATES.get(self.throttle_scope))
        classes = []
        for cls in api_settings.DEFAULT_THROTTLE_CLASSES:
            if cls is ScopedRateThrottle:
                cls = RetrievalRateThrottle
            elif issubclass(cls, ScopedRateThrottle) and not rated:
                continue
            classes.append(cls)
        if not any(issubclass(cls, ScopedRateThrottle) for cls in classes):
            classes.append(RetrievalRateThrottle)
        return [throttle() for throttle in classes]


class SearchThrottleMixin(ScopedThrottleMixin):
    """Throttle a view under ``retrieval_search``."""

    throttle_scope = SEARCH_SCOPE


class ClickThrottleMixin(ScopedThrottleMixin):
    """Throttle a view under ``retrieval_click``."""

    throttle_scope = CLICK_SCOPE


class SuggestThrottleMixin(ScopedThrottleMixin):
    """Throttle a view under ``retrieval_suggest``."""

    throttle_scope = SUGGEST_SCOPE


class WriteThrottleMixin(ScopedThrottleMixin):
    """Throttle writes (any method but GET, HEAD, OPTIONS) under ``retrieval_write``."""

    request: Any

    @property  # type: ignore[override]
    def throttle_scope(self) -> str | None:
        return None if self.request.method in SAFE_METHODS else WRITE_SCOPE


class UploadThrottleMixin(WriteThrottleMixin):
    """Creating a document counts under ``retrieval_upload``, other writes under ``..._write``."""

    @property
    def throttle_scope(self) -> str | None:
        if self.request.method == "POST" and getattr(self, "action", None) == "create":
            return UPLOAD_SCOPE
        return super().throttle_scope


class ToolCallThrottleMixin(ScopedThrottleMixin):
    """A tool call that indexes counts under ``retrieval_write``, others under ``..._search``."""

    request: Any

    @property  # type: ignore[override]
    def throttle_scope(self) -> str | None:
        data = self.request.data
        name = data.get("name") if isinstance(data, Mapping) else None
        # Read before validation: a name of any JSON type (an object is unhashable).
        return WRITE_SCOPE if isinstance(name, str) and name in WRITING_TOOLS else SEARCH_SCOPE
