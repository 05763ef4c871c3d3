"""Settings of the Tasks framework worker (``manage.py db_worker``) the queue seam's tests run.

With ``RETRIEVAL_TEST_HANG_ON_CALL`` set, the crash test's embedder and chunker
(``tests/support/worker_settings.py``): the worker is stopped mid-run at a known point.
"""

import os

from tests.support.settings import *  # noqa: F403

TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
RETRIEVAL = {
    "TASKS_SYNC": False,
    "QUEUES": {
        "default": {"BACKEND": "retrieval.services.queues.tasks_framework.TasksFrameworkQueue"}
    },
    "EMBEDDERS": {"default": {"BACKEND": "retrieval.testing.KeywordEmbedder"}},
}
if "RETRIEVAL_TEST_HANG_ON_CALL" in os.environ:
    from tests.support.worker_settings import RETRIEVAL as CRASH_TEST

    RETRIEVAL = {**CRASH_TEST, "QUEUES": RETRIEVAL["QUEUES"]}
