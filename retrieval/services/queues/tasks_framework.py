"""Django's Tasks framework: ``django.tasks`` on Django 6, the ``django-tasks`` backport on 5.2.

Any Tasks backend the site configures in ``TASKS`` runs the app's work: a database
worker (``django-tasks-db``: ``manage.py db_worker``), RQ, Celery ... The app enqueues
one module-level task, :data:`run_task`, carrying the dotted path of the work and its
JSON arguments, so the worker needs nothing registered beyond this module.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone
from django.utils.module_loading import import_string

from .base import BaseQueue

__all__ = ["TasksFrameworkQueue", "framework", "run_task"]


def framework() -> Any:
    """Return the Tasks framework's module: ``django.tasks``, else ``django_tasks``."""
    try:
        import django.tasks as tasks
    except ImportError:
        try:
            import django_tasks as tasks
        except ImportError:
            return None
    return tasks


def run_task(path: str, args: list[Any], kwargs: dict[str, Any]) -> None:
    """Run the app's work ``path(*args, **kwargs)`` on a Tasks worker."""
    import_string(path)(*args, **kwargs)


_framework = framework()
# The one task the app enqueues, a Task under its own name so a worker finds it by path
# (``None`` without a Tasks framework installed).
run_task = _framework.task()(run_task) if _framework is not None else None  # type: ignore[assignment]


class TasksFrameworkQueue(BaseQueue):
    """Work enqueued through the site's ``TASKS`` configuration.

    OPTIONS: ``backend`` (a ``TASKS`` alias, "default") and ``queue_name`` ("default").
    Periodic work has no schedule here: the index outbox is drained after each write
    and by ``manage.py retrieval_sync_index``; index runs are watched by a task run
    later (where the ``TASKS`` backend defers work), see ``services.ingestion.runs``.
    """

    install_hint = (
        'pip install "django-retrieval[tasks]" (the django-tasks backport) on Django 5.2.'
    )

    def __init__(self, *, backend: str = "default", queue_name: str = "default") -> None:
        self.backend = backend
        self.queue_name = queue_name

    def installed(self) -> bool:
        return run_task is not None

    @property
    def supports_defer(self) -> bool:  # type: ignore[override]
        """True when the ``TASKS`` backend runs tasks later (``run_after``)."""
        if run_task is None:
            return False
        try:
            return _framework.task_backends[self.backend].supports_defer
        except ImproperlyConfigured:  # an unknown TASKS alias: push() says so on the run
            return False

    def push(self, path: str, args: list[Any], kwargs: dict[str, Any], *, label: str) -> str:
        return self._enqueue(path, args, kwargs)

    def push_later(
        self, path: str, args: list[Any], kwargs: dict[str, Any], *, label: str, seconds: float
    ) -> str:
        run_after = timezone.now() + timedelta(seconds=seconds)
        return self._enqueue(path, args, kwargs, run_after=run_after)

    def _enqueue(
        self, path: str, args: list[Any], kwargs: dict[str, Any], run_after: Any = None
    ) -> str:
        task = run_task.using(backend=self.backend, queue_name=self.queue_name, run_after=run_after)
        return str(task.enqueue(path, list(args), dict(kwargs)).id)

    def check(self) -> list[Any]:
        if run_task is None:
            return [
                checks.Error(
                    "The Tasks framework queue needs django.tasks (Django 6) or the "
                    "django-tasks backport.",
                    hint='pip install "django-retrieval[tasks]" and add "django_tasks" to '
                    "INSTALLED_APPS, or use the django-q2 queue.",
                    id="retrieval.E017",
                )
            ]
        return []
