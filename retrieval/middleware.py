"""Middleware of the retrieval app."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.exceptions import MiddlewareNotUsed


class WarmUpMiddleware:
    """Load the models and clients searches use when the process builds its application.

    Django builds the middleware once per process, when the WSGI or ASGI application (or
    ``runserver``) is created, before the first request; never for management commands.
    This runs :func:`~retrieval.services.warmup.warm_up` there, then leaves the request
    chain (``MiddlewareNotUsed``), so requests never pass through it. Add
    ``"retrieval.middleware.WarmUpMiddleware"`` to ``MIDDLEWARE``.
    """

    def __init__(self, get_response: Callable[[Any], Any]) -> None:
        from retrieval.services.warmup import warm_up

        warm_up()
        raise MiddlewareNotUsed("the retrieval app's models are loaded")
