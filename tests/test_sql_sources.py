"""The SQL the app installs is its source files: retrieval/sql/*.sql, read whole.

Each function and trigger in the database equals its definition in a file, and the
newest copy a migration froze (retrieval/migrations/frozen/) is the current file: a
changed file without a migration that applies it fails here, as does a function a
migration adds without a file.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.db import connection

import retrieval

SQL = Path(retrieval.__file__).parent / "sql"
FROZEN = Path(retrieval.__file__).parent / "migrations" / "frozen"
FUNCTION = re.compile(r"CREATE (?:OR REPLACE )?FUNCTION (\w+)\(.*?\bAS \$(\w*)\$(.*?)\$\2\$", re.S)
TRIGGER = re.compile(r"CREATE TRIGGER [^;]*", re.S)


def words(statement: str) -> str:
    return " ".join(statement.replace(" ON public.", " ON ").split())


def declared_functions() -> dict[str, str]:
    found: dict[str, str] = {}
    for path in sorted(SQL.glob("*.sql")):
        for name, _, body in FUNCTION.findall(path.read_text()):
            assert name not in found, f"{name} is defined twice"
            found[name] = body
    return found


@pytest.mark.django_db
def test_every_installed_function_is_its_source_file():
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT p.proname, p.prosrc FROM pg_proc p "
            "JOIN pg_namespace n ON n.oid = p.pronamespace "
            "WHERE n.nspname = current_schema() AND p.proname LIKE 'retrieval\\_%'"
        )
        installed = dict(cursor.fetchall())
    declared = declared_functions()
    assert sorted(installed) == sorted(declared)
    for name, body in declared.items():
        assert installed[name] == body, f"{name} differs from its file"


@pytest.mark.django_db
def test_every_installed_trigger_is_in_its_source_file():
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_get_triggerdef(t.oid) FROM pg_trigger t "
            "WHERE NOT t.tgisinternal AND t.tgname LIKE 'retrieval\\_%'"
        )
        installed = {words(row[0]) for row in cursor.fetchall()}
    declared = {words(s) for p in SQL.glob("*.sql") for s in TRIGGER.findall(p.read_text())}
    assert installed == declared


@pytest.mark.parametrize("name", ["bm25_top_k", "bm25_marked_top_k"])
def test_the_current_ranking_function_is_the_newest_a_migration_froze(name):
    newest = sorted(FROZEN.glob(f"*_{name}.sql"))[-1]
    current = (SQL / f"{name}.sql").read_text()
    assert current.endswith(newest.read_text()), f"freeze the file in a migration after {newest}"
    assert declared_functions()[f"retrieval_{name}"] in newest.read_text()
