"""The admin landing page: a card per visible collection, its figures, links and actions."""

from __future__ import annotations

import html
import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db.models import Q
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from retrieval.models import (
    Chunk,
    Collection,
    Document,
    EvalRun,
    EvalSet,
    IndexOperation,
    IndexRun,
    QueryTrace,
    SearchClick,
    Triple,
)
from retrieval.services.graph.extraction import extract_graph
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.ingest import Source, ingest
from retrieval.services.quality.goldens import judge
from tests.conftest import collection_of, editor

pytestmark = pytest.mark.django_db

LANDING = "/admin/retrieval/"


def sees(user):
    """COLLECTION_ACCESS: ``editor-<name>`` users see collection <name> only."""
    name = user.get_username()
    return [name.removeprefix("editor-")] if name.startswith("editor-") else None


def team_docs(user):
    """DOCUMENT_ACCESS: ``reader-*`` users read documents "a" only."""
    return Q(external_id__startswith="a") if user.get_username().startswith("reader") else None


@pytest.fixture
def site(keyword_settings):
    atlas = collection_of("atlas", {"a1": "north is up", "a2": "east is right", "b": "down"})
    bestiary = collection_of("bestiary", {"a-wolf": "the wolf runs"})
    Document.objects.filter(external_id="b").update(status="failed", error="could not parse")
    now = timezone.now()
    for query, results, ms, ago in [
        ("north", 2, 10.0, timedelta(hours=1)),
        ("north", 2, 30.0, timedelta(hours=2)),
        ("nowhere", 0, 5.0, timedelta(days=3)),
        ("old", 1, 1.0, timedelta(days=9)),
    ]:
        made = QueryTrace.objects.create(
            collection=atlas, query=query, pipeline="default", ms=ms, result_count=results
        )
        QueryTrace.objects.filter(pk=made.pk).update(created_at=now - ago)
    QueryTrace.objects.create(collection=bestiary, query="wolf", pipeline="default", ms=3.0)
    gold = EvalSet.objects.create(name="gold", collection=atlas)
    judge(gold, "north", Chunk.objects.filter(collection=atlas).first(), grade=1)
    # Votes wait here; nothing judged yet, so it cannot be evaluated and is not offered.
    EvalSet.objects.create(name="feedback", collection=atlas)
    for value in (0.5, 0.62):
        EvalRun.objects.create(
            eval_set=gold, pipeline="default", status="succeeded", metrics={"ndcg@10": value}
        )
    return {"atlas": atlas, "bestiary": bestiary}


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def cards(body: str) -> dict[int, str]:
    return {
        int(pk): card
        for pk, card in re.findall(
            r'<section class="retrieval-card" data-collection="(\d+)".*?>(.*?)</section>',
            body,
            re.S,
        )
    }


def figure(card: str, key: str) -> tuple[str, str]:
    """Return a figure's value and the link behind it."""
    found = re.search(
        rf'<a href="([^"]*)"[^>]*data-figure="{key}"[^>]*><span class="retrieval-value">'
        r"([^<]*)</span>",
        card,
    )
    assert found, f"no figure {key}"
    return html.unescape(found.group(2)), html.unescape(found.group(1))


def test_a_superuser_sees_every_collection_s_figures_and_the_model_list(site):
    root = get_user_model().objects.create_superuser("root", password="x")
    client = signed_in(root)
    body = client.get(LANDING).content.decode()
    assert 'id="retrieval-dashboard"' in body and 'class="app-retrieval module' in body
    shown = cards(body)
    atlas = shown[site["atlas"].pk]
    assert set(shown) == {site["atlas"].pk, site["bestiary"].pk}
    assert figure(atlas, "documents")[0] == "3" and figure(atlas, "failed")[0] == "1"
    assert figure(atlas, "chunks")[0] == "3"
    assert figure(atlas, "searches_day")[0] == "2" and figure(atlas, "searches_week")[0] == "3"
    assert figure(atlas, "empty_rate")[0] == "33.3%"
    assert figure(atlas, "latency")[0] == "10.0 / 28.0"  # of 5, 10 and 30 ms
    assert figure(atlas, "ndcg")[0] == "0.620" and figure(atlas, "trend")[0] == "+0.120"
    assert figure(atlas, "pending")[0] == "0" and figure(atlas, "backend")[0] == "PgvectorIndex"
    assert "1 document failed" in atlas
    assert {"reindex", "rebuild", "evaluate"} <= set(re.findall(r'data-action="(\w+)"', atlas))
    evaluate = re.search(r'data-action="evaluate".*?</form>', atlas, re.S).group(0)
    assert "Evaluate gold" in evaluate and "feedback" not in evaluate
    assert 'data-state="ok"' in shown[site["bestiary"].pk]


