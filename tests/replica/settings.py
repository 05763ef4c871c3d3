"""The example project on a primary (``DATABASE_URL``) and its replica (``REPLICA_URL``).

Searches read the replica through ``RETRIEVAL["SEARCH_DATABASE"]``; writes go to
``default``, the primary. Used by the replica test's child processes only.
"""

import os

import dj_database_url

from project.settings import *  # noqa: F403

DATABASES["replica"] = dj_database_url.parse(os.environ["REPLICA_URL"], conn_max_age=0)  # noqa: F405
RETRIEVAL = {
    "SEARCH_DATABASE": "replica",
    "DEFAULT_EMBEDDER": "keywords",
    "EMBEDDERS": {"keywords": {"BACKEND": "retrieval.testing.KeywordEmbedder"}},
    "CHUNKERS": {"default": {"BACKEND": "retrieval.services.chunkers.whole.WholeChunker"}},
}
