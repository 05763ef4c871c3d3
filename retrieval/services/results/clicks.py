"""Clicks on results: a signed token names the search, the click names the document.

A kept search (a ``QueryTrace``) hands its reader a :func:`click_token`; following a
result posts it with the document's id (``POST /api/clicks/``), and :func:`record_click`
keeps one :class:`~retrieval.models.SearchClick` per search and document, its position
worked out from the trace. The token is signed with the site's ``SECRET_KEY`` and holds
the reader's id, so nobody can click in another's search. A click the reader may not
make (a document hidden from them, not among the search's results, a search gone) is
dropped without a word: the caller answers it as a recorded one.
"""

from __future__ import annotations

from typing import Any

from django.core import signing

from retrieval.exceptions import RetrievalError
from retrieval.models import Document, QueryTrace, SearchClick
from retrieval.services.access import Scope
from retrieval.services.results.page import document_positions

SALT = "retrieval.click"
#: How long after the search its results' clicks are counted, in seconds.
CLICK_TOKEN_MAX_AGE = 24 * 3600


class InvalidClickToken(RetrievalError, ValueError):
    """A click token that is not one of ours, has expired, or is another reader's."""


def click_token(trace_id: int, user: Any) -> str:
    """Return the token a reader posts with the clicks on the results of ``trace_id``."""
    return signing.dumps([trace_id, _reader(user)], salt=SALT)


def record_click(token: str, document_id: int, *, scope: Scope) -> SearchClick | None:
    """Record that ``scope``'s reader followed ``document_id`` among the results of the
    search ``token`` names; return the click, or ``None`` if it is not kept (dropped, or
    already counted). A bad token raises :class:`InvalidClickToken`."""
    try:
        trace_id, reader = signing.loads(token, salt=SALT, max_age=CLICK_TOKEN_MAX_AGE)
    except (signing.BadSignature, TypeError, ValueError) as e:
        raise InvalidClickToken("The click token is invalid or has expired.") from e
    if reader != _reader(scope.user) or not isinstance(trace_id, int):
        raise InvalidClickToken("The click token is invalid or has expired.")
    trace = QueryTrace.objects.filter(pk=trace_id).only("pk", "collection", "results").first()
    if trace is None:  # pruned since
        return None
    documents = Document.objects.filter(pk=document_id, collection_id=trace.collection_id)
    if not scope.restrict(documents, document="pk").exists():
        return None
    position = document_positions(trace.results).get(document_id)
    if position is None:
        return None
    click, created = SearchClick.objects.get_or_create(
        trace=trace, document_id=document_id, defaults={"position": position}
    )
    return click if created else None


def _reader(user: Any) -> str | None:
    pk = getattr(user, "pk", None)
    return None if pk is None else str(pk)
