"""The example settings with a custom user model, as many host sites have."""

from project.settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "tests.custom_user"]  # noqa: F405
AUTH_USER_MODEL = "custom_user.Member"
