"""django-q2 workers (``manage.py qcluster``), the default queue."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.apps import apps
from django.core import checks

from .base import BaseQueue

__all__ = ["DjangoQ2Queue"]


class DjangoQ2Queue(BaseQueue):
    """Work on django-q2's cluster, through its configured broker (the ORM by default).

    OPTIONS: ``group`` (django-q2's task group, "retrieval").
    """

    supports_schedules = True
    install_hint = (
        'pip install "django-retrieval[queue]" and add "django_q" (with a Q_CLUSTER setting) '
        "to INSTALLED_APPS."
    )

    def __init__(self, *, group: str = "retrieval") -> None:
        self.group = group

    def installed(self) -> bool:
        return apps.is_installed("django_q")

    def push(self, path: str, args: list[Any], kwargs: dict[str, Any], *, label: str) -> str:
        from django_q.tasks import async_task

        options = {"task_name": label, "group": self.group}
        return str(async_task(path, *args, q_options=options, **kwargs))

    def schedule_every(self, path: str, *, minutes: int, name: str) -> None:
        from django_q.models import Schedule

        Schedule.objects.get_or_create(
            name=name,
            defaults={"func": path, "schedule_type": Schedule.MINUTES, "minutes": minutes},
        )

    def connect_worker_started(self, receiver: Callable[[], None]) -> None:
        """Call ``receiver()`` on django-q2's ``post_spawn``: each worker process, also one
        the cluster starts again after its predecessor died (killed, out of memory)."""
        if not self.installed():
            return
        from django_q.signals import post_spawn

        def spawned(sender: Any, proc_name: str = "", **kwargs: Any) -> None:
            receiver()

        post_spawn.connect(spawned, weak=False, dispatch_uid="retrieval_worker_started")

    def check(self) -> list[Any]:
        from retrieval.conf import retrieval_settings

        if retrieval_settings.TASKS_SYNC is False and not self.installed():
            return [
                checks.Error(
                    'RETRIEVAL["TASKS_SYNC"] is False (index on workers) but "django_q" is not '
                    "in INSTALLED_APPS.",
                    hint='pip install "django-retrieval[queue]", add "django_q" to INSTALLED_APPS '
                    "with a Q_CLUSTER setting, use the Tasks framework queue, or set "
                    'RETRIEVAL["TASKS_SYNC"] = True.',
                    id="retrieval.E015",
                )
            ]
        return []
