"""The rewriter interface."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from retrieval.models import Collection
from retrieval.services.query.filters import Filters
from retrieval.services.query.tracing import current_trace

#: A conversation turn: {"role": "user" | "assistant", "content": "..."}.
Turn = dict[str, str]


@dataclass(frozen=True)
class Rewrite:
    """The queries to retrieve with (results of several are fused), and why.

    ``fallback`` says the rewriter answered with the original query because its own
    method failed or gave nothing; ``reason`` then says what went wrong.
    """

    original: str
    queries: tuple[str, ...]
    method: str
    fallback: bool = False
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "original": self.original,
            "queries": list(self.queries),
            "method": self.method,
            "fallback": self.fallback,
            "reason": self.reason,
            **self.details,
        }


class BaseQueryRewriter(ABC):
    """Turn a query (and optionally the conversation before it) into search queries."""

    alias: str = ""
    #: True when ``_rewrite`` reads the collection (and so takes ``filters``: the
    #: search's filters and access scope, which its reading must respect).
    supports_filters: bool = False

    def rewrite(
        self,
        query: str,
        *,
        collection: Collection,
        history: Sequence[Turn] | None = None,
        filters: Filters | None = None,
    ) -> Rewrite:
        """Return the queries to run for ``query``; never raises for a bad model answer."""
        options = {"filters": filters} if self.supports_filters else {}
        result = self._rewrite(query, collection=collection, history=list(history or ()), **options)
        trace = current_trace()
        if trace is not None:
            trace.record("rewrite", rewriter=self.alias or type(self).__name__, **result.to_dict())
        return result

    @abstractmethod
    def _rewrite(self, query: str, *, collection: Collection, history: list[Turn]) -> Rewrite:
        """Rewrite ``query``; arguments are normalised."""

    def check(self) -> list:
        return []


def format_history(history: Sequence[Turn]) -> str:
    """Render conversation turns one per line, as prompts show them."""
    return "\n".join(f"{turn.get('role', 'user')}: {turn.get('content', '')}" for turn in history)
