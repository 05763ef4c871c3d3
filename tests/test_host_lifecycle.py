"""Host objects follow their site's lifecycle (issue 31, on plain Django models).

``tests/host_app``'s Story is an Entry (multi-table inheritance) with a proxy, StoryProxy,
registered with a ``Q`` condition, an HTML body and a visibility of its own: saves
through any class of a story are seen, the condition is evaluated on every save, a new
URL or title is stored without embedding unchanged text again, markup is read as text,
and who may see a story is applied on every face and leg.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser, Group
from django.core.management import call_command
from django.utils.safestring import mark_safe

from retrieval import host_models
from retrieval.models import Chunk, Collection, Document, IndexRun
from retrieval.services.access import Scope
from retrieval.services.graph.extraction import extract_graph
from retrieval.services.ingestion import host_registry
from retrieval.services.ingestion.runs import enqueue_run
from retrieval.services.query.search import search
from retrieval.services.registry import embedders
from retrieval.services.visibility import Visibility
from retrieval.tasks import index_object
from tests.host_app.models import Entry, Story, StoryProxy
from tests.scope.conftest import QUERY  # noqa: F401  (before faces: their import order)
from tests.scope.faces import SEARCH_FACES, legs, search_face_params

pytestmark = pytest.mark.django_db


def story_document(story: Story) -> Document | None:
    return Document.objects.filter(
        collection__name="stories", external_id=f"host_app.story:{story.pk}"
    ).first()


def found(query: str, **kwargs) -> set[str]:
    if "user" not in kwargs:
        kwargs["scope"] = Scope.ALL
    hits = search(query, collection="stories", top_k=20, **kwargs)
    return {hit.chunk.document.title for hit in hits}


def test_a_save_through_a_parent_class_is_seen_and_the_condition_evaluated_again(
    keyword_settings,
):
    """E1: unpublishing saves the parent row (as Wagtail's ``page.unpublish()`` saves a
    plain ``Page``); the registered subclass's document must go."""
    story = Story.objects.create(title="Going north", slug="north", body="<p>Up north.</p>")
    assert story_document(story).status == Document.Status.INDEXED
    entry = Entry.objects.get(pk=story.pk)  # the parent class's view of the same row
    entry.published = False
    entry.save()
    assert story_document(story) is None
    assert found("north") == set()
    assert IndexRun.objects.latest("pk").task == "remove_object"
    entry.published = True
    entry.save()  # published again through the parent: indexed again
    assert story_document(story).status == Document.Status.INDEXED
    assert found("north") == {"Going north"}


def test_a_save_through_a_proxy_is_seen(keyword_settings):
    story = Story.objects.create(title="Going north", slug="north", body="<p>Up.</p>")
    proxy = StoryProxy.objects.get(pk=story.pk)
    proxy.title = "Going east"
    proxy.save()
    assert story_document(story).title == "Going east"
    proxy.delete()
    assert story_document(story) is None


def test_deleting_through_the_parent_removes_the_document_once(keyword_settings):
    story = Story.objects.create(title="Going north", slug="north", body="<p>Up.</p>")
    Entry.objects.get(pk=story.pk).delete()  # deletes the Story row too
    assert story_document(story) is None
    assert IndexRun.objects.filter(task="remove_object").count() == 1


def test_a_draft_that_was_never_indexed_records_no_run(keyword_settings):
    """E2: objects failing the condition are never indexed, and saving them costs nothing."""
    story = Story.objects.create(title="Draft", slug="draft", body="<p>Up.</p>", published=False)
    story.body = "<p>Up north.</p>"
    story.save()
    assert story_document(story) is None
    assert not IndexRun.objects.exists()


def test_a_new_url_or_title_is_stored_without_embedding_unchanged_text_again(
    keyword_settings, retrieval_settings
):
    """E4: the hash covered the text only, so a new slug (URL) was skipped."""
    retrieval_settings(CHUNK_CONTEXT={"title": True, "source": False, "headings": False})
    story = Story.objects.create(title="Going north", slug="north", body="<p>Up north.</p>")
    document = story_document(story)
    assert document.metadata["url"] == "/stories/north/"
    vectors = list(Chunk.objects.filter(document=document).values_list("pk", "embedding"))
    embedder = embedders["default"]
    calls = embedder.calls
    story.slug = "up-north"
    story.save()
    document = story_document(story)
    assert document.metadata["url"] == "/stories/up-north/"
    assert Chunk.objects.get(document=document).metadata["url"] == "/stories/up-north/"
    assert embedder.calls == calls  # the text is the same: no embedding
    assert IndexRun.objects.latest("pk").documents_indexed == 1
    [(_, vector)] = vectors
    assert list(Chunk.objects.get(document=document).embedding) == list(vector)
    # The title heads every chunk's indexed text (CHUNK_CONTEXT): it is embedded again.
    story.title = "Going up"
    story.save()
    assert story_document(story).title == "Going up"
    assert embedder.calls == calls + 1
    assert found("up") == {"Going up"}
    story.save()  # nothing changed at all: skipped
    assert IndexRun.objects.latest("pk").documents_skipped == 1


