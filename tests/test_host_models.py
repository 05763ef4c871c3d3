"""A site's own model (tests/host_app's Article) indexed on save, removed on delete."""

from __future__ import annotations

import pytest
from django.db import transaction

from retrieval import indexing
from retrieval.models import Collection, Document, IndexRun
from retrieval.services.access import Scope
from retrieval.services.runs import enqueue_run
from retrieval.services.search import search
from retrieval.tasks import reindex_collection
from tests.host_app.models import Article

pytestmark = pytest.mark.django_db


def document_of(article: Article) -> Document:
    return Document.objects.get(
        collection__name="blog", external_id=f"host_app.article:{article.pk}"
    )


def test_saving_indexes_the_rendered_text_and_deleting_removes_it(keyword_settings):
    article = Article.objects.create(
        title="Going north", body="The road leads up.", section="travel"
    )
    document = document_of(article)
    assert document.status == Document.Status.INDEXED and document.title == "Going north"
    assert document.content == "Going north\n\nThe road leads up."
    assert document.metadata["section"] == "travel"
    assert document.metadata["object"] == {"model": "host_app.article", "pk": article.pk}
    hits = search("north", collection="blog", top_k=1, scope=Scope.ALL)
    assert hits[0].chunk.document_id == document.pk
    article.body = "The road leads east."
    article.save()
    assert document_of(article).content == "Going north\n\nThe road leads east."
    runs = IndexRun.objects.filter(scope="index_object").order_by("pk")
    assert [r.status for r in runs] == ["succeeded", "succeeded"]
    article.save()  # unchanged text: skipped, not embedded again
    assert IndexRun.objects.filter(scope="index_object").latest().documents_skipped == 1
    pk = article.pk
    article.delete()
    assert not Document.objects.filter(external_id=f"host_app.article:{pk}").exists()
    assert not search("east", collection="blog", top_k=5, scope=Scope.ALL)


def test_an_object_failing_its_condition_is_removed(keyword_settings):
    article = Article.objects.create(title="Draft", body="Up and away.")
    assert document_of(article)
    article.published = False
    article.save()
    assert not Document.objects.filter(collection__name="blog").exists()
    assert IndexRun.objects.latest().scope == "remove_object"


def test_indexing_waits_for_the_commit_on_workers(
    keyword_settings, retrieval_settings, django_capture_on_commit_callbacks
):
    from django_q.models import OrmQ

    retrieval_settings(TASKS_SYNC=False)
    with django_capture_on_commit_callbacks(execute=True):
        with transaction.atomic():
            article = Article.objects.create(title="North", body="Up.")
            assert not OrmQ.objects.exists()  # nothing pushed before the commit
    queued = OrmQ.objects.get().task
    assert queued["func"] == "retrieval.tasks.index_object"
    assert queued["args"] == ("host_app.article", article.pk)


def test_reindexing_the_collection_adds_missing_objects_and_drops_gone_ones(keyword_settings):
    kept = Article.objects.create(title="Kept", body="North.")
    gone = Article.objects.create(title="Gone", body="East.")
    # Writes that bypass signals (bulk operations, raw SQL) leave the index behind.
    Article.objects.bulk_create([Article(title="Bulk", body="Up north.")])
    Article.objects.filter(pk=gone.pk).delete()  # queryset delete sends signals: removed
    Document.objects.create(
        collection=Collection.objects.get(name="blog"), external_id="host_app.article:999"
    )
    collection = Collection.objects.get(name="blog")
    run = enqueue_run(reindex_collection, collection.pk, changed_only=True, collection=collection)
    assert run.status == IndexRun.Status.SUCCEEDED
    titles = sorted(collection.documents.values_list("title", flat=True))
    assert titles == ["Bulk", "Kept"]
    assert (run.documents_indexed, run.documents_skipped) == (1, 1)
    assert document_of(kept).status == Document.Status.INDEXED


def test_text_may_be_a_method_or_a_callable(keyword_settings):
    entry = indexing.registration("host_app.article")
    as_method = indexing.HostIndex(Article, "blog", text="__str__")
    as_callable = indexing.HostIndex(Article, "blog", text=lambda a: a.body.upper())
    article = Article(pk=5, title="T", body="b")
    assert as_method.source(article).data == b"T"
    assert as_callable.source(article).data == b"B"
    assert entry.source(article).external_id == "host_app.article:5"


def test_the_registry_is_service_code_and_the_import_circle_is_gone():
    """services/ never imports the public ``retrieval.indexing`` (nor did its import loop back)."""
    import ast
    from pathlib import Path

    from retrieval.services import hosts

    services = Path(hosts.__file__).parent
    importers = []
    for path in sorted(services.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            if "retrieval.indexing" in names or (
                isinstance(node, ast.ImportFrom)
                and node.module == "retrieval"
                and any(a.name == "indexing" for a in node.names)
            ):
                importers.append(str(path.relative_to(services)))
    assert importers == []
    assert indexing.registration("host_app.article") is hosts.registration("host_app.article")
    assert indexing.register.__module__ == "retrieval.indexing"
