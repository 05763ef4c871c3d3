"""Hand work to the configured queue once the transaction commits, or run it inline.

Work is named, never addressed by path: :mod:`retrieval.tasks` registers each of its
functions with :func:`task` (the one list of the app's background work), and services
hand a name (``"drain_index_outbox"``) to :func:`enqueue_after_commit`; the backend gets
the registered function's dotted path, which its workers import.

``RETRIEVAL["QUEUES"]["default"]`` names the backend (django-q2 by default, or Django's
Tasks framework); ``RETRIEVAL["TASKS_SYNC"]`` runs everything inline instead (True), on
the queue (False), or inline only when the queue's library is not installed (None).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

from django.db import transaction

from retrieval.conf import retrieval_settings
from retrieval.exceptions import RetrievalError
from retrieval.services.registry import queues

from .base import BaseQueue

__all__ = [
    "TASKS",
    "BaseQueue",
    "enqueue_after_commit",
    "run_now",
    "runs_inline",
    "schedule_every",
    "task",
    "task_named",
    "task_path",
]

logger = logging.getLogger(__name__)

#: The app's background work by name, registered by :mod:`retrieval.tasks` (``@task``).
TASKS: dict[str, Callable[..., Any]] = {}

Work = TypeVar("Work", bound=Callable[..., Any])


def task(function: Work) -> Work:
    """Register ``function`` as background work, named by its own name (a decorator)."""
    TASKS[function.__name__] = function
    return function


def task_named(name: str) -> Callable[..., Any]:
    """Return the work registered as ``name`` (``RetrievalError`` naming those known)."""
    try:
        return TASKS[name]
    except KeyError:
        raise RetrievalError(f"Unknown task {name!r}; tasks: {', '.join(TASKS)}.") from None


def task_path(name: str) -> str:
    """Return the dotted path by which a worker imports the work ``name``."""
    function = task_named(name)
    return f"{function.__module__}.{function.__qualname__}"


def runs_inline(sync: bool | None = None) -> bool:
    """Return whether work runs in this process rather than on the queue's workers."""
    if sync is not None:
        return sync
    configured = retrieval_settings.TASKS_SYNC
    if configured is None:
        return not queues["default"].installed()
    return bool(configured)


def enqueue_after_commit(
    name: str,
    *args: Any,
    label: str,
    queued: Callable[[str], Any] = lambda task_id: None,
    unreachable: Callable[[str], Any] = lambda message: None,
    using: str = "default",
    delay: float | None = None,
    **kwargs: Any,
) -> None:
    """Once the transaction commits, hand the work ``name(*args, **kwargs)`` to the queue.

    Arguments must be JSON-able (primary keys, flags). ``queued`` receives the task's
    id; ``unreachable`` the reason the broker refused it, to be said on a run rather
    than in a 500. ``delay`` runs it that many seconds later (a queue that
    ``supports_defer``). Inline callers use :func:`run_now`.
    """
    path = task_path(name)
    queue = queues["default"]
    queue.require()

    def push() -> None:
        try:
            if delay is None:
                task_id = queue.push(path, list(args), kwargs, label=label)
            else:
                task_id = queue.push_later(path, list(args), kwargs, label=label, seconds=delay)
        except Exception as e:  # the broker is down, or the backend refused the task
            logger.exception("Could not enqueue %s", label)
            unreachable(f"Could not reach the task queue: {e}")
            return
        queued(task_id)

    transaction.on_commit(push, using=using)


def run_now(name: str, *args: Any, **kwargs: Any) -> Any:
    """Run the work ``name(*args, **kwargs)`` in this process (inline mode)."""
    return task_named(name)(*args, **kwargs)


def schedule_every(name: str, *, minutes: int, label: str) -> None:
    """Have the queue run the work ``name()`` every ``minutes`` (where it runs schedules)."""
    queues["default"].schedule_every(task_path(name), minutes=minutes, name=label)
