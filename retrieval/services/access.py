"""Who may see and change what: the app's one access policy.

Every face (API, admin, search page, tools, Python) gets a :class:`Scope` for the
requesting user — :meth:`Scope.for_request` in a view, :meth:`Scope.for_user`
elsewhere, :data:`Scope.ALL` in commands and tasks that act for no user — and the
services read and write only inside it.

**Reading** is decided by two hooks, dotted paths in ``RETRIEVAL``:

- ``COLLECTION_ACCESS``: ``(user) -> QuerySet[Collection] | Iterable[name or slug] | None``,
  the collections the user may see (``None``: all of them);
- ``DOCUMENT_ACCESS``: ``(user) -> Q on Document | QuerySet[Document] | None``, the
  documents of those collections the user may see (``None``: all of them).

Documents of a site's own objects also carry who may see them, decided by the object
(``Document.access``, :mod:`retrieval.services.visibility`): once any document does,
that condition joins ``DOCUMENT_ACCESS``'s for every user, so it reaches every leg too.

**Writing** needs, besides reading: the Django model permission for the action
(``retrieval.add_document``, ``retrieval.delete_collection`` ...); a collection the
``COLLECTION_WRITE_ACCESS`` hook allows (same contract as ``COLLECTION_ACCESS``; unset,
the collections the user may see); and, for a change to a collection's content, seeing
all of that collection, so a write can neither touch nor reveal a hidden document.
Collections are created (or renamed) only by users who see every collection, since
names and slugs are site-wide. Once any hook is set, a change to what hooks decide by
(a collection's name, slug, or metadata: the keys ``COLLECTION_ACCESS_KEYS`` lists, or
all of it) also needs ``retrieval.change_collection_access``: who may edit a collection
may not thereby choose who sees it. Active superusers may do everything: no hook is asked.

A hidden collection or document is reported exactly like a missing one
(:class:`~retrieval.exceptions.CollectionNotFound`); a visible one the user may not
change raises :class:`~retrieval.exceptions.AccessDenied`. A hook setting that is blank
or does not import is an error (system check ``retrieval.E014``), never "everyone".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, ClassVar

from django.contrib.auth import get_permission_codename
from django.db.models import Case, Model, Q, QuerySet, Value, When
from django.utils.module_loading import import_string

from retrieval.conf import retrieval_settings
from retrieval.exceptions import AccessDenied, CollectionNotFound, InvalidComponentError
from retrieval.models import Collection, Document
from retrieval.services import visibility
from retrieval.services.core.filters import Filters, ReaderScope

__all__ = ["ACCESS_PERMISSION", "HOOKS", "Scope", "access_keys", "hook", "resolve_scope"]

#: The access hooks: setting -> what its function returns.
HOOKS = {
    "COLLECTION_ACCESS": "the collections the user may see (a queryset, names or slugs)",
    "COLLECTION_WRITE_ACCESS": "the collections the user may change (a queryset, names or slugs)",
    "DOCUMENT_ACCESS": "a Q on Document or a Document queryset",
}


#: The permission to change what the hooks decide by (see :meth:`Scope.authorize_change`).
ACCESS_PERMISSION = "retrieval.change_collection_access"


def hook(key: str) -> Callable[[Any], Any] | None:
    """Return the function of the user that ``RETRIEVAL[key]`` names; ``None`` if unset.

    A blank value (an unset environment variable, say) is refused like a wrong path:
    access never falls open by accident.
    """
    path = getattr(retrieval_settings, key)
    if path is None:
        return None
    if not isinstance(path, str) or not path.strip():
        raise InvalidComponentError(
            f"RETRIEVAL[{key!r}] is {path!r}: give the dotted path of a function, or None "
            "for no restriction."
        )
    try:
        function = import_string(path)
    except ImportError as e:
        raise InvalidComponentError(f"RETRIEVAL[{key!r}]: cannot import {path!r}: {e}") from e
    if not callable(function):
        raise InvalidComponentError(f"RETRIEVAL[{key!r}]: {path!r} is not a function of the user.")
    return function


def access_keys() -> frozenset[str] | None:
    """Return the metadata keys the hooks decide by (``COLLECTION_ACCESS_KEYS``); ``None``:
    every key, as nothing says which ones a hook reads."""
    keys = retrieval_settings.COLLECTION_ACCESS_KEYS
    if keys is None:
        return None
    if isinstance(keys, str) or not all(isinstance(key, str) for key in keys):
        raise InvalidComponentError(
            f"RETRIEVAL['COLLECTION_ACCESS_KEYS'] is {keys!r}: give a list of metadata keys, "
            "or None when any key may decide access."
        )
    return frozenset(keys)


def renames(collection: Collection, changes: Mapping[str, Any]) -> bool:
    """True if ``changes`` (field -> new value) give ``collection`` another name or slug."""
    return any(
        key in changes and changes[key] != getattr(collection, key) for key in ("name", "slug")
    )


def decides_access(collection: Collection, changes: Mapping[str, Any]) -> bool:
    """True if ``changes`` (field -> new value) to ``collection`` change what a hook may
    decide by: its name or slug (hooks may answer names), or its metadata (the keys
    :func:`access_keys` gives). Never while no hook is set: then everyone sees everything."""
    if all(getattr(retrieval_settings, key) is None for key in HOOKS):
        return False
    if renames(collection, changes):
        return True
    if "metadata" not in changes:
        return False
    new, old = changes["metadata"], collection.metadata or {}
    keys = access_keys()
    if keys is None or not isinstance(new, Mapping):
        return new != old
    return any(new.get(key) != old.get(key) for key in keys)


#: A refusal that must read as "not found": the collection is hidden from the user.
_HIDDEN = "hidden"


def _is_superuser(user: Any) -> bool:
    return bool(getattr(user, "is_active", False) and getattr(user, "is_superuser", False))


def _collections_of(key: str, user: Any) -> QuerySet[Collection] | None:
    """Return a collection hook's answer for ``user`` as a queryset (``None``: all)."""
    function = hook(key)
    allowed = function(user) if function is not None else None
    if allowed is None:
        return None
    if isinstance(allowed, QuerySet):
        if allowed.model is not Collection:
            raise InvalidComponentError(
                f"RETRIEVAL[{key!r}] returned a queryset of {allowed.model.__name__}, "
                "not of Collection."
            )
        return Collection.objects.filter(pk__in=allowed.order_by().values("pk"))
    names = [allowed] if isinstance(allowed, str) else [str(name) for name in allowed]
    return Collection.objects.filter(Q(name__in=names) | Q(slug__in=names))


