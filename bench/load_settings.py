"""Settings of the example site as ``bench/load.py`` serves it: the project's own, plus an
LLM stage, indexing on the django-q2 workers, no throttling and errors logged.

``LOAD_LLM_URL`` is the local OpenAI-compatible server the orchestrator started.
"""

import os

from project.settings import *  # noqa: F403
from project.settings import REST_FRAMEWORK, RETRIEVAL

# Plain HTTP on loopback, whatever the project's defaults (DJANGO_INSECURE_HTTP says the
# same to the settings that read it).
DEBUG = False
SECURE_SSL_REDIRECT = SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = False
SECURE_HSTS_SECONDS = 0

# The load generator is one client making many users' requests: no rate applies.
REST_FRAMEWORK = {**REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {}}

RETRIEVAL = {
    **RETRIEVAL,
    "LLMS": {
        "default": {
            "BACKEND": "retrieval.services.llms.openai.OpenAIChatLLM",
            "OPTIONS": {
                "model": "load-llm",
                "base_url": os.environ.get("LOAD_LLM_URL", "http://127.0.0.1:9/v1"),
                "api_key": "none",
                "timeout": 20,
                "max_retries": 1,
                # Every question reaches the server, as distinct users' questions would.
                "cache": None,
            },
        }
    },
    "REWRITERS": {
        "standalone": {
            "BACKEND": "retrieval.services.rewriters.llm.LLMQueryRewriter",
            "OPTIONS": {"llm": "default"},
        }
    },
    "PIPELINES": {"default": {}, "llm": {"rewriter": "standalone"}},
    "TASKS_SYNC": False,  # every upload and reindex goes through `manage.py qcluster`
}
if os.environ.get("LOAD_RUN_HEARTBEAT_TIMEOUT"):  # shorter, to see a dead worker's run resumed
    RETRIEVAL["RUN_HEARTBEAT_TIMEOUT"] = float(os.environ["LOAD_RUN_HEARTBEAT_TIMEOUT"])

# Without DEBUG Django sends a 500's traceback to ADMINS only: write it to stderr, so
# the orchestrator can tell each server error's cause from the logs.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "stamped": {"format": "%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"}
    },
    "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "stamped"}},
    "loggers": {
        "django.request": {"handlers": ["stderr"], "level": "ERROR", "propagate": False},
        "retrieval": {"handlers": ["stderr"], "level": "WARNING", "propagate": False},
        "django-q": {"handlers": ["stderr"], "level": "INFO", "propagate": False},
    },
}
