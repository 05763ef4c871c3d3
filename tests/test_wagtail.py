"""Run the Wagtail site's tests (tests/wagtail_site) in a process of their own.

Django reads one settings module per process, and the Wagtail site's has Wagtail's
apps, its page types and ``retrieval.contrib.wagtail`` installed, with a test database
of its own; the site is migrated once for all of its tests. Skipped where Wagtail is
not installed (``pip install "django-retrieval[wagtail]"``).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import WAGTAIL_SETTINGS
from tests.support.processes import ROOT

pytestmark = pytest.mark.slow


def test_the_wagtail_sites_tests_pass():
    pytest.importorskip("wagtail", reason='the "wagtail" extra is not installed')
    environment = {**os.environ, "DJANGO_SETTINGS_MODULE": WAGTAIL_SETTINGS}
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/wagtail_site", "-p", "no:cacheprovider", "-q"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert ran.returncode == 0, ran.stdout[-20000:] + ran.stderr[-5000:]
    assert " passed" in ran.stdout.splitlines()[-1] and "failed" not in ran.stdout.splitlines()[-1]
