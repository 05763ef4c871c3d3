"""The app drops into a host site: custom user model, prefixed names, nothing from the example."""

from __future__ import annotations

import uuid

import psycopg
import pytest
from django.apps import apps
from django.core.management import get_commands
from django.db import connection

from tests.support.processes import ROOT, database_url, manage


@pytest.fixture
def empty_database():
    """A new, empty database on the test server, dropped afterwards."""
    settings = connection.settings_dict
    name = f"retrieval_host_{uuid.uuid4().hex[:8]}"
    admin_url = database_url(settings, "postgres")
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield database_url(settings, name)
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def host_manage(*args: str, url: str):
    return manage(
        *args, env={"DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "tests.custom_user.settings"}
    )


def test_a_site_with_a_custom_user_model_migrates_and_records_who_ran_an_index(
    empty_database, tmp_path
):
    migrated = host_manage("migrate", "--noinput", url=empty_database)
    assert migrated.returncode == 0, migrated.stderr
    (tmp_path / "note.txt").write_text("Members sign in with their e-mail address.")
    script = (
        "from pathlib import Path\n"
        "from tests.custom_user.models import Member\n"
        "from retrieval.models import IndexRun\n"
        "from retrieval.services import Source, get_or_create_collection, ingest\n"
        "from django.test import override_settings\n"
        "embedders = {'default': {'BACKEND': 'retrieval.testing.KeywordEmbedder'}}\n"
        "override_settings(RETRIEVAL={'EMBEDDERS': embedders}).enable()\n"
        "member = Member.objects.create(email='ada@example.org')\n"
        "collection, _ = get_or_create_collection('members')\n"
        f"source = Source.from_path(Path({str(tmp_path / 'note.txt')!r}), external_id='note')\n"
        "run = ingest(collection, [source], created_by=member)\n"
        "print(run.status, IndexRun.objects.get(pk=run.pk).created_by.email)\n"
    )
    ran = host_manage("shell", "-c", script, url=empty_database)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip().splitlines()[-1] == "succeeded ada@example.org"


def test_names_are_prefixed():
    config = apps.get_app_config("retrieval")
    assert {model._meta.db_table for model in config.get_models()} == {
        "retrieval_collection",
        "retrieval_document",
        "retrieval_chunk",
        "retrieval_triple",
        "retrieval_entity",
        "retrieval_graphextraction",
        "retrieval_indexrun",
        "retrieval_indexoperation",
        "retrieval_evalset",
        "retrieval_evalquery",
        "retrieval_judgment",
        "retrieval_evalrun",
        "retrieval_querytrace",
        "retrieval_searchclick",
        "retrieval_answervote",
        "retrieval_promotion",
        "retrieval_synonym",
        "retrieval_hiddenresult",
        "retrieval_blockedsuggestion",
    }
    ours = {name for name, app in get_commands().items() if app == "retrieval"}
    assert ours and all(name.startswith("retrieval_") for name in ours)
    package = ROOT / "retrieval"
    for folder in ("templates", "static"):
        names = sorted(p.name for p in (package / folder).iterdir() if not p.name.startswith("."))
        # Django looks an app's admin landing page up as admin/<app label>/app_index.html:
        # the dashboard is the one template outside templates/retrieval/.
        expected = ["admin", "retrieval"] if folder == "templates" else ["retrieval"]
        assert names == expected
    admin_templates = package / "templates" / "admin"
    assert [str(p.relative_to(admin_templates)) for p in admin_templates.rglob("*.*")] == [
        "retrieval/app_index.html"
    ]


def test_the_app_imports_nothing_from_the_example_project():
    sources = [p for p in (ROOT / "retrieval").rglob("*.py")]
    offenders = [
        str(p)
        for p in sources
        if "from project" in p.read_text() or "import project" in p.read_text()
    ]
    assert offenders == []
