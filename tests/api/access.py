"""Access hooks for the tests: which collections each user may see."""

from __future__ import annotations

from typing import Any

from retrieval.models import Collection

#: username -> collection names; users not listed see every collection.
GRANTS = {"alice": ["Atlas"], "bob": ["Bestiary"]}


def by_username(user: Any) -> list[str] | None:
    """Return the names granted to ``user``, or None (all) for anyone else."""
    return GRANTS.get(getattr(user, "username", ""), None)


def as_queryset(user: Any):
    """The same grants, as a queryset; anonymous users see nothing."""
    if not user.is_authenticated:
        return Collection.objects.none()
    names = GRANTS.get(user.username)
    return Collection.objects.all() if names is None else Collection.objects.filter(name__in=names)


def wrong_model(user: Any):
    """A mistaken hook: documents, not collections."""
    from retrieval.models import Document

    return Document.objects.all()
