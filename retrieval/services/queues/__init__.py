"""Hand work to the configured queue once the transaction commits, or run it inline.

``RETRIEVAL["QUEUES"]["default"]`` names the backend (django-q2 by default, or Django's
Tasks framework); ``RETRIEVAL["TASKS_SYNC"]`` runs everything inline instead (True), on
the queue (False), or inline only when the queue's library is not installed (None).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.db import transaction
from django.utils.module_loading import import_string

from retrieval.conf import retrieval_settings
from retrieval.services.registry import queues

from .base import BaseQueue

__all__ = ["BaseQueue", "enqueue_after_commit", "run_now", "runs_inline"]

logger = logging.getLogger(__name__)


def runs_inline(sync: bool | None = None) -> bool:
    """Return whether work runs in this process rather than on the queue's workers."""
    if sync is not None:
        return sync
    configured = retrieval_settings.TASKS_SYNC
    if configured is None:
        return not queues["default"].installed()
    return bool(configured)


def enqueue_after_commit(
    path: str,
    *args: Any,
    label: str,
    queued: Callable[[str], Any] = lambda task_id: None,
    unreachable: Callable[[str], Any] = lambda message: None,
    using: str = "default",
    delay: float | None = None,
    **kwargs: Any,
) -> None:
    """Once the transaction commits, hand ``path(*args, **kwargs)`` to the queue.

    Arguments must be JSON-able (primary keys, flags). ``queued`` receives the task's
    id; ``unreachable`` the reason the broker refused it, to be said on a run rather
    than in a 500. ``delay`` runs it that many seconds later (a queue that
    ``supports_defer``). Inline callers run ``import_string(path)`` themselves.
    """
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


def run_now(path: str, *args: Any, **kwargs: Any) -> Any:
    """Run ``path(*args, **kwargs)`` in this process (inline mode)."""
    return import_string(path)(*args, **kwargs)
