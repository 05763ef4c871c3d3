"""The write matrix's world and faces: every way to change something, tried by every user.

Atlas holds two documents (teams a and b), Bestiary one; Atlas has a run queued and one
failed, a triple, an entity, a golden set with a query, a judgment and a run, a trace
a promotion, a synonym, a hidden result and a blocked suggestion. The users (hooks in
``tests.scope.access``), all staff but the anonymous one:

- ``reader``: sees all of Atlas, holds only the "view" permissions;
- ``outsider``: every permission, sees only Bestiary (Atlas is hidden);
- ``partial``: every permission, sees Atlas but only team a's document;
- ``fenced``: every permission, sees all of Atlas, ``COLLECTION_WRITE_ACCESS`` gives none;
- ``writer``: every permission, sees everything;
- ``root``: a superuser.

A face is ``(user, target) -> Answer``: it tries one write on ``target``, the real
Atlas rows (:func:`atlas_target`) or rows that do not exist (:data:`MISSING`).
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser, Permission
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import transaction
from django.db.models.fields.files import FieldFile
from django.urls import reverse

from retrieval.exceptions import AccessDenied, CollectionNotFound
from retrieval.models import (
    AnswerVote,
    BlockedSuggestion,
    Chunk,
    Collection,
    Document,
    Entity,
    EvalQuery,
    EvalRun,
    EvalSet,
    HiddenResult,
    IndexOperation,
    IndexRun,
    Judgment,
    Promotion,
    QueryTrace,
    SearchClick,
    Synonym,
    Triple,
)
from retrieval.services.access import Scope
from retrieval.services.ingestion.collections import get_or_create_collection, update_collection
from retrieval.services.ingestion.ingest import Source, ingest
from retrieval.services.quality import goldens
from retrieval.services.results.clicks import click_token
from tests.scope.faces import Answer, api, browser

USERS = ["anonymous", "reader", "outsider", "partial", "fenced", "writer", "root"]
#: Who may change Atlas's rows; every other user is refused and changes nothing.
MAY_CHANGE = {"writer", "root"}
#: Faces whose rule differs, and why.
MAY_CHANGE_BY_FACE = {
    # A vote needs only its result visible, not the whole collection.
    "api_feedback": {"writer", "root", "partial"},
    # A click on a result needs only the result visible, and no permission.
    "api_click": {"reader", "partial", "fenced", "writer", "root"},
    # A vote on an answer is its asker's alone (writer asked it), superusers' not either.
    "api_answer_vote": {"writer"},
}
#: Users from whom Atlas is hidden: each answer must equal the answer for a missing target.
HIDDEN = {"outsider"}


@dataclass(frozen=True)
class Target:
    slug: str
    collection: int
    document: int  # team a's, which every user who sees Atlas sees
    hidden_external_id: str  # team b's, hidden from "partial"
    chunk: int
    queued_run: int
    failed_run: int
    triple: int
    entity: int
    eval_set: int
    eval_query: int
    judgment: int
    eval_run: int
    trace: int
    promotion: int
    synonym: int
    hidden_result: int
    blocked_suggestion: int
    answer: int  # the trace of an answer writer asked for


NOWHERE = 999_999
MISSING = Target("nowhere", NOWHERE, NOWHERE, "ghost", *[NOWHERE] * 15)


@pytest.fixture
def write_world(keyword_settings, retrieval_settings) -> dict:
    """The users, by name, of a world where Atlas and Bestiary exist (see the module)."""
    retrieval_settings(
        COLLECTION_ACCESS="tests.scope.access.write_collections",
        DOCUMENT_ACCESS="tests.scope.access.write_documents",
        COLLECTION_WRITE_ACCESS="tests.scope.access.writable",
    )
    for name, docs in {"Atlas": {"a": "a", "b": "b"}, "Bestiary": {"a": "a"}}.items():
        collection, _ = get_or_create_collection(name)
        ingest(
            collection,
            [
                Source.from_text(
                    f"North is up in {name} {key}.",
                    external_id=f"{name.lower()}-{key}",
                    metadata={"team": team},
                )
                for key, team in docs.items()
            ],
        )
    atlas = Collection.objects.get(name="Atlas")
    chunk = Chunk.objects.get(document__external_id="atlas-a")
    IndexRun.objects.create(collection=atlas, task="ingest")
    IndexRun.objects.create(
        collection=atlas,
        task="ingest",
        status=IndexRun.Status.FAILED,
        errors=[{"document": "atlas-a", "error": "boom"}],
    )
    Triple.objects.create(
        collection=atlas, chunk=chunk, subject="North", predicate="is", object="up",
        subject_key="north", predicate_key="be", object_key="up",
    )  # fmt: skip
    Entity.objects.create(collection=atlas, key="north", display="North")
    eval_set = EvalSet.objects.create(name="Atlas gold", collection=atlas)
    goldens.judge(eval_set, "north", chunk, grade=1, status=Judgment.Status.CANDIDATE)
    EvalRun.objects.create(eval_set=eval_set, pipeline="default", status=EvalRun.Status.SUCCEEDED)
    QueryTrace.objects.create(
        query="north",
        collection=atlas,
        pipeline="default",
        results=[{"rank": 1, "chunk_id": chunk.pk, "document_id": chunk.document_id}],
    )
    Promotion.objects.create(collection=atlas, query="north*", document=chunk.document)
    Synonym.objects.create(collection=atlas, rule="north, boreal")
    HiddenResult.objects.create(collection=atlas, query="south*", document=chunk.document)
    BlockedSuggestion.objects.create(collection=atlas, query="*rude*")
    users: dict = {"anonymous": AnonymousUser()}
    model = get_user_model()
    for username in USERS[1:]:
        user = model.objects.create_user(username=username, password="x", is_staff=True)
        if username == "root":
            user.is_superuser = True
            user.save()
        grants = Permission.objects.filter(content_type__app_label="retrieval")
        if username == "reader":
            grants = grants.filter(codename__startswith="view_")
        user.user_permissions.set(grants)
        users[username] = model.objects.get(pk=user.pk)  # no stale permission cache
    QueryTrace.objects.create(
        query="north?",
        collection=atlas,
        pipeline="default",
        user=users["writer"],
        source=QueryTrace.Source.ANSWER,
        trace={"events": [{"stage": "answer", "abstained": False}]},
    )
    return users


def atlas_target() -> Target:
    atlas = Collection.objects.get(name="Atlas")
    judgment = Judgment.objects.get(query__eval_set__collection=atlas)
    return Target(
        slug=atlas.slug,
        collection=atlas.pk,
        document=Document.objects.get(external_id="atlas-a").pk,
        hidden_external_id="atlas-b",
        chunk=Chunk.objects.get(document__external_id="atlas-a").pk,
        queued_run=IndexRun.objects.get(collection=atlas, status=IndexRun.Status.QUEUED).pk,
        failed_run=IndexRun.objects.get(collection=atlas, status=IndexRun.Status.FAILED).pk,
        triple=Triple.objects.get(collection=atlas).pk,
        entity=Entity.objects.get(collection=atlas).pk,
        eval_set=judgment.query.eval_set_id,
        eval_query=judgment.query_id,
        judgment=judgment.pk,
        eval_run=EvalRun.objects.get(eval_set__collection=atlas).pk,
        trace=QueryTrace.objects.get(collection=atlas, source=QueryTrace.Source.PYTHON).pk,
        promotion=Promotion.objects.get(collection=atlas).pk,
        synonym=Synonym.objects.get(collection=atlas).pk,
        hidden_result=HiddenResult.objects.get(collection=atlas).pk,
        blocked_suggestion=BlockedSuggestion.objects.get(collection=atlas).pk,
        answer=QueryTrace.objects.get(collection=atlas, source=QueryTrace.Source.ANSWER).pk,
    )


#: What a write may touch: any difference after a face means it changed something.
STATE = {
    Collection: ["pk", "name", "slug", "description", "metadata", "default_retriever"],
    Document: ["pk", "external_id", "title", "content_hash", "status", "metadata", "updated_at"],
    Chunk: ["pk"],
    IndexRun: ["pk", "status"],
    Triple: ["pk"],
    Entity: ["pk"],
    EvalSet: ["pk", "name", "description", "level"],
    EvalQuery: ["pk", "text"],
    Judgment: ["pk", "grade", "status"],
    EvalRun: ["pk", "status"],
    QueryTrace: ["pk"],
    IndexOperation: ["pk"],
    Promotion: ["pk", "query", "document_id", "position", "active"],
    SearchClick: ["pk"],
    AnswerVote: ["pk", "helpful"],
    Synonym: ["pk", "collection_id", "rule", "active"],
    HiddenResult: ["pk", "query", "document_id", "active"],
    BlockedSuggestion: ["pk", "collection_id", "query"],
}


def fingerprint() -> list:
    return [list(model.objects.order_by("pk").values_list(*f)) for model, f in STATE.items()]


def attempt(face: Callable[..., Answer], user, target: Target) -> tuple[Answer, bool]:
    """Run a face; return its answer and whether it changed anything, then undo it."""
    with transaction.atomic():
        before = fingerprint()
        answer = face(user, target)
        changed = fingerprint() != before
        transaction.set_rollback(True)
    return answer, changed


def _api(response) -> Answer:
    return Answer(response.status_code, response.content.decode())


# The REST API.


def api_create_collection(user, t: Target) -> Answer:
    return _api(api(user).post("/api/collections/", {"name": "Newfound"}, format="json"))


def api_change_collection(user, t: Target) -> Answer:
    body = {"description": "changed"}
    return _api(api(user).patch(f"/api/collections/{t.slug}/", body, format="json"))


def api_rename_collection(user, t: Target) -> Answer:
    body = {"name": "Renamed"}
    return _api(api(user).patch(f"/api/collections/{t.slug}/", body, format="json"))


def api_change_collection_access(user, t: Target) -> Answer:
    """What the README's example hook decides by: the collection's ``metadata["team"]``."""
    body = {"metadata": {"team": "b"}}
    return _api(api(user).patch(f"/api/collections/{t.slug}/", body, format="json"))


def api_replace_collection(user, t: Target) -> Answer:
    body = {"name": "Atlas", "metadata": {"team": "b"}}
    return _api(api(user).put(f"/api/collections/{t.slug}/", body, format="json"))


def api_delete_collection(user, t: Target) -> Answer:
    return _api(api(user).delete(f"/api/collections/{t.slug}/"))


def api_add_document(user, t: Target) -> Answer:
    body = {"collection": t.slug, "external_id": "fresh", "text": "Fresh text."}
    return _api(api(user).post("/api/documents/", body, format="json"))


def api_replace_document(user, t: Target) -> Answer:
    body = {"collection": t.slug, "external_id": t.hidden_external_id, "text": "Overwritten."}
    return _api(api(user).post("/api/documents/", body, format="json"))


def api_delete_document(user, t: Target) -> Answer:
    return _api(api(user).delete(f"/api/documents/{t.document}/"))


def api_reindex_document(user, t: Target) -> Answer:
    return _api(api(user).post(f"/api/documents/{t.document}/reindex/"))


def api_cancel_run(user, t: Target) -> Answer:
    return _api(api(user).post(f"/api/index-runs/{t.queued_run}/cancel/"))


def api_retry_run(user, t: Target) -> Answer:
    return _api(api(user).post(f"/api/index-runs/{t.failed_run}/retry/"))


def api_feedback(user, t: Target) -> Answer:
    body = {"collection": t.slug, "query": "north", "chunk_id": t.chunk, "relevant": False}
    return _api(api(user).post("/api/feedback/", body, format="json"))


def api_answer_vote(user, t: Target) -> Answer:
    body = {"trace_id": t.answer, "helpful": False}
    return _api(api(user).post("/api/feedback/", body, format="json"))


def api_click(user, t: Target) -> Answer:
    """A click on Atlas's team-a document, the trace's one result, with the user's token."""
    body = {"token": click_token(t.trace, user), "document": t.document}
    return _api(api(user).post("/api/clicks/", body, format="json"))


