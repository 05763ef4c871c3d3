"""The results page: documents with their passages, snippets, links, pages, facets and JSON."""

from __future__ import annotations

import pytest
from django.db.models import Q

from retrieval.models import Collection, Document
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.ingest import Source, ingest
from retrieval.services.results.page import host_url
from retrieval.services.results.snippets import snippet
from retrieval.services.sparse.analyzer import Analyzer

pytestmark = pytest.mark.django_db

BIRDS_MD = b"""# Birds

## Penguins

Penguins live in Antarctica all year.

Emperor penguins huddle against the wind.
"""


def team_a_only(user) -> Q | None:
    """DOCUMENT_ACCESS for these tests: superusers see all, others team a's documents."""
    return None if user.is_superuser else Q(metadata__team="a")


@pytest.fixture
def library(keyword_settings, retrieval_settings, client, django_user_model):
    retrieval_settings(
        TRACE_SAMPLE_RATE=1,
        SEARCH_PAGE_FACETS=["team", "tags"],
        DOCUMENT_ACCESS="tests.test_results_page.team_a_only",
    )
    collection = get_or_create_collection("atlas")[0]
    run = ingest(
        collection,
        [
            Source(
                external_id="birds.md",
                data=BIRDS_MD,
                filename="birds.md",
                mime_type="text/markdown",
                metadata={"team": "a", "tags": ["cold", "birds"]},
            ),
            Source.from_text(
                "Leopard seals hunt penguins under the ice.",
                external_id="seals.txt",
                metadata={"team": "a", "tags": ["cold"], "url": "https://example.org/seals"},
            ),
            Source.from_text(
                "Penguins <script>alert(1)</script> & skuas share the shore.",
                external_id="skuas.txt",
                metadata={"team": "a", "url": "javascript:alert(1)"},
            ),
            Source.from_text(
                "Secret penguins of team b nest here.",
                external_id="secret.txt",
                metadata={"team": "b", "tags": ["cold", "hidden-tag"]},
            ),
            Source.from_text("Volcanoes erupt molten rock.", external_id="volcano.txt"),
        ],
    )
    assert run.status == "succeeded", run.errors
    Collection.objects.update(default_retriever="bm25")  # ranks worked out by hand
    client.force_login(django_user_model.objects.create_user(username="reader"))
    return client


def page(client, **params):
    response = client.get("/", {"collection": "atlas", "format": "json", **params})
    return response.status_code, response.json()


def test_results_are_grouped_by_document_best_passage_first(library):
    status, body = page(library, q="penguins")
    assert status == 200
    groups = body["results"]
    assert [g["document"] for g in groups] == ["birds.md", "seals.txt", "skuas.txt"]
    assert [g["position"] for g in groups] == [1, 2, 3]
    birds = groups[0]
    # All its passages on penguins (the headings count: each chunk is indexed with
    # them), the best one leading, the others folded under it in rank order.
    passages = [birds["best"], *birds["more"]]
    assert [p["snippet"]["text"] for p in passages] == [
        "Birds Penguins Penguins live in Antarctica",
        "Emperor penguins huddle against the wind.",
        "all year.",
    ]
    assert [p["rank"] for p in passages] == sorted(p["rank"] for p in passages)
    assert all(p["heading_path"] == ["Birds", "Penguins"] for p in passages)
    assert "<mark>penguins</mark>" in birds["more"][0]["snippet"]["html"].lower()
    # The app's document page, at the passage; a host page as it is; no javascript: link.
    pk = Document.objects.get(external_id="birds.md").pk
    assert birds["url"] == f"/documents/{pk}/"
    assert birds["best"]["url"].startswith(f"/documents/{pk}/#chunk-")
    assert groups[1]["url"] == "https://example.org/seals"
    skuas = Document.objects.get(external_id="skuas.txt").pk
    assert groups[2]["url"] == f"/documents/{skuas}/"


def test_the_page_marks_the_query_words_and_escapes_the_text(library):
    response = library.get("/", {"collection": "atlas", "q": "penguins"})
    text = response.content.decode()
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in text
    assert "<mark>Penguins</mark> &lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "<script>alert(1)" not in text
    assert "<li>Birds</li><li>Penguins</li>" in text  # the heading path as a breadcrumb
    assert "2 more passages in this document" in text
    assert "javascript:" not in text
    assert "{% block answer_box %}" not in text  # the reserved block renders nothing


