"""Golden sets built from the playground, evaluated and compared in the admin; trace pages."""

from __future__ import annotations

import io
import json
import zipfile
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from retrieval.models import Chunk, EvalQuery, EvalRun, EvalSet, Judgment, QueryTrace
from retrieval.services.access import Scope
from retrieval.services.query.search import search as scoped_search
from tests.conftest import collection_of


def search(query: str, **options):
    return scoped_search(query, scope=Scope.ALL, **options)


pytestmark = pytest.mark.django_db

TEXTS = {
    "river": "the river runs north",
    "sun": "the sun rises east",
    "hill": "up the hill",
    "mix": "north east up",
}
PLAYGROUND = "admin:retrieval_playground"


@pytest.fixture
def atlas(keyword_settings, retrieval_settings):
    retrieval_settings(
        PIPELINES={
            "lexical": {"retrievers": {"bm25": 1.0}},
            "semantic": {"retrievers": {"dense": 1.0}},
            "both": {"retrievers": {"bm25": 1.0, "dense": 1.0}},
        }
    )
    return collection_of("atlas", TEXTS)


def messages_of(response) -> list[str]:
    return [str(m) for m in response.context["messages"]] if response.context else []


def judge_from_playground(client, atlas, eval_set, query: str, document: str, grade: int):
    """Search in the playground, then press a result's judge button as the page has it."""
    page = client.get(
        reverse(PLAYGROUND),
        {"collection": atlas.pk, "query": query, "left": "bm25", "right": "dense", "top_k": 4},
    )
    body = page.content.decode()
    assert 'action="/admin/retrieval/evalset/judge/"' in body
    chunk = Chunk.objects.get(document__external_id=document)
    assert f'name="chunk" value="{chunk.pk}"' in body
    answer = client.post(
        reverse("admin:retrieval_judge"),
        {
            "eval_set": eval_set.pk,
            "query": query,
            "chunk": chunk.pk,
            "grade": grade,
            "next": page.wsgi_request.get_full_path(),
        },
        follow=True,
    )
    assert answer.status_code == 200
    return answer


def test_a_set_judged_in_the_playground_evaluates_like_its_beir_export(
    admin_client, atlas, tmp_path
):
    eval_set = EvalSet.objects.create(name="gold", collection=atlas)
    answer = judge_from_playground(admin_client, atlas, eval_set, "hill", "hill", 2)
    assert "gold: hill is relevant for 'hill'." in messages_of(answer)
    assert "gold: relevant (2)" in answer.content.decode()  # the page shows the verdict
    judge_from_playground(admin_client, atlas, eval_set, "hill", "mix", 0)
    judge_from_playground(admin_client, atlas, eval_set, "river north", "river", 1)
    assert Judgment.objects.filter(query__eval_set=eval_set, source="admin").count() == 3

    changelist = reverse("admin:retrieval_evalset_changelist")
    asked = admin_client.post(
        changelist, {"action": "evaluate_sets", "_selected_action": [eval_set.pk]}
    )
    assert b'name="pipeline"' in asked.content
    for pipeline in ("lexical", "semantic"):
        done = admin_client.post(
            changelist,
            {
                "action": "evaluate_sets",
                "_selected_action": [eval_set.pk],
                "apply": "1",
                "pipeline": pipeline,
                "top_k": 100,
            },
            follow=True,
        )
        assert any("succeeded" in m for m in messages_of(done)), messages_of(done)
    lexical, semantic = EvalRun.objects.order_by("created_at")

    export = admin_client.post(
        changelist, {"action": "export_sets", "_selected_action": [eval_set.pk]}
    )
    assert export["Content-Type"] == "application/zip"
    zipfile.ZipFile(io.BytesIO(export.content)).extractall(tmp_path)
    for run in (lexical, semantic):
        out = StringIO()
        call_command(
            "retrieval_evaluate",
            "--dataset",
            str(tmp_path / "gold"),
            "--collection",
            "atlas",
            "--pipeline",
            run.pipeline,
            "--json",
            stdout=out,
            stderr=StringIO(),
        )
        report = json.loads(out.getvalue())
        for name in ("ndcg@10", "recall@100", "mrr@10", "map@100"):
            assert report[name] == pytest.approx(run.metrics[name]), (run.pipeline, name)

    compared = admin_client.get(
        reverse("admin:retrieval_evalrun_compare"), {"first": lexical.pk, "second": semantic.pk}
    )
    comparison = compared.context["comparison"]
    assert comparison["losses"] == 1 and comparison["wins"] + comparison["ties"] == 1
    assert 'class="retrieval-loss" data-query="q1"' in compared.content.decode()
    via_action = admin_client.post(
        reverse("admin:retrieval_evalrun_changelist"),
        {"action": "compare_runs", "_selected_action": [lexical.pk, semantic.pk]},
    )
    assert via_action.url.endswith(f"?first={lexical.pk}&second={semantic.pk}")

    detail = admin_client.get(reverse("admin:retrieval_evalrun_change", args=[semantic.pk]))
    text = detail.content.decode()
    assert '<table class="retrieval-queries">' in text and "<td>q1</td><td>hill</td>" in text
    ndcg = semantic.per_query["q1"]["metrics"]["ndcg@10"]
    assert f"<td>{ndcg:.4f}</td>" in text

    history = admin_client.get(reverse("admin:retrieval_evalset_change", args=[eval_set.pk]))
    body = history.content.decode()
    assert body.count('data-metric="ndcg@10"') == 1 and f"#{semantic.pk} semantic: ndcg@10" in body


