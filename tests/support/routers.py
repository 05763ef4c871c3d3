"""The test settings' "pooled" alias is the default database through a pool: nothing is
migrated through it, so checks that ask a database (Django 6.1 checks every alias for
GeneratedField support) ask the default one only."""

from __future__ import annotations

from typing import Any


class PooledMirror:
    """Migrations (and the checks that follow them) never through the "pooled" alias."""

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool | None:
        return False if db == "pooled" else None
