"""Wagtail's own signals, for what a page's own save does not show.

A page's saves (publish, unpublish, scheduled expiry, revision revert, edits by code)
reach :mod:`retrieval.host_models` through Django's ``post_save`` whatever class saved
it, and deletes through ``post_delete``. Wagtail's signals add:

- ``page_published`` / ``page_unpublished``: the page again (a queue runs it once per
  transaction; sent after the save, so nothing is missed if a save changed nothing);
- ``post_page_move`` and ``page_slug_changed``: the page and its descendants, whose
  URLs Wagtail rewrote in SQL without saving them;
- a view restriction saved, deleted or given other groups: the page and its
  descendants, whose visibility it decides.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Model
from django.db.models.signals import m2m_changed, post_delete, post_save

from retrieval import host_models
from retrieval.services.ingestion.host_registry import registration, related

_UID = "retrieval_wagtail"


def connect() -> None:
    """Connect the handlers (once; called by the app's ``ready()``)."""
    from wagtail.models import PageViewRestriction
    from wagtail.signals import page_published, page_slug_changed, page_unpublished, post_page_move

    page_published.connect(page_changed, dispatch_uid=f"{_UID}_published")
    page_unpublished.connect(page_changed, dispatch_uid=f"{_UID}_unpublished")
    post_page_move.connect(section_changed, dispatch_uid=f"{_UID}_moved")
    page_slug_changed.connect(section_changed, dispatch_uid=f"{_UID}_slug")
    post_save.connect(
        restriction_changed, sender=PageViewRestriction, dispatch_uid=f"{_UID}_restriction"
    )
    post_delete.connect(
        restriction_changed, sender=PageViewRestriction, dispatch_uid=f"{_UID}_unrestriction"
    )
    m2m_changed.connect(
        restriction_groups_changed,
        sender=PageViewRestriction.groups.through,
        dispatch_uid=f"{_UID}_restriction_groups",
    )


def page_changed(sender: type[Model], instance: Model, **_: Any) -> None:
    for entry, _how in related(type(instance)):
        if isinstance(instance, entry.model):
            host_models.refresh(entry, instance)


def section_changed(sender: type[Model], instance: Model, **_: Any) -> None:
    refresh_section(instance)


def restriction_changed(sender: type[Model], instance: Any, **_: Any) -> None:
    refresh_section(instance.page)


def restriction_groups_changed(instance: Any, action: str, **_: Any) -> None:
    if action in ("post_add", "post_remove", "post_clear"):
        refresh_section(instance.page)


def refresh_section(page: Model) -> None:
    """Index ``page`` and its descendants again (one run per collection)."""
    from wagtail.models import Page

    rows = (
        Page.objects.descendant_of(page, inclusive=True)
        .order_by("path")
        .values_list("pk", "content_type__app_label", "content_type__model")
    )
    objects = []
    for pk, app_label, model in rows.iterator():
        entry = registration(f"{app_label}.{model}")
        if entry is not None:
            objects.append((entry, pk))
    if objects:
        host_models.refresh_objects(objects)