def api_index_tool(user, t: Target) -> Answer:
    arguments = {"content": "Overwritten.", "document_id": t.hidden_external_id}
    body = {"collection": t.slug, "name": "index_document", "arguments": arguments}
    return _api(api(user).post("/api/tools/call/", body, format="json"))


API_FACES = {
    name: face
    for name, face in list(globals().items())
    if name.startswith("api_") and callable(face) and name != "api"
}


# The admin: pages that write, every delete, every action.


def _admin(user, url: str, data: dict) -> Answer:
    response = browser(user).post(url, data)
    return Answer(response.status_code, "")


def _change_data(url: str, edits: dict) -> dict:
    """The data a change form posts back unchanged (read as a superuser), with ``edits``."""
    root = browser(get_user_model().objects.get(username="root"))
    context = root.get(url).context
    if context is None or "adminform" not in context:
        return edits  # no such object: the form's data does not matter
    forms = [context["adminform"].form]
    data: dict = {}
    for inline in context["inline_admin_formsets"]:
        formset = inline.formset
        management = formset.management_form
        data |= {management.add_prefix(k): v for k, v in management.initial.items()}
        forms += formset.forms
    for form in forms:
        for name in form.fields:
            value = form[name].value()
            if value is not None and not isinstance(value, FieldFile):  # files: kept
                data[form.add_prefix(name)] = value
    return data | edits


