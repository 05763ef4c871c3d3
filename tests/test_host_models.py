"""A site's own model (tests/host_app's Article) indexed on save, removed on delete."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import transaction

from retrieval import host_models
from retrieval.models import Collection, Document, IndexRun
from retrieval.services.access import Scope
from retrieval.services.ingestion import host_registry
from retrieval.services.ingestion.runs import enqueue_run
from retrieval.services.query.search import search
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
    runs = IndexRun.objects.filter(task="index_object").order_by("pk")
    assert [r.status for r in runs] == ["succeeded", "succeeded"]
    article.save()  # unchanged text: skipped, not embedded again
    assert IndexRun.objects.filter(task="index_object").latest().documents_skipped == 1
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
    assert IndexRun.objects.latest().task == "remove_object"


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
    entry = host_models.registration("host_app.article")
    as_method = host_models.HostIndex(Article, "blog", text="__str__")
    as_callable = host_models.HostIndex(Article, "blog", text=lambda a: a.body.upper())
    article = Article(pk=5, title="T", body="b")
    assert as_method.source(article).data == b"T"
    assert as_callable.source(article).data == b"B"
    assert entry.source(article).external_id == "host_app.article:5"


def test_the_registry_is_service_code_and_the_import_circle_is_gone():
    """services/ never imports the public ``retrieval.host_models`` (nor loops back to it)."""
    import ast
    from pathlib import Path

    from retrieval.services.ingestion import host_registry as hosts

    services = Path(hosts.__file__).parents[1]
    importers = []
    for path in sorted(services.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            if "retrieval.host_models" in names or (
                isinstance(node, ast.ImportFrom)
                and node.module == "retrieval"
                and any(a.name == "host_models" for a in node.names)
            ):
                importers.append(str(path.relative_to(services)))
    assert importers == []
    assert host_models.registration("host_app.article") is hosts.registration("host_app.article")
    assert host_models.register.__module__ == "retrieval.host_models"


def stale_host_documents() -> list[str]:
    from django.core import checks

    return [m.msg for m in checks.run_checks(databases=["default"]) if m.id == "retrieval.W022"]


def test_documents_of_an_unregistered_model_are_reported_and_removed_by_the_backfill(
    keyword_settings,
):
    """Issue 60: documents of a model no longer registered stayed found, never updated
    again; the backfill looked only at registered models."""
    article = Article.objects.create(title="Going north", body="Up north.")
    upload = Collection.objects.get(name="blog").documents.create(
        external_id="notes:1",
        title="Notes",
        content="Notes.",
        metadata={"object": {"model": "host_app.article"}},
    )  # not a host object's document: its external id is not the model's
    assert stale_host_documents() == []
    entry = host_models.registration("host_app.article")
    host_models.unregister(Article)
    try:
        Article.objects.filter(pk=article.pk).update(published=False)
        article.delete()  # no longer followed
        assert search("north", collection="blog", retriever="bm25", scope=Scope.ALL)
        (warning,) = stale_host_documents()
        assert "'blog' holds 1 documents" in warning and "host_app.article" in warning
        call_command("retrieval_reindex", "--collection", "blog", "--sync")
        assert list(Document.objects.values_list("external_id", flat=True)) == [upload.external_id]
        assert not search("north", collection="blog", retriever="bm25", scope=Scope.ALL)
        assert stale_host_documents() == []
    finally:
        host_registry.add(entry)