def test_pages_of_documents_with_links_between_them(library, retrieval_settings):
    retrieval_settings(SEARCH_PAGE_SIZE=2)
    status, first = page(library, q="penguins")
    assert [g["document"] for g in first["results"]] == ["birds.md", "seals.txt"]
    assert first["previous"] is None and "page=2" in first["next"]
    status, second = page(library, q="penguins", page=2)
    assert [(g["document"], g["position"]) for g in second["results"]] == [("skuas.txt", 3)]
    assert "page=1" in second["previous"] and second["next"] is None
    for bad in ("0", "abc", "21", "-1"):
        status, body = page(library, q="penguins", page=bad)
        assert status == 400 and "page" in body["error"], bad


def test_facet_counts_leave_hidden_documents_out(library):
    status, body = page(library, q="penguins")
    facets = {f["key"]: {v["value"]: v["count"] for v in f["values"]} for f in body["facets"]}
    # secret.txt (team b) is hidden from the reader: neither its team nor its tag counts.
    assert facets == {"team": {"a": 3}, "tags": {"cold": 2, "birds": 1}}
    assert "hidden-tag" not in str(body) and "secret" not in str(body)


def test_choosing_facet_values_filters_the_results(library):
    status, body = page(library, q="penguins", facet="tags:cold")  # a value held in lists
    assert status == 200
    assert [g["document"] for g in body["results"]] == ["birds.md", "seals.txt"]
    team = {f["key"]: f for f in body["facets"]}["team"]
    assert team["values"] == [{"value": "a", "count": 2}]  # counted within tags=cold
    status, body = page(library, q="penguins", facet=["tags:cold", "team:b"])
    assert body["results"] == []  # team b is hidden: nothing, as for a value nobody has
    status, body = page(library, q="penguins", facet="colour:red")
    assert status == 400 and "No facet 'colour'" in body["error"]


def test_a_facet_link_toggles_its_value(library):
    response = library.get("/", {"collection": "atlas", "q": "penguins"})
    text = response.content.decode()
    assert 'href="/?collection=atlas&amp;q=penguins&amp;facet=tags%3Acold"' in text
    response = library.get("/", {"collection": "atlas", "q": "penguins", "facet": "tags:cold"})
    assert 'href="/?collection=atlas&amp;q=penguins" aria-current="true"' in (
        response.content.decode()
    )


def test_a_hidden_collection_answers_as_a_missing_one(library, retrieval_settings):
    retrieval_settings(COLLECTION_ACCESS="tests.test_results_page.no_collection")
    _, hidden = page(library, q="penguins")
    _, missing = page(library, q="penguins", collection="nowhere")
    assert hidden["error"].replace("atlas", "nowhere") == missing["error"]
    assert {**hidden, "collection": "", "error": ""} == {**missing, "collection": "", "error": ""}


def no_collection(user):
    return Collection.objects.none()


def test_the_document_page_shows_the_text_with_an_anchor_per_chunk(library):
    document = Document.objects.get(external_id="birds.md")
    response = library.get(f"/documents/{document.pk}/")
    assert response.status_code == 200
    text = response.content.decode()
    assert "Emperor penguins huddle against the wind." in text
    for index in document.chunks.values_list("index", flat=True):
        assert f'id="chunk-{index}"' in text


def test_a_hidden_document_is_a_404_like_a_missing_one(library):
    hidden = Document.objects.get(external_id="secret.txt").pk
    missing = Document.objects.order_by("-pk").first().pk + 1000
    answers = [library.get(f"/documents/{pk}/") for pk in (hidden, missing)]
    assert [a.status_code for a in answers] == [404, 404]
    assert answers[0].content == answers[1].content


def test_visitors_who_are_not_signed_in_are_sent_to_sign_in(library, client):
    document = Document.objects.get(external_id="birds.md")
    client.logout()
    assert client.get(f"/documents/{document.pk}/").status_code == 302
    response = client.get("/", {"q": "penguins", "format": "json"})
    assert response.status_code == 403 and "Sign in" in response.json()["detail"]


