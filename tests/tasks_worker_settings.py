"""Settings of the Tasks framework worker (``manage.py db_worker``) the queue seam's test runs."""

from tests.settings import *  # noqa: F403

TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
RETRIEVAL = {
    "TASKS_SYNC": False,
    "QUEUES": {
        "default": {"BACKEND": "retrieval.services.queues.tasks_framework.TasksFrameworkQueue"}
    },
    "EMBEDDERS": {"default": {"BACKEND": "retrieval.testing.KeywordEmbedder"}},
}
