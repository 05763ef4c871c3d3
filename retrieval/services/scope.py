"""Who may see what, resolved once: a :class:`Scope` every service call runs inside.

A scope is built from the requesting user (:meth:`Scope.for_user`): the collections
the ``COLLECTION_ACCESS`` hook allows and, if ``RETRIEVAL["DOCUMENT_ACCESS"]`` is set,
the documents that hook allows. Searches, tools, context packing and graph walks
take ``user=`` or ``scope=`` and refuse to run with neither; commands and tasks say
:data:`Scope.ALL` explicitly. The document restriction travels inside
:class:`~retrieval.services.filters.Filters`, so every leg that applies
``Filters.sql`` (dense, BM25, graph, the loading of results) applies it too.

``DOCUMENT_ACCESS`` is a dotted path to a function ``(user) -> Q | QuerySet[Document]
| None``: a condition on :class:`~retrieval.models.Document` (e.g.
``Q(metadata__team=user.team)``), a queryset of the documents the user may see, or
``None`` for every document of the visible collections. Active superusers see
everything: neither hook is asked.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from django.db.models import Q, QuerySet

from retrieval.exceptions import InvalidComponentError
from retrieval.models import Collection, Document
from retrieval.services.filters import Filters

__all__ = ["Scope", "document_hook", "resolve_scope"]


def document_hook() -> Callable[[Any], Any] | None:
    """Return the ``DOCUMENT_ACCESS`` function, or ``None`` when it is unset."""
    from retrieval.services.access import setting_hook

    return setting_hook("DOCUMENT_ACCESS")


def _visible_documents(user: Any) -> QuerySet[Document] | None:
    """Return the documents ``user`` may see, or ``None`` for no document restriction."""
    hook = document_hook()
    allowed = hook(user) if hook is not None else None
    if allowed is None:
        return None
    if isinstance(allowed, Q):
        return Document.objects.filter(allowed)
    if isinstance(allowed, QuerySet) and allowed.model is Document:
        return Document.objects.filter(pk__in=allowed.order_by().values("pk"))
    raise InvalidComponentError(
        "RETRIEVAL['DOCUMENT_ACCESS'] must return a Q on Document, a Document queryset or "
        f"None, not {type(allowed).__name__}."
    )


def _is_superuser(user: Any) -> bool:
    return bool(getattr(user, "is_active", False) and getattr(user, "is_superuser", False))


@dataclass(frozen=True, eq=False)
class Scope:
    """What a search may see: visible collections and, optionally, visible documents.

    ``collections`` and ``documents`` are querysets (``None``: no restriction);
    ``user`` is who the scope was built for (``None`` for :data:`Scope.ALL`). Build one
    with :meth:`for_user`, or use :data:`Scope.ALL` where no user is involved
    (management commands, tasks).
    """

    collections: QuerySet[Collection] | None = None
    documents: QuerySet[Document] | None = None
    label: str = field(default="all")
    user: Any = field(default=None, repr=False)

    ALL: ClassVar[Scope]

    @classmethod
    def for_user(cls, user: Any) -> Scope:
        """Return the scope of ``user`` (``AnonymousUser`` included) from the access hooks."""
        if user is None:
            raise TypeError("Scope.for_user() needs a user; pass AnonymousUser() for nobody.")
        if _is_superuser(user):
            return cls(label="superuser", user=user)
        from retrieval.services.access import allowed_collections

        return cls(
            collections=allowed_collections(user),
            documents=_visible_documents(user),
            label=f"user {getattr(user, 'pk', None)!r}",
            user=user,
        )

    @property
    def unrestricted(self) -> bool:
        """True when the scope sees every collection and document."""
        return self.collections is None and self.documents is None

    def visible_collections(self) -> QuerySet[Collection]:
        """Return the collections of this scope."""
        return Collection.objects.all() if self.collections is None else self.collections

    def collection(self, collection: Collection | str) -> Collection:
        """Return the collection (itself, its name or slug) if visible.

        Raise :class:`CollectionNotFound`, with the same message whether it is hidden
        or absent (under :data:`Scope.ALL` the message lists the existing collections).
        """
        from retrieval.services.search import CollectionNotFound, get_collection

        if self is Scope.ALL:
            # No user is involved (commands, tasks): the error may name the collections.
            return get_collection(collection)
        visible = self.visible_collections()
        if isinstance(collection, Collection):
            found = visible.filter(pk=collection.pk).first()
        else:
            found = (
                visible.filter(name=collection).first() or visible.filter(slug=collection).first()
            )
        if found is None:
            raise CollectionNotFound(f"No collection {str(collection)!r}.")
        return found

    def filters(self, raw: Filters | Mapping[str, Any] | None = None) -> Filters:
        """Return ``raw`` parsed, with this scope's document restriction added."""
        parsed = Filters.parse(raw)
        if self.documents is None:
            return parsed
        within = parsed.documents_within
        documents = self.documents if within is None else within.filter(pk__in=self.documents)
        return replace(parsed, documents_within=documents)

    def restrict(
        self, queryset: QuerySet, *, collection: str = "collection", document: str | None = None
    ) -> QuerySet:
        """Keep the rows of ``queryset`` in this scope.

        ``collection`` is the path to the row's collection; ``document`` the path to
        its document (``"pk"`` for documents themselves; ``None``: rows that belong to
        no single document, restricted by collection only).
        """
        if self.collections is not None:
            queryset = queryset.filter(**{f"{collection}__in": self.collections})
        if self.documents is not None and document is not None:
            queryset = queryset.filter(**{f"{document}__in": self.documents.values("pk")})
        return queryset


Scope.ALL = Scope(label="all")


def resolve_scope(scope: Scope | None = None, user: Any = None, *, caller: str) -> Scope:
    """Return the scope a service call runs in; refuse a call that names neither.

    ``user`` is the requesting user (``AnonymousUser`` for nobody signed in); ``scope``
    a :class:`Scope`, :data:`Scope.ALL` for commands and tasks.
    """
    if scope is not None and user is not None:
        raise TypeError(f"{caller}() takes user= or scope=, not both.")
    if scope is not None:
        if not isinstance(scope, Scope):
            raise TypeError(
                f"{caller}(scope=...) must be a Scope, not {type(scope).__name__}; "
                "pass a user as user=."
            )
        return scope
    if user is not None:
        return Scope.for_user(user)
    raise TypeError(
        f"{caller}() needs user= (the requesting user, AnonymousUser included) or scope= "
        "(Scope.ALL for commands and tasks that act for no user)."
    )