def test_bad_judgments_and_comparisons_are_messages(admin_client, atlas):
    eval_set = EvalSet.objects.create(name="gold", collection=atlas)
    other = collection_of("other", {"x": "north"})
    foreign = Chunk.objects.get(collection=other)
    judge = reverse("admin:retrieval_judge")
    bad = admin_client.post(
        judge, {"eval_set": eval_set.pk, "query": "x", "chunk": foreign.pk, "grade": 1}, follow=True
    )
    assert any(
        "is not in collection atlas, which eval set 'gold' judges" in m for m in messages_of(bad)
    )
    junk = admin_client.post(judge, {"eval_set": "nope", "grade": 1}, follow=True)
    assert "Judge a result with an existing set, chunk and grade." in messages_of(junk)
    assert admin_client.get(judge).status_code == 405
    assert not Judgment.objects.exists()
    missing = admin_client.get(
        reverse("admin:retrieval_evalrun_compare"), {"first": 1}, follow=True
    )
    assert "Choose two existing runs to compare." in messages_of(missing)


def test_importing_a_beir_zip_creates_the_set(admin_client, atlas):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("set/queries.jsonl", '{"_id": "a", "text": "hill"}\n')
        archive.writestr("set/qrels/test.tsv", "query-id\tcorpus-id\tscore\na\thill\t1\n")
    buffer.seek(0)
    buffer.name = "set.zip"
    url = reverse("admin:retrieval_evalset_import")
    form = {"name": "imported", "collection": atlas.pk, "level": "documents", "split": "test"}
    done = admin_client.post(url, {**form, "archive": buffer}, follow=True)
    assert "imported: 1 queries." in messages_of(done)
    assert Judgment.objects.get(query__eval_set__name="imported").target == "hill"
    broken = io.BytesIO(b"not a zip")
    broken.name = "x.zip"
    again = admin_client.post(url, {**form, "archive": broken})
    assert again.status_code == 200 and "File is not a zip file" in again.content.decode()


def test_imported_reference_answers_show_and_are_edited_in_the_admin(admin_client, atlas):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(
            "set/queries.jsonl",
            '{"_id": "a", "text": "hill", "answer": "Up the hill."}\n'
            '{"_id": "b", "text": "where is the sea", "answerable": false}\n',
        )
        archive.writestr("set/qrels/test.tsv", "query-id\tcorpus-id\tscore\na\thill\t1\n")
    buffer.seek(0)
    buffer.name = "set.zip"
    form = {"name": "answers", "collection": atlas.pk, "level": "documents", "split": "test"}
    done = admin_client.post(
        reverse("admin:retrieval_evalset_import"), {**form, "archive": buffer}, follow=True
    )
    assert "answers: 2 queries." in messages_of(done)
    changelist = reverse("admin:retrieval_evalquery_changelist")
    unanswerable = admin_client.get(changelist, {"answerable__exact": "0"})
    assert [q.query_id for q in unanswerable.context["cl"].result_list] == ["b"]
    hill = EvalQuery.objects.get(query_id="a")
    page = admin_client.get(reverse("admin:retrieval_evalquery_change", args=[hill.pk]))
    assert "Up the hill." in page.content.decode()
    edited = admin_client.post(
        reverse("admin:retrieval_evalquery_change", args=[hill.pk]),
        {
            "eval_set": hill.eval_set_id,
            "query_id": "a",
            "text": "hill",
            "reference_answer": "At the top of the hill.",
            "judgments-TOTAL_FORMS": "0",
            "judgments-INITIAL_FORMS": "0",
        },
    )
    assert edited.status_code == 302
    hill.refresh_from_db()
    assert hill.reference_answer == "At the top of the hill." and not hill.answerable


