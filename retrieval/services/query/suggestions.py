"""Query suggestions: autocomplete from a collection's successful past queries.

A suggestion is a past query of the collection, in its normal form (lower case, single
spaces), that started with what the reader typed, found something, and was asked by a
reader: on the search page or the API (``QueryTrace.Source``), never by editors in the
playground or an evaluation. Suggestions come from recorded traces, so they need
``TRACE_SAMPLE_RATE`` above 0; the last ``SUGGEST_DAYS`` days are read.

Who is offered what (fail closed). A query is typed text another reader may not have
meant to share, and may name what only its author could read (a hidden document's
title). So:

- a reader who sees every document of the collection is offered the queries asked by
  at least ``SUGGEST_MIN_USERS`` distinct signed-in users (anonymous searches cannot be
  told apart and count for none), and her own;
- a reader from whom some document of the collection is hidden is offered her own past
  queries only: she was shown their results, while the users counted for a popular
  query may have seen what she cannot, and a count of them does not say whose scope
  they had;
- nobody is offered a query an editor blocked (:class:`~retrieval.models.BlockedSuggestion`,
  a query or a ``*`` pattern, of the collection or of every collection).
"""

from __future__ import annotations

import operator
from datetime import timedelta
from functools import reduce
from typing import Any

from django.db.models import Count, Exists, OuterRef, Q
from django.utils import timezone

from retrieval.conf import retrieval_settings
from retrieval.models import BlockedSuggestion, Collection, QueryTrace
from retrieval.normalizing import QUERY_KEY_LENGTH, matches
from retrieval.services.access import Scope
from retrieval.services.core.databases import search_database

__all__ = ["suggest"]

#: The faces whose searches are readers' own (not editors' testing, tools or code).
READERS_SOURCES = (QueryTrace.Source.PAGE, QueryTrace.Source.API)


def suggest(
    prefix: str, *, collection: Collection, scope: Scope, limit: int | None = None
) -> list[str]:
    """Return at most ``limit`` (default ``SUGGEST_LIMIT``) past queries of ``collection``
    starting with ``prefix`` that ``scope`` may be offered, the most asked first.

    A prefix shorter than ``SUGGEST_MIN_PREFIX`` characters gets none.
    """
    key = _prefix_key(prefix)
    if len(key.strip()) < int(retrieval_settings.SUGGEST_MIN_PREFIX):
        return []
    limit = min(
        limit or int(retrieval_settings.SUGGEST_LIMIT), int(retrieval_settings.SUGGEST_LIMIT)
    )
    user_id = getattr(scope.user, "pk", None)
    popular = scope.sees_all_of(collection)
    if not popular and user_id is None:
        return []  # nothing of her own, and nobody else's to offer
    since = timezone.now() - timedelta(days=int(retrieval_settings.SUGGEST_DAYS))
    traces = QueryTrace.objects.using(search_database()).filter(
        collection=collection,
        created_at__gte=since,
        source__in=READERS_SOURCES,
        result_count__gt=0,
        query_key__startswith=key,
    )
    if not popular:
        traces = traces.filter(user_id=user_id)
    rows = (
        traces.exclude(Exists(_blocked(collection)))
        .values("query_key")
        .annotate(**_counts(user_id))
        .filter(_offered(popular, user_id))
        .order_by("-users", "-searches", "query_key")
        .values_list("query_key", flat=True)[:limit]
    )
    return list(rows)


def _prefix_key(prefix: str) -> str:
    """Return ``prefix`` in the normal form of ``QueryTrace.query_key``, a space typed
    after its last word kept (so "new " offers "new york", not "newcastle")."""
    text = prefix.replace("\x00", "")
    key = " ".join(text.split()).lower()
    if key and text[-1:].isspace():
        key += " "
    return key[:QUERY_KEY_LENGTH]


def _counts(user_id: Any) -> dict[str, Any]:
    counts: dict[str, Any] = {
        "users": Count("user", distinct=True),
        "searches": Count("pk"),
    }
    if user_id is not None:
        counts["mine"] = Count("pk", filter=Q(user_id=user_id))
    return counts


def _offered(popular: bool, user_id: Any) -> Q:
    """The condition on a query's counts for it to be offered (see the module)."""
    conditions = []
    if popular:
        conditions.append(Q(users__gte=max(1, int(retrieval_settings.SUGGEST_MIN_USERS))))
    if user_id is not None:
        conditions.append(Q(mine__gt=0))
    return reduce(operator.or_, conditions)


def _blocked(collection: Collection):
    """The blocked suggestions matching the outer trace's query."""
    return BlockedSuggestion.objects.filter(
        Q(collection=collection) | Q(collection__isnull=True), matches(OuterRef("query_key"))
    )
