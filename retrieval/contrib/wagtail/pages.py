"""Wagtail pages as host objects: their text, URL, who may see them, which are indexed.

A page type is registered with :func:`retrieval.host_models.register` and:

- **text** from Wagtail's own search configuration: the page's ``search_fields``
  (``SearchField`` and ``RelatedFields``), each field's searchable content as Wagtail's
  search indexes it (a StreamField's or RichTextField's text, no markup) — unless the
  page type says otherwise: ``text=`` (and ``title=``, ``metadata=``) in :func:`register`
  or in ``RETRIEVAL["WAGTAIL_PAGE_MODELS"]`` given as ``{"app.Model": {"text": ...}}``,
  as host models take them (a template, a field name, field names, or a callable), for
  pages whose text lives outside ``search_fields`` (bakerydemo's bread pages keep theirs
  in ``introduction``);
- **condition** :data:`LIVE`: live pages not past their expiry (drafts, unpublished
  and expired pages are removed from the index when saved);
- **visibility** from the page's view restrictions and its ancestors'
  (:func:`page_visibility`): login → signed-in users, groups → those groups' members,
  password → ``RETRIEVAL["WAGTAIL_PASSWORD_PAGES"]`` ("nobody" unless the site says);
- **url** ``page.get_url()``, in ``metadata["url"]`` with the page type and dates.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from django.apps import apps
from django.core.exceptions import ImproperlyConfigured
from django.db.models import Model, Q
from django.db.models.functions import Now

from retrieval import host_models
from retrieval.conf import retrieval_settings
from retrieval.services.ingestion.host_registry import HostIndex, TextSpec, json_value, text_of
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


#: What a page type may say of its documents, in ``register`` and the setting's dict form.
PAGE_OPTIONS = frozenset({"collection", "text", "title", "metadata"})


def register(
    model: type[Model],
    *,
    collection: str | None = None,
    text: TextSpec | Sequence[str] | None = None,
    title: TextSpec | None = None,
    metadata: list[str] | Callable[[Model], dict[str, Any]] | None = None,
) -> HostIndex:
    """Index the live pages of ``model`` (a Page subclass) into ``collection``.

    ``text`` defaults to the page type's ``search_fields`` (:func:`page_text`); a list
    of field names gives a paragraph per field. ``title`` defaults to the page title.
    ``metadata`` (field names or a callable) adds to the page's own (:func:`page_metadata`).
    """
    return host_models.register(
        model,
        collection=collection or retrieval_settings.WAGTAIL_COLLECTION,
        text=page_text if text is None else _text_spec(text),
        title="title" if title is None else title,
        metadata=page_metadata if metadata is None else _with_page_metadata(metadata),
        condition=LIVE,
        visibility=page_visibility,
        url=page_url,
        quiet_fields=DRAFT_FIELDS,
    )


def register_pages() -> list[HostIndex]:
    """Register every page type ``RETRIEVAL["WAGTAIL_PAGE_MODELS"]`` names (None: all),
    with the options the setting gives each when it is a dict."""
    return [register(model, **options) for model, options in page_models_with_options()]


def page_models() -> list[type[Model]]:
    """Return the page types to index: those named in the setting, or all but ``Page``."""
    return [model for model, _ in page_models_with_options()]


def page_models_with_options() -> list[tuple[type[Model], dict[str, Any]]]:
    """Return each page type to index with its options (``{}``: the defaults)."""
    from wagtail.models import Page, get_page_models

    named = retrieval_settings.WAGTAIL_PAGE_MODELS
    if named is None:
        return [(model, {}) for model in get_page_models() if model is not Page]
    if isinstance(named, Mapping):
        for name, options in named.items():
            unknown = set(options or {}) - PAGE_OPTIONS
            if unknown:
                raise ImproperlyConfigured(
                    f'RETRIEVAL["WAGTAIL_PAGE_MODELS"][{name!r}] has unknown options '
                    f"{', '.join(sorted(unknown))}; a page type takes "
                    f"{', '.join(sorted(PAGE_OPTIONS))}."
                )
        return [(apps.get_model(name), dict(options or {})) for name, options in named.items()]
    return [(apps.get_model(name), {}) for name in named]


def _text_spec(text: TextSpec | Sequence[str]) -> TextSpec:
    """Return ``text`` as host models take it: field names become a paragraph each."""
    if isinstance(text, str) or callable(text):
        return text
    names = tuple(text)

    def fields_text(page: Model) -> str:
        return "\n\n".join(part for name in names if (part := text_of(page, name).strip()))

    return fields_text


def _with_page_metadata(
    metadata: list[str] | Callable[[Model], dict[str, Any]],
) -> Callable[[Model], dict[str, Any]]:
    """Return the page's own metadata with the page type's ``metadata`` added."""

    def merged(page: Model) -> dict[str, Any]:
        if callable(metadata):
            extra = dict(metadata(page))
        else:
            extra = {name: json_value(getattr(page, name)) for name in metadata}
        return {**page_metadata(page), **extra}

    return merged


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
