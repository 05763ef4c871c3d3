"""Settings of the example site: a host project using the retrieval app."""

import os
from pathlib import Path

from project.database import data_dir, database_config
from project.environment import secret_key, throttle_rates

BASE_DIR = Path(__file__).resolve().parent.parent

# Safe unless told otherwise: DEBUG only with DJANGO_DEBUG=1 (as `dev.py demo` sets it), a
# secret key from DJANGO_SECRET_KEY or one made at random and kept in the data folder, and
# the deployment settings below, so that `manage.py check --deploy` is clean outside the demo.
DEBUG = os.environ.get("DJANGO_DEBUG", "0") == "1"
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY") or secret_key()
ALLOWED_HOSTS = os.environ.get("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost,testserver").split(",")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI's files, served locally (no CDN)
    "django_q",  # background indexing: run the workers with `python manage.py qcluster`
    "retrieval",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "project.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

WSGI_APPLICATION = "project.wsgi.application"

DATABASES = {"default": database_config()}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = data_dir() / "static"
MEDIA_URL = "media/"
MEDIA_ROOT = data_dir() / "media"

if not DEBUG:  # served behind HTTPS; DJANGO_INSECURE_HTTP=1 for plain HTTP on loopback
    secure = os.environ.get("DJANGO_INSECURE_HTTP", "0") != "1"
    SECURE_SSL_REDIRECT = SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = secure
    SECURE_HSTS_SECONDS = 31536000 if secure else 0
    SECURE_HSTS_INCLUDE_SUBDOMAINS = SECURE_HSTS_PRELOAD = secure

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "retrieval:search"

# Basic authentication (a password in every request) only while debugging; the rates of
# the app's throttle scopes from RETRIEVAL_THROTTLE_<SCOPE> ("off": not throttled).
REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        *(["rest_framework.authentication.BasicAuthentication"] if DEBUG else []),
    ],
    "DEFAULT_THROTTLE_RATES": throttle_rates(
        search="30/min",
        upload="10/min",
        write="60/min",
        graph="30/min",
        click="120/min",
        suggest="120/min",
    ),
}
SPECTACULAR_SETTINGS = {
    "TITLE": "django-retrieval API",
    "VERSION": "0.1.0",
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # As retrieval.api.schema.ENUM_NAME_OVERRIDES: the site's own schema names them too.
    "ENUM_NAME_OVERRIDES": {
        "DocumentStatusEnum": "retrieval.models.Document.Status",
        "IndexRunStatusEnum": "retrieval.models.IndexRun.Status",
    },
}

# django-q2 workers for background indexing, with the site's own database as the
# broker (no extra server). A site may use Redis instead: Q_CLUSTER["redis"] = {...}.
Q_CLUSTER = {
    "name": "retrieval",
    "orm": "default",
    "workers": 1,  # indexing is CPU-bound in the embedder: one worker per spare core
    "timeout": 6 * 3600,  # seconds a task may run; a big reindex with the local model is long
    "retry": 6 * 3600 + 60,  # must exceed timeout; a lost task is re-delivered after this
    "max_attempts": 1,  # a failed run is retried from its IndexRun, not blindly re-run
    "ack_failures": True,
    "catch_up": False,
    "poll": 0.5,
}

# The retrieval app's settings: everything left out comes from retrieval.conf.DEFAULTS.
# Indexing runs on the django-q2 workers above (TASKS_SYNC None: workers when
# django_q is installed); set "TASKS_SYNC": True to index inside the request instead.
RETRIEVAL = {"TRACE_SAMPLE_RATE": 1.0}  # keep every search as a QueryTrace