def test_only_the_chunks_whose_text_changed_are_embedded_again(
    keyword_settings, retrieval_settings
):
    retrieval_settings(
        CHUNKERS={
            "default": {
                "BACKEND": "retrieval.services.chunkers.paragraph.ParagraphChunker",
                "OPTIONS": {"max_chars": 24},
            }
        }
    )
    story = Story.objects.create(
        title="T", slug="t", body="<p>North north north.</p><p>East east east.</p>"
    )
    first = list(Chunk.objects.filter(document=story_document(story)).order_by("index"))
    assert [c.content.split()[-1] for c in first] == ["north.", "east."]
    embedder = embedders["default"]
    calls = embedder.calls
    story.body = "<p>North north north.</p><p>Up up up.</p>"
    story.save()
    chunks = list(Chunk.objects.filter(document=story_document(story)).order_by("index"))
    assert [c.content.split()[-1] for c in chunks] == ["north.", "up."]
    assert embedder.calls == calls + 1  # one batch: the changed chunk's
    assert list(chunks[0].embedding) == list(first[0].embedding)
    assert list(chunks[1].embedding) != list(first[1].embedding)


def test_markup_is_read_as_text(keyword_settings):
    """E6: ``{{ body }}`` of HTML indexed its tags; safe values and tags are read as text."""
    story = Story.objects.create(
        title="Fish & chips",
        slug="fish",
        body='<h2>Where</h2><p>North <a href="/pier/">of the pier</a> &amp; up.</p>',
    )
    text = story_document(story).content
    assert "<" not in text and "href" not in text and "&amp;" not in text
    assert text.split() == "Fish & chips Where North of the pier & up.".split()
    html = host_models.HostIndex(Story, "stories", text=lambda s: mark_safe("<p>A &amp; B</p>"))
    assert html.source(story).data == b"A & B"  # a value that says it is HTML
    plain = host_models.HostIndex(Story, "stories", text=lambda s: "a <b> c &amp;")
    assert plain.source(story).data == b"a <b> c &amp;"  # plain text stays as it is


def test_a_broken_condition_or_visibility_fails_closed(keyword_settings):
    story = Story(pk=7, title="T", slug="t", body="x")
    broken = host_models.HostIndex(
        Story, "stories", text="title", condition=lambda s: 1 / 0, visibility=lambda s: 1 / 0
    )
    assert broken.wants(story) is False
    assert broken.source(story).access == ()
    odd = host_models.HostIndex(Story, "stories", text="title", visibility=lambda s: None)
    assert odd.source(story).access == ()


def test_retrieval_reindex_backfills_registered_models_and_creates_their_collection(
    keyword_settings,
):
    """The collection of a registered model did not exist before its first save, and
    ``retrieval_reindex --collection stories`` failed naming no such collection."""
    entry = host_models.registration("host_app.story")
    host_models.unregister(Story)  # what a site has before it registers its model
    try:
        Story.objects.create(title="Going north", slug="north", body="<p>North.</p>")
        Story.objects.create(title="Hidden", slug="hidden", body="<p>Up.</p>", published=False)
    finally:
        host_registry.add(entry)
    assert not Collection.objects.filter(name="stories").exists()
    call_command("retrieval_reindex", "--collection", "stories", "--sync")
    assert sorted(Document.objects.values_list("title", "status")) == [("Going north", "indexed")]
    assert found("north") == {"Going north"}


def test_visibility_combines_a_page_and_its_section():
    editors, writers = Visibility.groups([1]), Visibility.groups([2])
    assert Visibility.PUBLIC & editors == editors
    assert Visibility.SIGNED_IN & editors == editors
    assert editors & Visibility.SIGNED_IN == editors
    assert editors & writers == Visibility.NOBODY  # not storable: fails closed
    assert (editors | writers) & editors == editors
    assert Visibility.NOBODY & Visibility.PUBLIC == Visibility.NOBODY
    assert Visibility.of("signed-in") == Visibility.SIGNED_IN
    with pytest.raises(ValueError, match="not a visibility"):
        Visibility.of("everyone")


# Who may see a story, on every face and leg.

AUDIENCES = {
    "public": "markpublic",
    "members": "markmembers",
    "group:editors": "markeditors",
    "nobody": "marknobody",
}
EXPECTED = {
    "anonymous": {"markpublic"},
    "reader": {"markpublic", "markmembers"},
    "editor": {"markpublic", "markmembers", "markeditors"},
    "root": set(AUDIENCES.values()),  # superusers see everything, as in the admin
}