def test_trace_list_filters_and_the_page_explaining_a_ranking(
    admin_client, atlas, retrieval_settings
):
    retrieval_settings(TRACE_SAMPLE_RATE=1, TRACE_SLOW_MS=10_000)
    search("north hill", collection=atlas, pipeline="both", top_k=1)
    search("zebra", collection=atlas, pipeline="lexical")
    traced, empty = QueryTrace.objects.order_by("created_at")
    changelist = reverse("admin:retrieval_querytrace_changelist")
    listed = admin_client.get(changelist, {"empty": "yes"})
    assert list(listed.context["cl"].result_list) == [empty]
    assert not list(admin_client.get(changelist, {"slow": "yes"}).context["cl"].result_list)
    QueryTrace.objects.filter(pk=traced.pk).update(ms=20_000)
    assert list(admin_client.get(changelist, {"slow": "yes"}).context["cl"].result_list) == [traced]
    assert list(
        admin_client.get(changelist, {"pipeline": "lexical"}).context["cl"].result_list
    ) == [empty]

    page = admin_client.get(reverse("admin:retrieval_querytrace_change", args=[traced.pk]))
    explained = page.context["explained"]
    assert explained["legs"] == ["bm25", "dense"]
    (row,) = explained["rows"]
    assert row["legs"][0]["rank"] is not None and row["legs"][1]["rank"] is not None
    missed = {item["chunk"].document.external_id: item for item in explained["missed"]}
    assert set(missed) == set(TEXTS) - {row["document"]}
    assert missed["sun"]["legs"][0]["rank"] is None  # BM25 never found "sun" for this query
    body = page.content.decode()
    assert f'action="{reverse(PLAYGROUND)}"' in body and 'value="pipeline:both"' in body
    assert '<option value="pipeline:lexical">' in body and "Candidates not returned" in body
    (stage,) = explained["stages"]
    assert stage["stage"] == "pipeline" and "leg_ms: bm25 " in stage["details"]
    assert "queries: north hill" in stage["details"] and "candidates" not in stage["details"]


def test_the_trace_page_shows_which_result_the_document_floor_lifted(
    admin_client, keyword_settings, retrieval_settings
):
    from tests.services.retrievers.test_hybrid import PAGES

    retrieval_settings(CHUNK_CONTEXT=None, TRACE_SAMPLE_RATE=1, TRACE_SLOW_MS=10_000)
    pages = collection_of("pages", PAGES)
    found = search("needle north", collection=pages, top_k=6)
    (lifted,) = [r for r in found if "own_score" in r.metadata]
    trace = QueryTrace.objects.get()
    page = admin_client.get(reverse("admin:retrieval_querytrace_change", args=[trace.pk]))
    (row,) = [row for row in page.context["explained"]["rows"] if "own_score" in row]
    assert row["chunk_id"] == lifted.chunk.pk
    assert row["own_score"] == pytest.approx(lifted.metadata["own_score"])
    assert row["raw_score"] == pytest.approx(lifted.metadata["raw_score"])
    body = page.content.decode()
    assert body.count('class="retrieval-floor"') == 1
    assert f"document floor: sum {row['raw_score']:.4f}, its own {row['own_score']:.4f}" in body


def test_the_runs_list_reloads_while_a_run_is_active(admin_client, atlas):
    eval_set = EvalSet.objects.create(name="gold", collection=atlas)
    url = reverse("admin:retrieval_evalrun_changelist")
    run = EvalRun.objects.create(eval_set=eval_set, pipeline="lexical", queries_total=4)
    EvalRun.objects.filter(pk=run.pk).update(status="running", queries_done=1)
    body = admin_client.get(url).content.decode()
    assert '<meta http-equiv="refresh" content="3">' in body
    assert '<progress max="4" value="1"></progress> 1 / 4' in body
    EvalRun.objects.filter(pk=run.pk).update(status="succeeded")
    assert 'http-equiv="refresh"' not in admin_client.get(url).content.decode()
