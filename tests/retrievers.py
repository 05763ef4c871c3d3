"""Retrievers for tests that exercise failure handling of the components around them."""

from __future__ import annotations

from retrieval.exceptions import RetrievalError
from retrieval.services.retrievers.base import BaseRetriever


class BrokenRetriever(BaseRetriever):
    """Fail every search, as a leg whose backend is down would."""

    def _rank(self, query, *, collection, top_k, filters):
        raise RetrievalError("backend is down")
