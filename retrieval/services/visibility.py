"""Who may see a document, as its host object decides: ``Document.access``.

A :class:`Visibility` is a set of alternatives, any of which lets a reader in:
``"public"`` (everyone), ``"signed-in"`` (any active signed-in user), ``"group:<pk>"``
(members of a group), ``"user:<pk>"`` (one user). No alternative at all is
:data:`Visibility.NOBODY`. It is stored as a JSON list of those strings in
``Document.access`` (a GIN index), and :func:`condition` turns a user's tokens into
the condition on documents of the access scope (:meth:`retrieval.services.access.Scope.for_user`).
Search legs check it on the chunk row instead, against each chunk's copy of its
document's ``access`` (kept by triggers: ``retrieval/sql/chunk_access.sql``) and the
reader's :func:`user_tokens`. A document whose ``access`` is null is not restricted by
its host (uploads, files); its chunks carry ``["public"]``, which every reader holds.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

from django.db.models import Q

from retrieval.models import Document

__all__ = ["Visibility", "condition", "restricted_documents_exist", "user_tokens"]

logger = logging.getLogger(__name__)

PUBLIC = "public"
SIGNED_IN = "signed-in"


@dataclass(frozen=True)
class Visibility:
    """Who may see a document: any of ``tokens`` lets a reader in (none: nobody)."""

    tokens: frozenset[str]

    PUBLIC: ClassVar[Visibility]
    SIGNED_IN: ClassVar[Visibility]
    NOBODY: ClassVar[Visibility]

    @classmethod
    def groups(cls, groups: Iterable[Any]) -> Visibility:
        """Members of any of ``groups`` (``Group`` objects or primary keys)."""
        return cls(frozenset(f"group:{getattr(g, 'pk', g)}" for g in groups))

    @classmethod
    def users(cls, users: Iterable[Any]) -> Visibility:
        """Any of ``users`` (user objects or primary keys)."""
        return cls(frozenset(f"user:{getattr(u, 'pk', u)}" for u in users))

    @classmethod
    def of(cls, value: Any) -> Visibility:
        """Return ``value`` as a Visibility: one, or ``"public"``, ``"signed-in"``,
        ``"nobody"``; raise ``ValueError`` for anything else."""
        if isinstance(value, Visibility):
            return value
        named = {"public": cls.PUBLIC, "signed-in": cls.SIGNED_IN, "nobody": cls.NOBODY}
        if isinstance(value, str) and value in named:
            return named[value]
        raise ValueError(
            f"{value!r} is not a visibility: return a Visibility or one of "
            '"public", "signed-in", "nobody".'
        )

    def __or__(self, other: Visibility) -> Visibility:
        """Either lets a reader in."""
        return Visibility(self.tokens | other.tokens)

    def __and__(self, other: Visibility) -> Visibility:
        """Both must let a reader in (a page and its restricted section).

        "public" and "signed-in" give way to the narrower side; two different groups
        or users cannot be required at once in one stored set, so that pair is left
        out: the result is never wider than either side (it fails closed).
        """
        both = {_both(a, b) for a in self.tokens for b in other.tokens}
        return Visibility(frozenset(both - {None}))

    def stored(self) -> list[str]:
        """The value of ``Document.access``, sorted."""
        return sorted(self.tokens)

    def __str__(self) -> str:
        return ", ".join(self.stored()) or "nobody"


Visibility.PUBLIC = Visibility(frozenset({PUBLIC}))
Visibility.SIGNED_IN = Visibility(frozenset({SIGNED_IN}))
Visibility.NOBODY = Visibility(frozenset())


def _both(a: str, b: str) -> str | None:
    if a == b or b == PUBLIC:
        return a
    if a == PUBLIC:
        return b
    if b == SIGNED_IN:  # a group or a user: all signed in
        return a
    if a == SIGNED_IN:
        return b
    return None


def user_tokens(user: Any) -> list[str]:
    """Return the access tokens ``user`` holds (anonymous and inactive users: public)."""
    tokens = [PUBLIC]
    if user is None or not getattr(user, "is_authenticated", False):
        return tokens
    if not getattr(user, "is_active", False):
        return tokens
    tokens += [SIGNED_IN, f"user:{user.pk}"]
    groups = getattr(user, "groups", None)  # custom user models may have none
    if groups is not None and hasattr(groups, "values_list"):
        tokens += [f"group:{pk}" for pk in groups.values_list("pk", flat=True)]
    return tokens


def condition(tokens: list[str]) -> Q:
    """Return the documents a holder of ``tokens`` (:func:`user_tokens`) may see by their
    host's visibility, as a Q."""
    return Q(access__isnull=True) | Q(access__has_any_keys=tokens)


def restricted_documents_exist() -> bool:
    """True if some document carries a host visibility (a partial index answers)."""
    return Document.objects.filter(access__isnull=False).exists()