def _change(model: str, pk_of: Callable[[Target], int], edits: dict) -> Callable[..., Answer]:
    def face(user, t: Target) -> Answer:
        url = reverse(f"admin:retrieval_{model}_change", args=[pk_of(t)])
        return _admin(user, url, _change_data(url, edits))

    return face


def admin_add_collection(user, t: Target) -> Answer:
    data = {"name": "Newfound", "slug": "newfound", "embedder": "default", "index": "default"}
    data |= {"metadata": "{}", "chunker": "", "default_retriever": "", "default_pipeline": ""}
    return _admin(user, reverse("admin:retrieval_collection_add"), data)


def admin_add_document(user, t: Target) -> Answer:
    """The upload page: a new file and one named like the hidden document."""
    files = [
        SimpleUploadedFile("fresh.txt", b"Fresh text.", "text/plain"),
        SimpleUploadedFile(t.hidden_external_id, b"Overwritten.", "text/plain"),
    ]
    data = {"collection": t.collection, "files": files}
    return _admin(user, reverse("admin:retrieval_document_add"), data)


def admin_add_evalset(user, t: Target) -> Answer:
    data = {"name": "Added", "collection": t.collection, "level": "documents"}
    return _admin(user, reverse("admin:retrieval_evalset_add"), data)


def admin_import_eval_set(user, t: Target) -> Answer:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("set/queries.jsonl", json.dumps({"_id": "q9", "text": "north"}) + "\n")
        archive.writestr("set/qrels/test.tsv", "query-id\tcorpus-id\tscore\nq9\tatlas-a\t1\n")
    upload = SimpleUploadedFile("set.zip", buffer.getvalue(), "application/zip")
    data = {"name": "Atlas gold", "collection": t.collection, "level": "documents"}
    data |= {"split": "test", "archive": upload}
    return _admin(user, reverse("admin:retrieval_evalset_import"), data)


