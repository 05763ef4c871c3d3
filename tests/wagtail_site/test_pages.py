"""A real Wagtail site's pages in search (issue 31): only what a visitor may open.

Drafts, unpublished, expired and view-restricted pages are never returned to someone
who may not open them; publishing, editing, reverting, moving and renaming are
followed; the text is Wagtail's searchable content (no markup) and results carry the
page's URL.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from retrieval.models import Collection, Document
from tests.wagtail_site.conftest import document, draft, edit, found, publish
from tests.wagtail_site.models import ArticlePage, NewsPage, SectionPage

pytestmark = pytest.mark.django_db

LEGS = ("bm25", "dense", "hybrid")


def test_a_draft_is_never_found_and_a_published_page_is_with_its_url(section, people):
    """E2: drafts were searchable while the site answered 404."""
    page = draft(section, title="Going north", slug="north", body="<p>The road leads north.</p>")
    assert Client().get("/guides/north/").status_code == 404
    assert document(page) is None
    for leg in LEGS:
        assert found("north road", people["root"], leg) == set()
    page = publish(page)
    assert Client().get("/guides/north/").status_code == 200
    assert found("north road", people["anonymous"]) == {"Going north"}
    doc = document(page)
    assert doc.metadata["url"] == "/guides/north/"
    assert doc.metadata["page_type"] == "wagtail_site.articlepage"


def test_the_text_is_wagtails_searchable_content_without_markup(section):
    """E6: ``{{ body }}`` on a StreamField indexed block HTML."""
    page = draft(
        section,
        model=NewsPage,
        title="Harbour news",
        slug="harbour",
        intro="<p>Boats <b>return</b> &amp; rest.</p>",
        body='<p>North <a href="/pier/">of the pier</a>.</p>',
        dateline="Portsmouth",
    )
    content = document(publish(page)).content
    assert "<" not in content and "href" not in content and "&amp;" not in content
    for words in (
        "Harbour news",
        "Boats return & rest.",
        "Where",
        "North of the pier.",
        "Portsmouth",
    ):
        assert words in content, (words, content)


def test_unpublishing_removes_a_page_even_through_a_plain_page_save(section, people):
    """E1: ``page.unpublish()`` saves a plain ``Page``, whose signal the page type missed."""
    from wagtail.models import Page

    page = publish(draft(section, title="North", slug="north", body="<p>North up.</p>"))
    assert found("north") == {"North"}
    Page.objects.get(pk=page.pk).unpublish()  # the base class, as publish_scheduled does
    assert document(page) is None
    for leg in LEGS:
        assert found("north", people["root"], leg) == set()
    publish(page)
    assert found("north") == {"North"}


def test_scheduled_expiry_and_publishing_are_followed(section, people):
    page = publish(draft(section, title="Short lived", slug="short", body="<p>North.</p>"))
    ArticlePage.objects.filter(pk=page.pk).update(expire_at=timezone.now() - timedelta(minutes=1))
    call_command("publish_scheduled")
    assert not ArticlePage.objects.get(pk=page.pk).live
    assert found("north", people["root"]) == set()
    # Scheduled to go live: nothing until it does.
    later = draft(section, title="Coming soon", slug="soon", body="<p>East.</p>")
    later.go_live_at = timezone.now() + timedelta(minutes=5)
    later.save_revision().publish()
    assert found("east", people["root"]) == set()
    from wagtail.models import Revision

    Revision.objects.filter(object_id=str(later.pk)).update(
        approved_go_live_at=timezone.now() - timedelta(seconds=1)
    )
    call_command("publish_scheduled")
    assert found("east") == {"Coming soon"}


def test_a_page_published_with_a_past_expiry_is_not_indexed(section, people):
    page = draft(section, title="Stale", slug="stale", body="<p>North.</p>")
    page.expire_at = timezone.now() - timedelta(minutes=1)
    page.live = True
    page.save()  # live in the database, past its expiry: Wagtail's own search hides it too
    assert document(page) is None


def test_edits_and_a_revision_revert_are_followed(section):
    page = publish(draft(section, title="Route", slug="route", body="<p>Head north.</p>"))
    first = page.latest_revision
    page, _ = edit(page, body="<p>Head east.</p>")
    assert found("east") == {"Route"} and found("north") == set()
    first.publish()  # reverting to the first revision, as the admin's revisions view does
    assert found("north") == {"Route"} and found("east") == set()
    page.delete()
    assert found("north") == set() and not Document.objects.exists()


def test_slug_changes_and_moves_update_the_urls_of_a_section(
    home, section, django_capture_on_commit_callbacks
):
    """E4: unchanged text was skipped, so the stored URL stayed stale. Wagtail sends
    ``page_slug_changed`` once the change commits."""
    page = publish(draft(section, title="North", slug="north", body="<p>North.</p>"))
    child = publish(draft(page, title="Further north", slug="further", body="<p>Up.</p>"))
    assert document(child).metadata["url"] == "/guides/north/further/"
    with django_capture_on_commit_callbacks(execute=True):
        edit(section, slug="handbook")  # the section's slug: every page below moves
    assert document(page).metadata["url"] == "/handbook/north/"
    assert document(child).metadata["url"] == "/handbook/north/further/"
    elsewhere = home.add_child(instance=SectionPage(title="Archive", slug="archive"))
    ArticlePage.objects.get(pk=page.pk).move(elsewhere, pos="last-child")
    assert document(page).metadata["url"] == "/archive/north/"
    assert document(child).metadata["url"] == "/archive/north/further/"
    assert document(page).title == "North"
    edit(page, title="True north")
    assert found("north") >= {"True north"}
    assert document(page).metadata["url"] == "/archive/north/"  # the slug stayed


def test_view_restrictions_decide_who_finds_a_page(section, people):
    """E3: a user who got a 302 on a restricted page read its text through search."""
    from wagtail.models import PageViewRestriction

    publish(draft(section, title="Members", slug="members", body="<p>North up.</p>"))
    restriction = PageViewRestriction.objects.create(
        page=section, restriction_type=PageViewRestriction.LOGIN
    )
    assert Client().get("/guides/members/").status_code == 302
    expected = {"anonymous": set(), "reader": {"Members"}, "member": {"Members"}}
    for username, titles in expected.items():
        for leg in LEGS:
            assert found("north", people[username], leg) == titles, (username, leg)
    restriction.restriction_type = PageViewRestriction.GROUPS
    restriction.save()
    restriction.groups.set([people["group"]])
    reader = Client()
    reader.force_login(people["reader"])
    assert reader.get("/guides/members/").status_code != 200
    expected = {"anonymous": set(), "reader": set(), "member": {"Members"}, "root": {"Members"}}
    for username, titles in expected.items():
        for leg in LEGS:
            assert found("north", people[username], leg) == titles, (username, leg)
    restriction.restriction_type = PageViewRestriction.PASSWORD
    restriction.password = "secret"
    restriction.save()
    for username in ("anonymous", "reader", "member"):
        assert found("north", people[username]) == set(), username
    restriction.delete()
    assert found("north", people["anonymous"]) == {"Members"}


def test_password_pages_may_be_opened_to_signed_in_users_when_configured(
    section, people, retrieval_settings
):
    from wagtail.models import PageViewRestriction

    retrieval_settings(WAGTAIL_PASSWORD_PAGES="signed-in")
    publish(draft(section, title="Vault", slug="vault", body="<p>North.</p>"))
    PageViewRestriction.objects.create(
        page=section, restriction_type=PageViewRestriction.PASSWORD, password="secret"
    )
    assert found("north", people["anonymous"]) == set()
    assert found("north", people["reader"]) == {"Vault"}


def test_restricted_pages_never_reach_the_api_or_the_search_page(section, people):
    from wagtail.models import PageViewRestriction

    publish(draft(section, title="Open", slug="open", body="<p>North.</p>"))
    secret = publish(draft(section, title="Closed", slug="closed", body="<p>North.</p>"))
    restriction = PageViewRestriction.objects.create(
        page=secret, restriction_type=PageViewRestriction.GROUPS
    )
    restriction.groups.set([people["group"]])
    reader = Client()
    reader.force_login(people["reader"])
    answer = reader.post(
        "/api/search/",
        {"query": "north", "collection": "pages", "top_k": 10},
        content_type="application/json",
    )
    assert answer.status_code == 200
    results = answer.json()["results"]
    assert [r["title"] for r in results] == ["Open"]
    assert results[0]["metadata"]["url"] == "/guides/open/"
    page = reader.get("/search/", {"collection": "pages", "q": "north"}).content.decode()
    assert "Open" in page and "Closed" not in page


def test_retrieval_reindex_backfills_pages_that_existed_before(section, people):
    from retrieval import host_models
    from retrieval.services.ingestion import host_registry

    entry = host_models.registration("wagtail_site.articlepage")
    host_models.unregister(ArticlePage)  # pages a site had before it added the app
    try:
        publish(draft(section, title="Old news", slug="old", body="<p>North.</p>"))
        draft(section, title="Old draft", slug="draft", body="<p>North.</p>")
    finally:
        host_registry.add(entry)
    assert not Collection.objects.filter(name="pages").exists()
    call_command("retrieval_reindex", "--collection", "pages", "--sync")
    assert found("north") == {"Old news"}


def test_the_api_schema_describes_the_apps_routes_on_a_wagtail_site(people):
    """E5: /api/schema/ was a 500 on a Wagtail site."""
    client = Client()
    client.force_login(people["reader"])
    response = client.get("/api/schema/", {"format": "json"})
    assert response.status_code == 200, response.content[:500]
    paths = set(response.json()["paths"])
    assert "/api/search/" in paths and all(p.startswith("/api/") for p in paths)


def test_on_a_queue_a_publish_enqueues_one_run_read_after_the_commit(
    section, retrieval_settings, django_capture_on_commit_callbacks
):
    """A publish saves the page and sends ``page_published``: one task, not two."""
    from django_q.models import OrmQ

    from retrieval.models import IndexRun

    page = draft(section, title="Queued", slug="queued", body="<p>North.</p>")
    retrieval_settings(TASKS_SYNC=False)
    with django_capture_on_commit_callbacks(execute=True):
        publish(page)
    queued = [task.task for task in OrmQ.objects.all()]
    assert [(t["func"], t["args"]) for t in queued] == [
        ("retrieval.tasks.index_object", ("wagtail_site.articlepage", page.pk))
    ]
    assert IndexRun.objects.filter(status=IndexRun.Status.QUEUED).count() == 1


def test_saving_a_draft_of_a_live_page_records_no_run_and_keeps_the_live_text(section):
    from retrieval.models import IndexRun

    page = publish(draft(section, title="Live", slug="live", body="<p>North.</p>"))
    runs = IndexRun.objects.count()
    page = ArticlePage.objects.get(pk=page.pk)
    page.title = "Draft title"
    page.save_revision()  # a draft: the site still serves the live page
    assert IndexRun.objects.count() == runs
    assert document(page).title == "Live" and found("north") == {"Live"}


def test_w002_a_page_type_registered_without_a_condition_is_a_warning():
    """E2 as the old docstring showed it: a page type registered with no condition."""
    from django.core import checks

    from retrieval import host_models
    from retrieval.services.ingestion import host_registry

    assert [m for m in checks.run_checks() if m.id == "retrieval.W002"] == []
    entry = host_models.registration("wagtail_site.articlepage")
    try:
        host_models.register(ArticlePage, collection="pages", text="{{ title }}")
        (warning,) = [m for m in checks.run_checks() if m.id == "retrieval.W002"]
        assert "ArticlePage" in warning.msg and "retrieval.contrib.wagtail" in warning.hint
    finally:
        host_registry.add(entry)


def test_on_a_queue_with_no_worker_unpublished_restricted_and_deleted_pages_are_hidden_at_once(
    section, people, retrieval_settings, django_capture_on_commit_callbacks
):
    """Issue 60: with the README's queue and its worker busy or down, an unpublished or
    newly restricted page stayed findable by anonymous users until the worker ran."""
    from django_q.models import OrmQ
    from wagtail.models import Page, PageViewRestriction

    from retrieval.models import IndexRun

    titles = ("Unpublished", "Restricted", "Deleted", "Kept")
    pages = {
        title: publish(draft(section, title=title, slug=title.lower(), body="<p>North.</p>"))
        for title in titles
    }
    assert found("north") == set(titles)
    retrieval_settings(TASKS_SYNC=False)  # django-q2's ORM broker, and no qcluster running
    with django_capture_on_commit_callbacks(execute=True):
        Page.objects.get(pk=pages["Unpublished"].pk).unpublish()
        PageViewRestriction.objects.create(
            page=pages["Restricted"], restriction_type=PageViewRestriction.LOGIN
        )
        pages["Deleted"].delete()
    for leg in LEGS:
        assert found("north", people["anonymous"], leg) == {"Kept"}, leg
        assert found("north", people["reader"], leg) == {"Kept", "Restricted"}, leg
    # Only indexing waits for the worker: queued, not run; the removals ran in the saves.
    queued = {task.task["func"].rpartition(".")[2] for task in OrmQ.objects.all()}
    assert "index_objects" in queued and queued <= {"index_object", "index_objects"}
    removed = IndexRun.objects.filter(task="remove_object", status=IndexRun.Status.SUCCEEDED)
    assert removed.count() == 2


def test_documents_of_page_types_no_longer_indexed_are_reported_and_removed_by_the_backfill(
    section, people
):
    """Issue 60: after narrowing WAGTAIL_PAGE_MODELS, an unpublished page of a type left
    out was still found by anonymous users; the backfill looked at registered types only."""
    from django.core import checks
    from wagtail.models import Page

    from retrieval import host_models
    from retrieval.services.ingestion import host_registry

    def stale() -> list[str]:
        messages = checks.run_checks(databases=["default"])
        return [m.msg for m in messages if m.id == "retrieval.W022"]

    publish(draft(section, model=NewsPage, title="Harbour news", slug="harbour", body="<p>N.</p>"))
    article = publish(draft(section, title="Route", slug="route", body="<p>North.</p>"))
    assert stale() == []
    entry = host_models.registration("wagtail_site.articlepage")
    host_models.unregister(ArticlePage)  # WAGTAIL_PAGE_MODELS narrowed to news pages
    try:
        Page.objects.get(pk=article.pk).unpublish()
        assert found("north") == {"Route"}  # no longer followed: still found
        (warning,) = stale()
        assert "'pages'" in warning and "wagtail_site.articlepage" in warning
        call_command("retrieval_reindex", "--collection", "pages", "--sync")
        assert found("north") == set()
        assert {d.title for d in Document.objects.all()} == {"Harbour news"}
        assert stale() == []
    finally:
        host_registry.add(entry)


def test_a_page_type_s_text_outside_search_fields_is_indexed_as_the_setting_chooses(section):
    """Issue 64: bakerydemo's bread pages were indexed as their title alone (their text is
    in ``introduction``, which ``search_fields`` leaves out)."""
    from tests.wagtail_site.models import BreadPage

    page = publish(
        draft(
            section,
            model=BreadPage,
            title="Anpan",
            slug="anpan",
            introduction="A sweet roll filled with red bean paste.",
            origin="Japan",
        )
    )
    indexed = document(page)
    assert indexed.content == "A sweet roll filled with red bean paste.\n\nJapan"
    assert indexed.metadata["origin"] == "Japan"  # the page type's metadata field
    assert indexed.metadata["page_type"] == "wagtail_site.breadpage"  # beside the page's own
    assert found("red bean paste") == {"Anpan"}


def test_unknown_page_type_options_are_refused_naming_them(retrieval_settings):
    from django.core.exceptions import ImproperlyConfigured

    from retrieval.contrib.wagtail.pages import page_models_with_options

    retrieval_settings(WAGTAIL_PAGE_MODELS={"wagtail_site.BreadPage": {"txt": ["origin"]}})
    with pytest.raises(ImproperlyConfigured, match="unknown options txt; a page type takes"):
        page_models_with_options()