@pytest.fixture
def audiences(graph_settings, retrieval_settings):
    retrieval_settings(
        RETRIEVERS={
            "graph": {
                "BACKEND": "retrieval.services.retrievers.graph.GraphRetriever",
                "OPTIONS": {"retriever": "hybrid"},
            }
        }
    )
    group = Group.objects.create(name="editors")
    for audience, marker in AUDIENCES.items():
        Story.objects.create(
            title=marker,
            slug=marker,
            body=f"<p>North is up. North_Hub links {marker}.</p>",
            audience=audience,
        )
    extract_graph(Collection.objects.get(name="stories"))
    model = get_user_model()
    users = {"anonymous": AnonymousUser()}
    users["reader"] = model.objects.create_user(username="reader", password="x")
    users["editor"] = model.objects.create_user(username="editor", password="x")
    users["editor"].groups.add(group)
    users["root"] = model.objects.create_superuser(username="root", password="x")
    users["root"].is_staff = True
    return users


def shown(body: str) -> set[str]:
    return {marker for marker in AUDIENCES.values() if marker in body}


@pytest.mark.parametrize("face", search_face_params())
def test_each_story_is_shown_only_to_who_may_see_it_on_every_face_and_leg(audiences, face):
    """E3: a story's visibility is a condition of every leg, for every face."""
    assert set(legs()) >= {"bm25", "dense", "hybrid", "graph", "agentic"}
    for leg in legs():
        for username, user in audiences.items():
            answer = SEARCH_FACES[face](user, "stories", leg)
            where = f"{face} / {leg} / {username}"
            if answer.status == 200:
                assert shown(answer.body) == EXPECTED[username], where
            else:  # refused as a whole: the API and pages need a signed-in (staff) user
                assert username == "anonymous" or face == "playground", where
                assert answer.status in (302, 401, 403) and not shown(answer.body), where


def test_a_story_restricted_later_is_hidden_at_once(audiences):
    story = Story.objects.get(title="markpublic")
    story.audience = "group:editors"
    story.save()
    assert shown(str(found("north", user=audiences["reader"]))) == {"markmembers"}
    assert story_document(story).access == [f"group:{Group.objects.get().pk}"]


# Who may see a story never waits for a worker (issue 60).


def test_on_a_queue_with_no_worker_restricted_unpublished_and_deleted_stories_are_hidden_at_once(
    keyword_settings, retrieval_settings, django_capture_on_commit_callbacks
):
    """With the README's queue and its worker down, a story restricted, unpublished or
    deleted stayed found by anonymous readers until the worker ran."""
    from django_q.models import OrmQ

    titles = ("restricted", "unpublished", "deleted", "edited")
    stories = {t: Story.objects.create(title=t, slug=t, body="<p>North.</p>") for t in titles}
    keys = {t: f"host_app.story:{story.pk}" for t, story in stories.items()}
    anonymous = AnonymousUser()
    assert found("north", user=anonymous) == set(titles)
    retrieval_settings(TASKS_SYNC=False)  # django-q2's ORM broker, and no qcluster running
    with django_capture_on_commit_callbacks(execute=True):
        stories["restricted"].audience = "members"
        stories["restricted"].save()
        entry = Entry.objects.get(pk=stories["unpublished"].pk)
        entry.published = False
        entry.save()
        stories["deleted"].delete()
        stories["edited"].body = "<p>North and east.</p>"
        stories["edited"].save()
    assert found("north", user=anonymous) == {"edited"}
    reader = get_user_model().objects.create_user(username="reader", password="x")
    assert found("north", user=reader) == {"restricted", "edited"}
    # Only the embedding waits for the worker: queued, not run.
    assert found("east", user=anonymous, retriever="bm25") == set()
    queued = sorted(tuple(task.task["args"]) for task in OrmQ.objects.all())
    assert queued == [
        ("host_app.story", stories["restricted"].pk),
        ("host_app.story", stories["edited"].pk),
    ]
    assert IndexRun.objects.filter(status=IndexRun.Status.QUEUED).count() == 2
    removals = IndexRun.objects.filter(task="remove_object", status=IndexRun.Status.SUCCEEDED)
    assert sorted(run.options["removed"] for run in removals) == sorted(
        [keys["unpublished"], keys["deleted"]]
    )


def unpublish_the_stories() -> None:
    """What an editor does while the worker embeds (``InterruptingEmbedder``)."""
    for entry in Entry.objects.filter(published=True):
        entry.published = False
        entry.save()


def test_a_story_unpublished_while_the_worker_embeds_it_is_not_written_back(
    keyword_settings, retrieval_settings
):
    """The worker read the story before the change: its write restored the document that
    the change had removed, unless it checks again once written."""
    story = Story.objects.create(title="Going north", slug="north", body="<p>North.</p>")
    retrieval_settings(
        EMBEDDERS={
            "default": {
                "BACKEND": "tests.support.embedders.InterruptingEmbedder",
                "OPTIONS": {"interrupt": "tests.test_host_lifecycle.unpublish_the_stories"},
            }
        }
    )
    Story.objects.filter(pk=story.pk).update(body="<p>North and up.</p>")  # to be embedded
    run = enqueue_run(index_object, "host_app.story", story.pk, sync=True)
    assert not Entry.objects.get(pk=story.pk).published  # unpublished while it embedded
    assert story_document(story) is None
    assert found("north") == set()
    assert run.options["removed"] == f"host_app.story:{story.pk}"
