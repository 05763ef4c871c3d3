"""The example settings as the test suite runs them: a host app with indexed models,
and indexing tasks run inline unless a test asks for the django-q2 workers."""

from project.settings import *  # noqa: F403

# django_tasks_db: the Tasks framework's database backend, for the queue seam's worker test
# (tests/test_tasks_framework.py); its table lives in the test database.
INSTALLED_APPS = [*INSTALLED_APPS, "tests.host_app", "django_tasks", "django_tasks_db"]  # noqa: F405
RETRIEVAL = {"TASKS_SYNC": True}

# The test client and the live server speak plain HTTP; the fuzzer signs in with Basic
# authentication; the throttle tests set the rates they test, and no other test is throttled.
SECURE_SSL_REDIRECT = SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = False
SECURE_HSTS_SECONDS = 0
REST_FRAMEWORK = {
    **REST_FRAMEWORK,  # noqa: F405
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.BasicAuthentication",
    ],
    "DEFAULT_THROTTLE_RATES": {},
}

# The same test database through Django's connection pool (psycopg_pool), for the
# tests of what a pooled site gets (tests/services/retrievers/test_hybrid.py). Not
# when a test runs the site on another engine (DATABASE_URL=sqlite:// in test_checks).
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":  # noqa: F405
    DATABASES = {  # noqa: F405
        **DATABASES,  # noqa: F405
        "pooled": {
            **DATABASES["default"],  # noqa: F405
            "OPTIONS": {
                **DATABASES["default"].get("OPTIONS", {}),  # noqa: F405
                "pool": {"min_size": 2, "max_size": 4},
            },
            "TEST": {"MIRROR": "default"},
        },
    }
    DATABASE_ROUTERS = ["tests.support.routers.PooledMirror"]
