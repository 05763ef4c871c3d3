"""Wagtail pages as host objects: their text, URL, who may see them, which are indexed.

A page type is registered with :func:`retrieval.host_models.register` and:

- **text** from Wagtail's own search configuration: the page's ``search_fields``
  (``SearchField`` and ``RelatedFields``), each field's searchable content as Wagtail's
  search indexes it (a StreamField's or RichTextField's text, no markup);
- **condition** :data:`LIVE`: live pages not past their expiry (drafts, unpublished
  and expired pages are removed from the index when saved);
- **visibility** from the page's view restrictions and its ancestors'
  (:func:`page_visibility`): login → signed-in users, groups → those groups' members,
  password → ``RETRIEVAL["WAGTAIL_PASSWORD_PAGES"]`` ("nobody" unless the site says);
- **url** ``page.get_url()``, in ``metadata["url"]`` with the page type and dates.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from django.apps import apps
from django.db.models import Model, Q
from django.db.models.functions import Now

from retrieval import host_models
from retrieval.conf import retrieval_settings
from retrieval.services.ingestion.host_registry import HostIndex
from retrieval.services.visibility import Visibility

__all__ = ["LIVE", "page_models", "page_text", "page_visibility", "register", "register_pages"]

logger = logging.getLogger(__name__)

#: The pages a visitor can open: live, and not past their expiry.
LIVE = Q(live=True) & (Q(expire_at__isnull=True) | Q(expire_at__gt=Now()))
#: What saving a draft or locking a page updates: the live page is unchanged.
DRAFT_FIELDS = frozenset(
    {
        "wagtail_admin_comments",
        "latest_revision_created_at",
        "draft_title",
        "latest_revision",
        "has_unpublished_changes",
        "locked",
        "locked_at",
        "locked_by",
    }
)


def register(model: type[Model], *, collection: str | None = None) -> HostIndex:
    """Index the live pages of ``model`` (a Page subclass) into ``collection``."""
    return host_models.register(
        model,
        collection=collection or retrieval_settings.WAGTAIL_COLLECTION,
        text=page_text,
        title="title",
        metadata=page_metadata,
        condition=LIVE,
        visibility=page_visibility,
        url=page_url,
        quiet_fields=DRAFT_FIELDS,
    )


def register_pages() -> list[HostIndex]:
    """Register every page type ``RETRIEVAL["WAGTAIL_PAGE_MODELS"]`` names (None: all)."""
    return [register(model) for model in page_models()]


def page_models() -> list[type[Model]]:
    """Return the page types to index: those named in the setting, or all but ``Page``."""
    from wagtail.models import Page, get_page_models

    names = retrieval_settings.WAGTAIL_PAGE_MODELS
    if names is not None:
        return [apps.get_model(name) for name in names]
    return [model for model in get_page_models() if model is not Page]


def page_text(page: Model) -> str:
    """Return the text Wagtail's search would index for ``page``, a paragraph per field."""
    return "\n\n".join(_search_text(page, page.get_search_fields()))


def _search_text(obj: Model, fields: Iterable[Any]) -> list[str]:
    from wagtail.search import index

    parts: list[str] = []
    for field in fields:
        if isinstance(field, index.SearchField):
            parts += _strings(field.get_value(obj))
        elif isinstance(field, index.RelatedFields):
            related = field.get_value(obj)
            if related is None:
                continue
            if hasattr(related, "all"):  # a manager: many related objects
                for item in related.all():
                    parts += _search_text(item, field.fields)
            else:
                parts += _search_text(related, field.fields)
    return [part for part in parts if part.strip()]


def _strings(value: Any) -> list[str]:
    """A field's searchable value as strings (searchable content is already a list)."""
    if value is None:
        return []
    if isinstance(value, list | tuple):
        return [str(v) for v in value if v is not None]
    if hasattr(value, "__html__"):  # rich text outside a searchable field
        from retrieval.services.ingestion.host_registry import html_text

        return [html_text(value.__html__())]
    return [str(value)]


def page_url(page: Model) -> str | None:
    """The page's URL as the site links it (relative when the site has one host)."""
    return page.get_url()


def page_metadata(page: Model) -> dict[str, Any]:
    published = page.last_published_at
    return {
        "page_type": page._meta.label_lower,
        "last_published_at": published.isoformat() if published else None,
        "locale": getattr(page.locale, "language_code", None),
    }


def page_visibility(page: Model) -> Visibility:
    """Return who may open ``page``: every view restriction on it and its ancestors.

    All of them must let a reader in, as Wagtail checks them. A restriction type this
    code does not know lets nobody in (fails closed). Superusers see every page in
    search, as Wagtail lets them past group restrictions and shows every page in its
    admin.
    """
    from wagtail.models import PageViewRestriction

    visibility = Visibility.PUBLIC
    for restriction in page.get_view_restrictions().prefetch_related("groups"):
        kind = restriction.restriction_type
        if kind == PageViewRestriction.LOGIN:
            visibility &= Visibility.SIGNED_IN
        elif kind == PageViewRestriction.GROUPS:
            visibility &= Visibility.groups(restriction.groups.all())
        elif kind == PageViewRestriction.PASSWORD:
            visibility &= Visibility.of(retrieval_settings.WAGTAIL_PASSWORD_PAGES)
        else:
            logger.warning("Unknown view restriction %r on page %s: nobody", kind, page.pk)
            visibility &= Visibility.NOBODY
    return visibility