def _documents_of(user: Any) -> tuple[QuerySet[Document] | None, ReaderScope | None]:
    """Return the documents ``user`` may see (``None``: no document restriction), and the
    same restriction as chunk rows check it (``None``: hosts restrict nothing)."""
    function = hook("DOCUMENT_ACCESS")
    allowed = function(user) if function is not None else None
    if allowed is None:
        documents = None
    elif isinstance(allowed, Q):
        documents = Document.objects.filter(allowed)
    elif isinstance(allowed, QuerySet) and allowed.model is Document:
        documents = Document.objects.filter(pk__in=allowed.order_by().values("pk"))
    else:
        raise InvalidComponentError(
            "RETRIEVAL['DOCUMENT_ACCESS'] must return a Q on Document, a Document queryset "
            f"or None, not {type(allowed).__name__}."
        )
    # The hosts' own visibility, once any document carries one (no cost before).
    if not visibility.restricted_documents_exist():
        return documents, None
    tokens = visibility.user_tokens(user)  # the user's groups: one query
    hosted = visibility.condition(tokens)
    reader = ReaderScope(tokens=tuple(tokens), others=documents)
    within = Document.objects.filter(hosted) if documents is None else documents.filter(hosted)
    return within, reader


@dataclass(frozen=True, eq=False)
class Scope:
    """What one user may see and change.

    ``collections`` and ``documents`` are querysets of what may be seen (``None``: no
    restriction); ``user`` is who the scope is for (``None`` for :data:`Scope.ALL`,
    which commands and tasks use: it sees and may change everything).
    """

    collections: QuerySet[Collection] | None = None
    documents: QuerySet[Document] | None = None
    #: ``documents`` as chunk rows check it (the hosts' visibility on the row itself).
    reader: ReaderScope | None = field(default=None, repr=False)
    label: str = "all"
    user: Any = field(default=None, repr=False)
    #: True for :data:`Scope.ALL` and active superusers: no hook is asked, every
    #: permission is held.
    trusted: bool = False

    ALL: ClassVar[Scope]

    @classmethod
    def for_user(cls, user: Any) -> Scope:
        """Return the scope of ``user`` (``AnonymousUser`` included) from the access hooks."""
        if user is None:
            raise TypeError("Scope.for_user() needs a user; pass AnonymousUser() for nobody.")
        if _is_superuser(user):
            return cls(label="superuser", user=user, trusted=True)
        documents, reader = _documents_of(user)
        return cls(
            collections=_collections_of("COLLECTION_ACCESS", user),
            documents=documents,
            reader=reader,
            label=f"user {getattr(user, 'pk', None)!r}",
            user=user,
        )

    @classmethod
    def for_request(cls, request: Any) -> Scope:
        """Return the scope of a request's user, built once per request (DRF's or Django's)."""
        scope = getattr(request, "_retrieval_scope", None)
        if scope is None:
            scope = request._retrieval_scope = cls.for_user(request.user)
        return scope

    # Reading.

    def visible_collections(self) -> QuerySet[Collection]:
        """Return the collections of this scope."""
        return Collection.objects.all() if self.collections is None else self.collections

    def collection(self, collection: Collection | str) -> Collection:
        """Return the collection (itself, its slug or its name) if this scope sees it.

        A key names the collection with that slug, else the one with that name, whoever
        asks; a hidden or absent one raises :class:`CollectionNotFound` with the same
        message (under :data:`Scope.ALL` the message lists existing collections).
        """
        if isinstance(collection, Collection):
            # The caller's own instance, as it is: visible, or reported missing.
            if self.collections is None or self.collections.filter(pk=collection.pk).exists():
                return collection
            found = None
        else:
            found = (
                Collection.objects.filter(Q(slug=collection) | Q(name=collection))
                .order_by(Case(When(slug=collection, then=Value(0)), default=Value(1)))
                .first()
            )
        if found is not None and self.collections is not None:
            found = self.collections.filter(pk=found.pk).first()
        if found is not None:
            return found
        if self is Scope.ALL:  # no user is involved (commands, tasks): name the choices
            names = list(Collection.objects.values_list("name", flat=True)[:20])
            raise CollectionNotFound(
                f"No collection named {str(collection)!r}; existing: "
                f"{', '.join(names) or '(none)'}."
            )
        raise CollectionNotFound(f"No collection {str(collection)!r}.")

    def filters(self, raw: Filters | Mapping[str, Any] | None = None) -> Filters:
        """Return ``raw`` parsed, with this scope's document restriction added."""
        parsed = Filters.parse(raw)
        if self.documents is None:
            return parsed
        within = parsed.documents_within
        if within is None:
            return replace(parsed, documents_within=self.documents, reader=self.reader)
        # A scope within a scope: both through the documents.
        documents = within.filter(pk__in=self.documents)
        return replace(parsed, documents_within=documents, reader=None)

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

    def restrict_traces(self, queryset: QuerySet) -> QuerySet:
        """Keep the search traces of this scope (a ``QueryTrace`` queryset).

        A trace lists another user's results, which may name documents hidden from
        this one: under a document restriction only the user's own traces are kept.
        """
        return self._own(self.restrict(queryset), "user")

    def restrict_runs(self, queryset: QuerySet) -> QuerySet:
        """Keep the index runs of this scope (an ``IndexRun`` queryset).

        A run's errors name its documents: under a document restriction only the runs
        the user started are kept.
        """
        return self._own(self.restrict(queryset), "created_by")

    def _own(self, queryset: QuerySet, user_field: str) -> QuerySet:
        if self.documents is None:
            return queryset
        if getattr(self.user, "pk", None) is None:
            return queryset.none()
        return queryset.filter(**{user_field: self.user})

    @property
    def sees_quality(self) -> bool:
        """True if golden sets, judgments and evaluation runs are open to this scope.

        They judge a collection's documents as a whole, so a document restriction
        closes them.
        """
        return self.documents is None

    def sees_all_of(self, collection: Collection) -> bool:
        """True when no document of ``collection`` is hidden from this scope."""
        if self.documents is None:
            return True
        hidden = Document.objects.filter(collection=collection).exclude(
            pk__in=self.documents.values("pk")
        )
        return not hidden.exists()

    # Writing.

    def may(self, action: str, model: type[Model]) -> bool:
        """True if the user has Django's permission to ``action`` ("add", "change",
        "delete", "view") objects of ``model``; :data:`Scope.ALL` may do everything."""
        opts = model._meta
        return self._holds(f"{opts.app_label}.{get_permission_codename(action, opts)}")

    def _holds(self, permission: str) -> bool:
        if self.trusted:
            return True
        user = self.user
        if user is None or not getattr(user, "is_active", False):
            return False
        return bool(user.has_perm(permission))

    @cached_property
    def writable(self) -> QuerySet[Collection] | None:
        """The collections ``COLLECTION_WRITE_ACCESS`` lets this user change (``None``: all
        it may see)."""
        if self.trusted:
            return None
        return _collections_of("COLLECTION_WRITE_ACCESS", self.user)

    def may_write(
        self, action: str, model: type[Model], collection: Collection | None, *, whole: bool = True
    ) -> bool:
        """True if the user may ``action`` ``model`` objects of ``collection`` (see the
        module's rules); ``whole=False`` waives seeing all of the collection (a vote on a
        visible result). A row of no collection needs a scope that sees everything."""
        return self._collection_refusal(collection, whole) is None and self.may(action, model)

    def may_write_each(
        self,
        action: str,
        model: type[Model],
        collections: Iterable[Collection],
        *,
        whole: bool = True,
    ) -> set[int]:
        """Return the ids of ``collections`` where :meth:`may_write` allows ``action`` on
        ``model`` objects: the same rules for many collections, in a few statements."""
        ids = {collection.pk for collection in collections}
        if not ids or not self.may(action, model):
            return set()
        if self.trusted:
            return ids
        if self.collections is not None:
            ids &= set(self.collections.filter(pk__in=ids).values_list("pk", flat=True))
        if self.writable is not None:
            ids &= set(self.writable.filter(pk__in=ids).values_list("pk", flat=True))
        if whole and self.documents is not None and ids:
            partly_hidden = (
                Document.objects.filter(collection__in=ids)
                .exclude(pk__in=self.documents.values("pk"))
                .values_list("collection_id", flat=True)
                .distinct()
            )
            ids -= set(partly_hidden)
        return ids

    def _collection_refusal(self, collection: Collection | None, whole: bool) -> str | None:
        """Why the user may not change ``collection`` whatever the action, or None.

        Its answer is the same for every row of the collection, hidden ones included.
        """
        if self.trusted:
            return None
        if collection is None:
            if self.collections is None and self.documents is None:
                return None
            return "You may not change rows outside a collection."
        if self.collections is not None and not self.collections.filter(pk=collection.pk).exists():
            return _HIDDEN
        if self.writable is not None and not self.writable.filter(pk=collection.pk).exists():
            return f"You may not change collection {collection.slug!r}."
        if whole and not self.sees_all_of(collection):
            return f"You may not change collection {collection.slug!r}."
        return None

    def may_create_collections(self) -> bool:
        """True if the user may create (or rename) collections: the permission, and no
        collection hidden from them (names and slugs are site-wide, so a clash with a
        hidden one would reveal it)."""
        return self.may("add", Collection) and self.collections is None

    def authorize(
        self, action: str, model: type[Model], collection: Collection | None, *, whole: bool = True
    ) -> None:
        """Raise unless :meth:`may_write` allows the write: :class:`CollectionNotFound` for
        a collection hidden from the user, else :class:`AccessDenied`.

        The permission is checked before the collection: a user who may not write at all
        is told so whatever the collection, which would otherwise say whether some of its
        documents are hidden from her.
        """
        refusal = self._collection_refusal(collection, whole)
        if refusal is _HIDDEN and collection is not None:
            raise CollectionNotFound(f"No collection {collection.slug!r}.")
        if not self.may(action, model):
            raise AccessDenied(f"You may not {action} {model._meta.verbose_name_plural}.")
        if refusal is not None:
            raise AccessDenied(refusal)

    def authorize_creation(self) -> None:
        """Raise :class:`AccessDenied` unless the user may create collections."""
        if not self.may_create_collections():
            raise AccessDenied("You may not create or rename collections.")

    def may_change_access(self) -> bool:
        """True if the user holds :data:`ACCESS_PERMISSION` (changing what hooks decide by)."""
        return self._holds(ACCESS_PERMISSION)

    def authorize_change(self, collection: Collection, changes: Mapping[str, Any]) -> None:
        """Raise unless the user may make ``changes`` (field -> new value) to ``collection``
        as stored: change it (:meth:`authorize`); rename it, as if creating one; and change
        what the hooks decide by (:func:`decides_access`) only with :data:`ACCESS_PERMISSION`.
        """
        self.authorize("change", Collection, collection)
        if renames(collection, changes):
            self.authorize_creation()
        if decides_access(collection, changes) and not self.may_change_access():
            raise AccessDenied("You may not change who may see collections.")

    def writable_collections(self, action: str, model: type[Model]) -> QuerySet[Collection]:
        """Return the visible collections where the user may ``action`` ``model`` objects
        (a form's choices; each write is still authorized on its own)."""
        if not self.may(action, model):
            return Collection.objects.none()
        collections = self.visible_collections()
        if self.writable is not None:
            collections = collections.filter(pk__in=self.writable.values("pk"))
        return collections


Scope.ALL = Scope(label="all", trusted=True)


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
