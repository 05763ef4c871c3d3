"""The Wagtail site's tree: its home page, a section, and helpers to publish and search."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser, Group

import retrieval
from retrieval.exceptions import CollectionNotFound
from retrieval.models import Document


@pytest.fixture(autouse=True)
def _pages_settings(keyword_settings):
    """The keyword embedder and small chunks for every test of the site."""


@pytest.fixture
def home():
    from wagtail.models import Page

    return Page.objects.get(depth=2)  # Wagtail's migrations create it, with its Site


@pytest.fixture
def section(home):
    from tests.wagtail_site.models import SectionPage

    return home.add_child(instance=SectionPage(title="Guides", slug="guides"))


def draft(parent, model=None, **fields: Any):
    """A new page under ``parent``, saved as a draft (never published)."""
    from wagtail.rich_text import RichText

    from tests.wagtail_site.models import ArticlePage

    model = model or ArticlePage
    body = fields.pop("body", None)
    if isinstance(body, str):
        fields["body"] = [("heading", "Where"), ("paragraph", RichText(body))]
    page = parent.add_child(instance=model(live=False, **fields))
    page.save_revision()
    return page


def publish(page):
    page.refresh_from_db()
    page.save_revision().publish()
    return type(page).objects.get(pk=page.pk)


def edit(page, **fields: Any):
    """Change ``page`` in a new revision and publish it, as an editor does."""
    from wagtail.rich_text import RichText

    page = type(page).objects.get(pk=page.pk)
    body = fields.pop("body", None)
    if body is not None:
        page.body = [("heading", "Where"), ("paragraph", RichText(body))]
    for name, value in fields.items():
        setattr(page, name, value)
    revision = page.save_revision()
    revision.publish()
    return type(page).objects.get(pk=page.pk), revision


def found(query: str, user: Any = None, retriever: str = "bm25") -> set[str]:
    """The titles of the pages a search of the "pages" collection returns to ``user``."""
    user = user if user is not None else AnonymousUser()
    try:
        hits = retrieval.search(query, collection="pages", user=user, retriever=retriever, top_k=20)
    except CollectionNotFound:
        return set()
    return {hit.chunk.document.title for hit in hits}


def document(page) -> Document | None:
    return Document.objects.filter(
        collection__name="pages", external_id=f"{page._meta.label_lower}:{page.pk}"
    ).first()


@pytest.fixture
def people():
    """A signed-in reader, a member of the group "staff", and a superuser."""
    model = get_user_model()
    staff = Group.objects.create(name="staff")
    member = model.objects.create_user(username="member", password="member-pass")
    member.groups.add(staff)
    return {
        "anonymous": AnonymousUser(),
        "reader": model.objects.create_user(username="reader", password="reader-pass"),
        "member": member,
        "root": model.objects.create_superuser(username="root", password="root-pass"),
        "group": staff,
    }
