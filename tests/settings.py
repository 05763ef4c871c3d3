"""The example settings as the test suite runs them: a host app with indexed models,
and indexing tasks run inline unless a test asks for the django-q2 workers."""

from project.settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "tests.host_app"]  # noqa: F405
RETRIEVAL = {"TASKS_SYNC": True}
