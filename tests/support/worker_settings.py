"""Settings of the django-q2 worker the crash test starts and kills (tests/test_worker.py).

The keyword embedder, one text per call, so each one-chunk document is written as soon as
its call returns; ``RETRIEVAL_TEST_HANG_ON_CALL`` makes one embedding call hang, so the
worker is stopped mid-run at a known point.
"""

import os

from tests.support.settings import *  # noqa: F403

RETRIEVAL = {
    "TASKS_SYNC": False,
    "EMBEDDERS": {
        "default": {
            "BACKEND": "tests.support.embedders.HangingEmbedder",
            "OPTIONS": {"hang_on_call": int(os.environ.get("RETRIEVAL_TEST_HANG_ON_CALL", "0"))},
        }
    },
    "CHUNKERS": {
        "default": {
            "BACKEND": "retrieval.services.chunkers.recursive.RecursiveChunker",
            "OPTIONS": {"max_tokens": 12, "min_tokens": 1},
        }
    },
    "EMBED_BATCH_SIZE": 1,
    "RUN_HEARTBEAT_TIMEOUT": 1,
}
Q_CLUSTER = {**Q_CLUSTER, "workers": 1, "poll": 0.1, "timeout": 90, "retry": 120}  # noqa: F405