def admin_add_evalquery(user, t: Target) -> Answer:
    data = {"eval_set": t.eval_set, "query_id": "q77", "text": "added"}
    data |= {"judgments-TOTAL_FORMS": 0, "judgments-INITIAL_FORMS": 0}
    return _admin(user, reverse("admin:retrieval_evalquery_add"), data)


def admin_add_judgment(user, t: Target) -> Answer:
    data = {"query": t.eval_query, "target": "atlas-b", "grade": 2, "status": "candidate"}
    data |= {"source": "admin"}
    return _admin(user, reverse("admin:retrieval_judgment_add"), data)


def admin_add_promotion(user, t: Target) -> Answer:
    data = {"collection": t.collection, "query": "pinned", "document": t.document}
    data |= {"position": 1, "active": "on", "note": ""}
    return _admin(user, reverse("admin:retrieval_promotion_add"), data)


def admin_add_synonym(user, t: Target) -> Answer:
    data = {"collection": t.collection, "rule": "south -> austral", "active": "on", "note": ""}
    return _admin(user, reverse("admin:retrieval_synonym_add"), data)


def admin_add_global_synonym(user, t: Target) -> Answer:
    """A synonym of every collection: only who sees and may change them all."""
    data = {"collection": "", "rule": "south -> austral", "active": "on", "note": ""}
    return _admin(user, reverse("admin:retrieval_synonym_add"), data)


def admin_add_hiddenresult(user, t: Target) -> Answer:
    data = {"collection": t.collection, "query": "hidden", "document": t.document}
    data |= {"active": "on", "note": ""}
    return _admin(user, reverse("admin:retrieval_hiddenresult_add"), data)


def admin_add_blockedsuggestion(user, t: Target) -> Answer:
    data = {"collection": t.collection, "query": "*blocked*", "note": ""}
    return _admin(user, reverse("admin:retrieval_blockedsuggestion_add"), data)


def admin_add_query_to_set(user, t: Target) -> Answer:
    """Search analytics' "add to a golden set"."""
    data = {"eval_set": t.eval_set, "query": "a query from the analytics"}
    url = reverse("admin:retrieval_evalset_add_query")
    return _admin(user, f"{url}?collection={t.collection}", data)


def admin_judge(user, t: Target) -> Answer:
    data = {"eval_set": t.eval_set, "chunk": t.chunk, "grade": 0, "query": "judged"}
    return _admin(user, reverse("admin:retrieval_judge"), data)


