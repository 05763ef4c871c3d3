"""Loading, at a process's start, what searches would otherwise load on first use.

A local embedder's model takes 1-7 s to load, the ``openai`` client about 2 s to
import: work the first search of every process would do while its user waits, and
count against its ``SEARCH_DEADLINE``. :func:`warm_up` does it first; the
:class:`~retrieval.middleware.WarmUpMiddleware` runs it when a web server process
builds its application (never in management commands or migrations).
"""

from __future__ import annotations

import logging

from django.db import DatabaseError

from retrieval.conf import retrieval_settings
from retrieval.models import Collection
from retrieval.services.registry import embedders, llms, rerankers

logger = logging.getLogger(__name__)


def warm_up() -> list[str]:
    """Load the collections' embedders (and ``DEFAULT_EMBEDDER``), every LLM's client and
    every reranker's model; return what was warmed, as ``"KIND:alias"``.

    A component that fails to load is logged and skipped: the search that uses it raises
    the same error, and the system checks name it.
    """
    aliases = {retrieval_settings.DEFAULT_EMBEDDER}
    try:
        aliases |= set(Collection.objects.order_by().values_list("embedder", flat=True).distinct())
    except DatabaseError as e:  # not migrated yet, or unreachable: the default alone
        logger.warning("Warm-up could not list the collections' embedders: %s", e)
    warmed = []
    for kind, handler, names in (
        ("EMBEDDERS", embedders, sorted(alias for alias in aliases if alias in embedders)),
        ("LLMS", llms, llms.aliases()),
        ("RERANKERS", rerankers, rerankers.aliases()),
    ):
        for alias in names:
            try:
                handler[alias].warm()
            except Exception as e:  # raised again, to the search, when it is used
                logger.warning("Warm-up of %s %r failed: %s", kind, alias, e, exc_info=True)
            else:
                warmed.append(f"{kind}:{alias}")
    return warmed
