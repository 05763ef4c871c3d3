"""The queue seam: where the app's background work runs.

The app names its work (``"index_document"``, registered by :mod:`retrieval.tasks`)
and hands a backend the work's dotted path (``"retrieval.tasks.index_document"``) with
JSON-able arguments, once the transaction commits; it never imports a queue library
itself. Backends: django-q2 (the default) and Django's Tasks framework
(``django.tasks`` on Django 6, the ``django-tasks`` backport on 5.2), so any Tasks
backend (database, RQ, Celery ...) runs the app's work.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from django.core.exceptions import ImproperlyConfigured

__all__ = ["BaseQueue"]


class BaseQueue(ABC):
    """A queue backend: configured in ``RETRIEVAL["QUEUES"]["default"]``."""

    alias: str = "default"
    #: True when the backend runs periodic work (:meth:`schedule_every`) itself.
    supports_schedules: bool = False
    #: True when the backend runs work at a later time (:meth:`push_later`).
    supports_defer: bool = False
    #: What to install when :meth:`installed` is False.
    install_hint: str = ""

    @abstractmethod
    def installed(self) -> bool:
        """True when the backend's library and app are installed (else work runs inline
        when ``TASKS_SYNC`` is None)."""

    def require(self) -> None:
        """Raise ``ImproperlyConfigured`` naming what to install if the backend is missing."""
        if not self.installed():
            raise ImproperlyConfigured(
                f"{type(self).__name__} cannot run work: {self.install_hint} Or set "
                'RETRIEVAL["TASKS_SYNC"] = True to run it inline.'
            )

    @abstractmethod
    def push(self, path: str, args: list[Any], kwargs: dict[str, Any], *, label: str) -> str:
        """Hand ``path(*args, **kwargs)`` to the workers now; return the task's id.

        Raise any exception when the broker cannot take it: the caller records why.
        """

    def push_later(
        self, path: str, args: list[Any], kwargs: dict[str, Any], *, label: str, seconds: float
    ) -> str:
        """Hand ``path(*args, **kwargs)`` to the workers to run in ``seconds`` (where
        :attr:`supports_defer`); return the task's id."""
        raise NotImplementedError(f"{type(self).__name__} cannot run work later.")

    def schedule_every(self, path: str, *, minutes: int, name: str) -> None:  # noqa: B027
        """Run ``path()`` every ``minutes`` on the workers (a no-op where unsupported)."""

    def connect_worker_started(self, receiver: Callable[[], None]) -> None:  # noqa: B027
        """Have ``receiver()`` called in each worker process as it starts (a no-op where
        the library tells of no such moment)."""

    def check(self) -> list[Any]:
        """Return Django check messages about the backend's configuration."""
        return []
