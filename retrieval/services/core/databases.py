"""Which database searches read from: a replica alias for read scale-out, or the primary.

``RETRIEVAL["SEARCH_DATABASE"]`` names a ``DATABASES`` alias (a streaming replica);
ranking and loading chunks then read there, while every write (ingestion, deletes,
runs) stays on the primary that Django's router picks. A replica replays the
primary's WAL a little later (milliseconds on a quiet LAN, more under load), so a
search right after an ingest may not see it yet. Reads go to the primary instead
inside :func:`read_primary`, and whenever the caller is inside a transaction on
the primary (it must see its own uncommitted writes). A search whose replica cannot be
reached reads the primary too (:func:`primary_if_unreachable`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.db import OperationalError, connections, router

from retrieval.conf import retrieval_settings

logger = logging.getLogger(__name__)

_read_primary: ContextVar[bool] = ContextVar("retrieval_read_primary", default=False)


def primary_database() -> str:
    """Return the alias chunks are written to (Django's router for ``Chunk``)."""
    from retrieval.models import Chunk

    return router.db_for_write(Chunk)


def search_database() -> str:
    """Return the alias ranking and loading chunks read from for this call."""
    from retrieval.models import Chunk

    alias = retrieval_settings.SEARCH_DATABASE
    if not alias or _read_primary.get():
        return router.db_for_read(Chunk)
    if connections[primary_database()].in_atomic_block:
        return primary_database()
    return alias


@contextmanager
def read_primary() -> Iterator[None]:
    """Make searches in this block (and this thread or task) read the primary."""
    token = _read_primary.set(True)
    try:
        yield
    finally:
        _read_primary.reset(token)


@contextmanager
def primary_if_unreachable() -> Iterator[str | None]:
    """Read the primary in this block if the search database cannot be connected to.

    Yields the reason when it falls back (``None`` otherwise). A connection that breaks
    later, mid-search, still fails that search: Django drops it when the request ends
    (``CONN_HEALTH_CHECKS`` checks a kept connection before each request).
    """
    alias = search_database()
    if alias == primary_database():
        yield None
        return
    try:
        connections[alias].ensure_connection()
    except OperationalError as e:
        reason = f"search database {alias!r} unreachable, read {primary_database()!r}: {e}".strip()
        logger.warning("Searching the primary: %s", reason)
        with read_primary():
            yield reason
        return
    yield None
