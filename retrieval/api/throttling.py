"""Rate limits for the search views, set by the host in DRF's ``DEFAULT_THROTTLE_RATES``."""

from __future__ import annotations

from typing import Any

from rest_framework.settings import api_settings
from rest_framework.throttling import BaseThrottle, ScopedRateThrottle

SEARCH_SCOPE = "retrieval_search"


class SearchRateThrottle(ScopedRateThrottle):
    """DRF's scoped throttle that lets requests through while its scope has no rate.

    A host limits searches with ``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"] =
    {"retrieval_search": "10/min"}``; without that entry nothing is throttled. Rates
    are read per request, so ``override_settings`` applies at once.
    """

    def get_rate(self) -> str | None:
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)

    def allow_request(self, request: Any, view: Any) -> bool:
        if not api_settings.DEFAULT_THROTTLE_RATES.get(getattr(view, self.scope_attr, None)):
            return True
        return super().allow_request(request, view)


class SearchThrottleMixin:
    """Throttle a view under the ``retrieval_search`` scope, beside the host's throttles."""

    throttle_scope = SEARCH_SCOPE

    def get_throttles(self) -> list[BaseThrottle]:
        # DRF's own scoped throttle would fail these views when the host has no
        # "retrieval_search" rate, so ours stands in for it; a host's subclass counts them
        # itself; otherwise ours is added.
        classes = [
            SearchRateThrottle if cls is ScopedRateThrottle else cls
            for cls in api_settings.DEFAULT_THROTTLE_CLASSES
        ]
        if not any(issubclass(cls, ScopedRateThrottle) for cls in classes):
            classes.append(SearchRateThrottle)
        return [throttle() for throttle in classes]