@pytest.mark.parametrize(
    ("url", "kept"),
    [
        ("https://example.org/a", True),
        ("/blog/penguins/", True),
        ("javascript:alert(1)", False),
        (" javascript:alert(1)", False),
        ("//evil.example/x", False),
        ("/\\evil.example", False),
        ("data:text/html,x", False),
        ("ftp://example.org/a", False),
        (42, False),
    ],
)
def test_only_web_links_of_the_host_are_followed(url, kept):
    assert (host_url({"url": url}) == url) is kept


def test_a_snippet_is_the_passage_with_the_most_query_words():
    analyzer = Analyzer()
    filler = "Lorem ipsum dolor sit amet. " * 20
    text = f"{filler}One penguin here. {filler}Penguins of Antarctica & <b>more</b>. {filler}"
    found = snippet(text, frozenset(analyzer.terms("penguins antarctica")), analyzer.terms)
    assert found.cut_start and found.cut_end
    assert "<mark>Penguins</mark> of <mark>Antarctica</mark> &amp; &lt;b&gt;more" in found.html
    assert found.html.startswith("…") and found.html.endswith("…")
    plain = snippet("Volcanoes erupt.", frozenset(analyzer.terms("penguins")), analyzer.terms)
    assert (plain.text, plain.marks, str(plain.html)) == (
        "Volcanoes erupt.",
        (),
        "Volcanoes erupt.",
    )


def test_readers_who_may_judge_get_a_vote_on_each_result(library, client):
    from retrieval.models import Judgment
    from tests.conftest import editor

    status, body = page(library, q="penguins")
    assert body["vote"] is None  # a reader without retrieval.add_judgment
    assert 'class="retrieval-vote"' not in library.get("/", {"q": "penguins"}).content.decode()
    client.force_login(editor())
    response = client.get("/", {"collection": "atlas", "q": "penguins"})
    text = response.content.decode()
    assert text.count('class="retrieval-vote"') == 3
    best = response.context["results"][0].best.chunk
    assert f'name="chunk_id" value="{best.pk}"' in text
    # Without JavaScript the form posts itself to the feedback endpoint.
    vote = response.context["vote"]
    form = {"collection": vote["collection"], "query": "penguins", "chunk_id": best.pk}
    answer = client.post(vote["url"], {**form, "relevant": "true"})
    assert answer.status_code == 202
    judgment = Judgment.objects.get()
    assert (judgment.status, judgment.grade, judgment.query.text) == (
        Judgment.Status.CANDIDATE,
        1,
        "penguins",
    )


def test_an_answer_is_offered_and_cites_only_what_the_reader_sees(library):
    offered = library.get("/", {"collection": "atlas", "q": "Where do penguins live?"})
    body = offered.content.decode()
    assert 'class="retrieval-ask"' in body and "answer=1" in body
    status, answered = page(library, q="Where do penguins live?", answer="1")
    assert status == 200
    answer = answered["answer"]
    assert answer["mode"] == "extractive" and not answer["abstained"]
    assert "Antarctica" in answer["text"] and "[1]" in answer["text"]
    titles = {source["title"] for source in answer["sources"]}
    assert titles and all("secret" not in title for title in titles)
    assert "team b" not in answer["text"]  # the hidden document never reaches the answer
    html = library.get(
        "/", {"collection": "atlas", "q": "Where do penguins live?", "answer": "1"}
    ).content.decode()
    assert 'href="#retrieval-source-1"' in html and 'id="retrieval-source-1"' in html
    birds = Document.objects.get(external_id="birds.md")
    assert f'href="/documents/{birds.pk}/#chunk-' in html  # the cited passage, on its page


def test_the_page_offers_no_answer_when_the_site_says_so(library, retrieval_settings):
    retrieval_settings(SEARCH_PAGE_ANSWERS=False)
    body = library.get("/", {"collection": "atlas", "q": "penguins", "answer": "1"}).content
    assert b"retrieval-answer" not in body
    assert page(library, q="penguins", answer="1")[1]["answer"] is None