def test_each_figure_links_to_the_list_behind_it(site):
    root = get_user_model().objects.create_superuser("root", password="x")
    client = signed_in(root)
    atlas = cards(client.get(LANDING).content.decode())[site["atlas"].pk]
    expected = {"documents": 3, "failed": 1, "chunks": 3, "searches_day": 2, "searches_week": 3}
    expected["empty_rate"] = 1
    for key, count in expected.items():
        _, url = figure(atlas, key)
        page = client.get(url)
        assert page.status_code == 200, key
        assert page.context["cl"].result_count == count, key
    analytics = client.get(figure(atlas, "latency")[1])
    assert analytics.context["report"].collection == site["atlas"]
    run = client.get(figure(atlas, "ndcg")[1])
    assert run.status_code == 200 and run.context["original"].metrics["ndcg@10"] == 0.62


def test_the_card_shows_the_week_s_click_through_rate_beside_searches(site):
    """Of the week's searches with results from the page or the API, the share clicked;
    the fixture's searches came from Python (no click token): no rate, a dash."""
    root = get_user_model().objects.create_superuser("root", password="x")
    client = signed_in(root)
    atlas = site["atlas"]
    assert figure(cards(client.get(LANDING).content.decode())[atlas.pk], "ctr")[0] == "—"
    document = atlas.documents.get(external_id="a1")
    made = []
    for source, results in [("page", 1), ("api", 1), ("api", 1), ("page", 0)]:
        made.append(
            QueryTrace.objects.create(
                collection=atlas, query="q", pipeline="d", source=source, result_count=results
            )
        )
    SearchClick.objects.create(trace=made[0], document=document, position=1)
    card = cards(client.get(LANDING).content.decode())[atlas.pk]
    value, url = figure(card, "ctr")
    assert value == "33.3%"  # 1 of the 3 that found something
    assert client.get(url).context["report"].clicks.ctr == pytest.approx(1 / 3)


def test_the_index_s_outbox_and_the_last_run_show(site):
    atlas = site["atlas"]
    IndexOperation.objects.create(
        collection_id=atlas.pk, index="default", kind="write", last_error="engine refused"
    )
    run = IndexRun.objects.create(
        collection=atlas,
        task="reindex",
        status=IndexRun.Status.FAILED,
        documents_failed=1,
        errors=[{"document": "b", "error": "could not parse"}],
    )
    client = signed_in(get_user_model().objects.create_superuser("root", password="x"))
    card = cards(client.get(LANDING).content.decode())[atlas.pk]
    assert figure(card, "pending")[0] == "1" and figure(card, "last_error")[0] == "engine refused"
    page = reverse("admin:retrieval_indexrun_change", args=[run.pk])
    assert figure(card, "run") == ("Failed", page)
    assert figure(card, "run_errors")[0] == "1" and 'title="could not parse"' in card
    assert "the last index run failed" in card and "the index reports an error" in card


def test_staff_see_only_their_collections_and_their_own_searches(site, retrieval_settings):
    retrieval_settings(
        COLLECTION_ACCESS="tests.admin.test_dashboard.sees",
        DOCUMENT_ACCESS="tests.admin.test_dashboard.team_docs",
    )
    atlas = site["atlas"]
    # editor-atlas: all of Atlas, nothing else; may change it.
    writer = editor("editor-atlas", is_staff=True)
    body = signed_in(writer).get(LANDING).content.decode()
    assert set(cards(body)) == {atlas.pk} and "bestiary" not in body
    card = cards(body)[atlas.pk]
    assert figure(card, "documents")[0] == "3" and figure(card, "searches_week")[0] == "3"
    assert set(re.findall(r'data-action="(\w+)"', card)) == {"reindex", "rebuild", "evaluate"}
    # reader-atlas: Atlas's "a" documents only: those counts, own searches, no quality.
    reader = editor("reader-atlas", is_staff=True)
    retrieval_settings(COLLECTION_ACCESS=None)
    QueryTrace.objects.create(collection=atlas, query="mine", pipeline="x", user=reader)
    body = signed_in(reader).get(LANDING).content.decode()
    card = cards(body)[atlas.pk]
    assert figure(card, "documents")[0] == "2" and figure(card, "failed")[0] == "0"
    assert figure(card, "searches_day")[0] == "1"  # hers alone
    assert 'data-figure="ndcg"' not in card and "data-action" not in card
    assert "Search figures count your own searches" in body
    # A trace list behind her figure shows her trace only.
    traces = signed_in(reader).get(figure(card, "searches_day")[1])
    assert [t.query for t in traces.context["cl"].result_list] == ["mine"]