admin_change_collection = _change("collection", lambda t: t.collection, {"description": "x"})
admin_change_collection_access = _change(
    "collection", lambda t: t.collection, {"metadata": '{"team": "b"}'}
)
admin_change_document = _change("document", lambda t: t.document, {"title": "Changed"})
admin_change_evalset = _change("evalset", lambda t: t.eval_set, {"description": "changed"})
admin_change_evalquery = _change("evalquery", lambda t: t.eval_query, {"text": "changed"})
admin_change_judgment = _change("judgment", lambda t: t.judgment, {"grade": 3})
admin_change_promotion = _change("promotion", lambda t: t.promotion, {"query": "changed"})
admin_change_synonym = _change("synonym", lambda t: t.synonym, {"rule": "north -> top"})
admin_change_hiddenresult = _change("hiddenresult", lambda t: t.hidden_result, {"query": "x"})
admin_change_blockedsuggestion = _change(
    "blockedsuggestion", lambda t: t.blocked_suggestion, {"query": "changed"}
)

#: Each model's row of the target, for its delete page and its actions.
ROWS = {
    "collection": lambda t: t.collection,
    "document": lambda t: t.document,
    "chunk": lambda t: t.chunk,
    "triple": lambda t: t.triple,
    "entity": lambda t: t.entity,
    "indexrun": lambda t: t.failed_run,
    "querytrace": lambda t: t.trace,
    "evalset": lambda t: t.eval_set,
    "evalquery": lambda t: t.eval_query,
    "judgment": lambda t: t.judgment,
    "evalrun": lambda t: t.eval_run,
    "promotion": lambda t: t.promotion,
    "synonym": lambda t: t.synonym,
    "hiddenresult": lambda t: t.hidden_result,
    "blockedsuggestion": lambda t: t.blocked_suggestion,
}
#: What the actions' intermediate pages ask, answered at once.
ACTION_ANSWERS = {"apply": "1", "embedder": "default", "pipeline": "default", "top_k": "10"}
ACTION_ANSWERS |= {"confirm": "yes", "post": "yes"}


def _delete(model: str) -> Callable[..., Answer]:
    def face(user, t: Target) -> Answer:
        url = reverse(f"admin:retrieval_{model}_delete", args=[ROWS[model](t)])
        return _admin(user, url, {"post": "yes"})

    return face


#: Actions that change a row of another state than ``ROWS`` gives (a cancel: a queued run).
ACTION_ROWS = {("indexrun", "cancel_runs"): lambda t: t.queued_run}


def _action(model: str, action: str) -> Callable[..., Answer]:
    def face(user, t: Target) -> Answer:
        row = ACTION_ROWS.get((model, action), ROWS[model])(t)
        data = {"action": action, "_selected_action": [row], **ACTION_ANSWERS}
        return _admin(user, reverse(f"admin:retrieval_{model}_changelist"), data)

    return face


#: Actions that change nothing (a download, a redirect to a page).
READ_ACTIONS = {("evalset", "export_sets"), ("evalrun", "compare_runs")}
#: Actions a screen does not offer though Django's site does.
NOT_OFFERED = {
    ("document", "delete_selected"),
    ("searchclick", "delete_selected"),  # read-only: clicks go with their search
}


def admin_actions() -> set[tuple[str, str]]:
    """Every (model, action) of the app's admin screens: a new action joins by existing."""
    found = set()
    for model, model_admin in admin.site._registry.items():
        if model._meta.app_label == "retrieval":
            # Django 6.1 gives Action objects, 5.2 (func, name, description) tuples.
            names = {getattr(a, "name", None) or a[1] for a in model_admin._get_base_actions()}
            found |= {(model._meta.model_name, name) for name in names}
    return found - NOT_OFFERED


ADMIN_FACES: dict[str, Callable[..., Answer]] = {
    name: face
    for name, face in list(globals().items())
    if name.startswith(("admin_add_", "admin_change_")) and callable(face)
}
ADMIN_FACES |= {
    "admin_import_eval_set": admin_import_eval_set,
    "admin_judge": admin_judge,
    **{f"admin_delete_{model}": _delete(model) for model in ROWS},
    **{
        f"admin_action_{model}_{action}": _action(model, action)
        for model, action in sorted(admin_actions() - READ_ACTIONS)
    },
}


# Python: the service a site's own code calls.


def python_change_collection_access(user, t: Target) -> Answer:
    try:
        collection = Scope.for_user(user).collection(t.slug)
        update_collection(collection, {"metadata": {"team": "b"}}, user=user)
    except CollectionNotFound as e:
        return Answer(404, str(e))
    except AccessDenied as e:
        return Answer(403, str(e))
    return Answer(200, "")


PYTHON_FACES = {"python_change_collection_access": python_change_collection_access}

WRITE_FACES = {**API_FACES, **ADMIN_FACES, **PYTHON_FACES}
