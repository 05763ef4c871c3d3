"""The example site is safe unless told otherwise: ``check --deploy`` is clean outside the demo."""

from __future__ import annotations

import os
import stat

from django.db import connection

from tests.support.processes import database_url, manage


def example_manage(*args: str, data_dir, **env: str):
    environment = {
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "DATABASE_URL": database_url(connection.settings_dict),
        "RETRIEVAL_DATA_DIR": str(data_dir),
        "DJANGO_DEBUG": "",
        "DJANGO_SECRET_KEY": "",
        # Set in this process while the session's Chromium runs (tests/support/browser.py);
        # a deployed site never has it, and check --deploy refuses it (async.E001).
        "DJANGO_ALLOW_ASYNC_UNSAFE": "",
        **env,
    }
    return manage(*args, env=environment)


def test_the_example_site_passes_the_deployment_checks_unless_it_is_the_demo(tmp_path):
    deployed = example_manage("check", "--deploy", "--fail-level", "WARNING", data_dir=tmp_path)
    assert deployed.returncode == 0, deployed.stdout + deployed.stderr

    demo = example_manage(
        "check", "--deploy", "--fail-level", "WARNING", data_dir=tmp_path, DJANGO_DEBUG="1"
    )
    assert demo.returncode != 0
    assert "security.W018" in demo.stdout + demo.stderr  # DEBUG on: the demo only


def test_the_secret_key_is_made_once_per_installation_and_kept_private(tmp_path):
    script = "from django.conf import settings; print(settings.SECRET_KEY)"
    first = example_manage("shell", "-c", script, data_dir=tmp_path)
    second = example_manage("shell", "-c", script, data_dir=tmp_path)
    other = example_manage("shell", "-c", script, data_dir=tmp_path / "other")
    assert first.returncode == 0, first.stderr
    key = first.stdout.strip()
    assert len(key) >= 50
    assert second.stdout.strip() == key
    assert other.stdout.strip() not in ("", key)
    assert stat.S_IMODE(os.stat(tmp_path / "secret_key").st_mode) == 0o600


def test_the_api_is_throttled_by_default_and_the_rates_come_from_the_environment(tmp_path):
    script = (
        "from rest_framework.settings import api_settings as s;"
        "print(sorted(s.DEFAULT_THROTTLE_RATES.items()), s.DEFAULT_AUTHENTICATION_CLASSES)"
    )
    default = example_manage("shell", "-c", script, data_dir=tmp_path)
    assert "('retrieval_search', '30/min')" in default.stdout, default.stderr
    assert "('retrieval_upload', '10/min')" in default.stdout
    assert "BasicAuthentication" not in default.stdout
    tuned = example_manage(
        "shell",
        "-c",
        script,
        data_dir=tmp_path,
        RETRIEVAL_THROTTLE_SEARCH="120/min",
        RETRIEVAL_THROTTLE_UPLOAD="off",
    )
    assert "('retrieval_search', '120/min')" in tuned.stdout, tuned.stderr
    assert "retrieval_upload" not in tuned.stdout