def test_view_only_staff_get_figures_without_actions(site):
    viewer = get_user_model().objects.create_user("viewer", password="x", is_staff=True)
    viewer.user_permissions.set(
        Permission.objects.filter(content_type__app_label="retrieval", codename__startswith="view_")
    )
    card = cards(signed_in(viewer).get(LANDING).content.decode())[site["atlas"].pk]
    assert figure(card, "documents")[0] == "3" and "data-action" not in card
    only_documents = get_user_model().objects.create_user("docs", password="x", is_staff=True)
    only_documents.user_permissions.set(Permission.objects.filter(codename="view_document"))
    card = cards(signed_in(only_documents).get(LANDING).content.decode())[site["atlas"].pk]
    assert figure(card, "documents")[0] == "3"
    assert "Searches" not in card and "Quality" not in card and "Last index run" not in card


def test_an_action_posted_from_the_dashboard_comes_back_to_it(site):
    client = signed_in(get_user_model().objects.create_superuser("root", password="x"))
    atlas = site["atlas"]
    data = {"action": "rebuild_indexes", "_selected_action": atlas.pk, "index": 0}
    back = client.post(reverse("admin:retrieval_collection_changelist"), {**data, "next": LANDING})
    assert back.status_code == 302 and back.url == LANDING
    assert IndexOperation.objects.filter(collection_id=atlas.pk, kind="rebuild").exists()
    elsewhere = {**data, "next": "https://elsewhere.example/"}
    stays = client.post(reverse("admin:retrieval_collection_changelist"), elsewhere)
    assert stays.url == reverse("admin:retrieval_collection_changelist")
    gold = EvalSet.objects.get(name="gold")
    evaluate = {"action": "evaluate_sets", "_selected_action": gold.pk}
    form = client.post(reverse("admin:retrieval_evalset_changelist"), {**evaluate, "index": 0})
    assert form.status_code == 200 and "pipeline" in form.context["form"].fields


def posted_fields(form: str) -> dict[str, str]:
    """The hidden fields and the submit button's value a form posts."""
    fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', form))
    return {**fields, **dict(re.findall(r'<button type="submit" name="(\w+)" value="(\w+)"', form))}


def test_reindex_from_the_dashboard_asks_then_keeps_the_graph(graph_settings, tmp_path):
    shelf, _ = get_or_create_collection("shelf")
    texts = {
        "notes.txt": "Ada_Lovelace wrote Notes.\n\nNotes describe Analytical_Engines.",
        "bio.txt": "Charles_Babbage designed Analytical_Engine.\n\nAda_Lovelace met Babbage.",
    }
    for name, text in texts.items():
        (tmp_path / name).write_text(text)
    ingest(shelf, [Source.from_path(tmp_path / name, external_id=name) for name in texts])
    extract_graph(shelf)
    graph = dict(Triple.objects.values_list("pk", "chunk__content"))
    assert len(graph) == 4
    (tmp_path / "bio.txt").write_text(texts["bio.txt"].replace("met", "admired"))
    graph_settings.seen.clear()
    client = signed_in(get_user_model().objects.create_superuser("root", password="x"))
    card = cards(client.get(LANDING).content.decode())[shelf.pk]
    url, form = re.search(
        r'<form method="post" action="([^"]+)"[^>]*data-action="reindex">(.*?)</form>', card, re.S
    ).groups()

    asked = client.post(url, posted_fields(form))
    page = asked.content.decode()
    said = " ".join(page.split())
    assert asked.status_code == 200 and "Knowledge graph (4 triples now)" in said
    assert "the triples of chunks whose text is unchanged are kept" in said
    assert dict(Triple.objects.values_list("pk", "chunk__content")) == graph  # nothing yet
    assert not IndexRun.objects.filter(task="reindex_collection").exists()

    confirm = re.search(r'<form method="post">(.*?)</form>', page, re.S).group(1)
    done = client.post(url, posted_fields(confirm))
    assert done.status_code == 302 and done.url == LANDING
    run = IndexRun.objects.get(task="reindex_collection")
    assert run.status == IndexRun.Status.SUCCEEDED and run.documents_indexed == 2
    changed = "Ada_Lovelace met Babbage."
    kept = {pk: text for pk, text in graph.items() if text != changed}
    after = dict(Triple.objects.values_list("pk", "chunk__content"))
    assert {pk: text for pk, text in after.items() if pk in graph} == kept  # the same rows
    assert graph_settings.seen == ["Ada_Lovelace admired Babbage."]  # only the changed text
    assert sorted(after.values()) == sorted([*kept.values(), "Ada_Lovelace admired Babbage."])


def test_many_collections_are_paged(keyword_settings):
    for n in range(30):
        Collection.objects.create(name=f"c{n:02d}", slug=f"c{n:02d}", embedder="x", dimensions=3)
    client = signed_in(get_user_model().objects.create_superuser("root", password="x"))
    first = client.get(LANDING).content.decode()
    assert len(cards(first)) == 24 and "page 1 of 2" in first
    second = client.get(LANDING, {"page": 2}).content.decode()
    assert len(cards(second)) == 6 and "c29" in second
