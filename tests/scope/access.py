"""Access hooks for the scope matrix: collections and documents per user.

Users not listed see nothing (fail closed); anonymous users see nothing.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q

from retrieval.models import Collection, Document

#: username -> collection names.
COLLECTIONS = {"alice": ["Atlas"], "bob": ["Atlas", "Bestiary"], "stella": ["Bestiary"]}
#: username -> the document teams (``metadata["team"]``) they may read.
TEAMS = {"alice": ["a", "public"], "bob": ["b", "public"], "stella": ["a"]}


def collections(user: Any):
    if not user.is_authenticated:
        return Collection.objects.none()
    return Collection.objects.filter(name__in=COLLECTIONS.get(user.get_username(), []))


def documents(user: Any) -> Q:
    if not user.is_authenticated:
        return Q(pk__in=[])
    return Q(metadata__team__in=TEAMS.get(user.get_username(), []))


def documents_as_queryset(user: Any):
    """The same grants as a Document queryset."""
    return Document.objects.filter(documents(user))


# The write matrix's users (tests/scope/writes.py): what each sees and may change.
#: username -> collection names seen; users not listed see every collection.
WRITE_SEES = {
    "reader": ["Atlas"],
    "peeker": ["Atlas"],
    "outsider": ["Bestiary"],
    "partial": ["Atlas"],
    "fenced": ["Atlas"],
}
#: username -> the document teams seen; users not listed see every document.
WRITE_TEAMS = {"partial": ["a"], "peeker": ["a"]}
#: username -> collection names they may change; users not listed: all they see.
WRITE_CHANGES = {"fenced": []}


def write_collections(user: Any):
    if not user.is_authenticated:
        return Collection.objects.none()
    return WRITE_SEES.get(user.get_username())


def write_documents(user: Any) -> Q | None:
    if not user.is_authenticated:
        return Q(pk__in=[])
    teams = WRITE_TEAMS.get(user.get_username())
    return None if teams is None else Q(metadata__team__in=teams)


def writable(user: Any):
    return WRITE_CHANGES.get(user.get_username()) if user.is_authenticated else []


# The README's example hook: a collection's metadata["team"] says which team sees it.
#: username -> team.
TEAM_OF = {"bob": "b", "erin": "a"}


def team_collections(user: Any):
    if user.is_staff:
        return None
    team = TEAM_OF.get(user.get_username()) if user.is_authenticated else None
    return Collection.objects.filter(metadata__team=team)
