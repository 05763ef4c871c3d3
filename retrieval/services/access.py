"""Which collections a user may see: the ``COLLECTION_ACCESS`` hook.

``RETRIEVAL["COLLECTION_ACCESS"]`` is a dotted path to a function ``(user) ->
QuerySet[Collection] | Iterable[str] | None``: the collections the user may see, as
a queryset or as names or slugs, or ``None`` for all of them. Unset, everyone sees
every collection. Active superusers see every collection: the hook is not asked. A
collection the user may not see is reported exactly like one that does not exist, so
its existence does not leak. :class:`~retrieval.services.scope.Scope` adds the
document-level hook on top of this one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db.models import Q, QuerySet
from django.utils.module_loading import import_string

from retrieval.conf import retrieval_settings
from retrieval.exceptions import InvalidComponentError
from retrieval.models import Collection
from retrieval.services.search import CollectionNotFound

__all__ = [
    "access_hook",
    "allowed_collections",
    "get_visible_collection",
    "restrict_to_visible",
    "visible_collections",
]


def setting_hook(key: str) -> Callable[[Any], Any] | None:
    """Return the function of the user that ``RETRIEVAL[key]`` names, or ``None`` if unset."""
    path = getattr(retrieval_settings, key)
    if not path:
        return None
    try:
        hook = import_string(path)
    except ImportError as e:
        raise InvalidComponentError(f"RETRIEVAL[{key!r}]: cannot import {path!r}: {e}") from e
    if not callable(hook):
        raise InvalidComponentError(f"RETRIEVAL[{key!r}]: {path!r} is not a function of the user.")
    return hook


def access_hook() -> Callable[[Any], Any] | None:
    """Return the ``COLLECTION_ACCESS`` function, or ``None`` when every user sees everything."""
    return setting_hook("COLLECTION_ACCESS")


def allowed_collections(user: Any) -> QuerySet[Collection] | None:
    """Return the hook's answer as a queryset, or ``None`` when ``user`` sees everything."""
    if getattr(user, "is_active", False) and getattr(user, "is_superuser", False):
        return None
    hook = access_hook()
    allowed = hook(user) if hook is not None else None
    if allowed is None:
        return None
    if isinstance(allowed, QuerySet):
        if allowed.model is not Collection:
            raise InvalidComponentError(
                "RETRIEVAL['COLLECTION_ACCESS'] returned a queryset of "
                f"{allowed.model.__name__}, not of Collection."
            )
        return Collection.objects.filter(pk__in=allowed.values("pk"))
    if isinstance(allowed, str):
        allowed = [allowed]
    names = [str(name) for name in allowed]
    return Collection.objects.filter(Q(name__in=names) | Q(slug__in=names))


def visible_collections(user: Any) -> QuerySet[Collection]:
    """Return the collections ``user`` may see (all of them without a hook)."""
    allowed = allowed_collections(user)
    return Collection.objects.all() if allowed is None else allowed


def restrict_to_visible(queryset: QuerySet, user: Any, *, field: str = "collection") -> QuerySet:
    """Keep the rows of ``queryset`` whose ``field`` is a collection ``user`` may see.

    Unrestricted users get ``queryset`` unchanged (no subquery); for the others, rows
    without a collection are left out too.
    """
    allowed = allowed_collections(user)
    return queryset if allowed is None else queryset.filter(**{f"{field}__in": allowed})


def get_visible_collection(collection: Collection | str, user: Any) -> Collection:
    """Return the collection named (or slugged) ``collection`` if ``user`` may see it.

    Raise :class:`CollectionNotFound` otherwise, with the same message whether it is
    hidden or absent.
    """
    key = collection.pk if isinstance(collection, Collection) else None
    visible = visible_collections(user)
    found = (
        visible.filter(pk=key).first()
        if key is not None
        else visible.filter(name=collection).first() or visible.filter(slug=collection).first()
    )
    if found is None:
        raise CollectionNotFound(f"No collection {str(collection)!r}.")
    return found
