"""The red-team findings on writes, one test each (each failed before its fix)."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from django.contrib.auth.models import Permission
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from retrieval.exceptions import RetrievalError
from retrieval.models import Collection, Document, EvalSet
from retrieval.services.access import Scope
from retrieval.services.ingestion.collections import create_collection, get_or_create_collection
from tests.scope.faces import api, browser
from tests.scope.writes import API_FACES, atlas_target, attempt

pytestmark = pytest.mark.django_db


def test_a_key_names_the_collection_with_that_slug_before_one_with_that_name(keyword_settings):
    """Carol's collection named "b" (slug b-2) answered bob's lookups of "b" (his slug)."""
    bob = Collection.objects.create(name="B", slug="b", embedder="default", dimensions=8)
    Collection.objects.create(name="b", slug="b-2", embedder="default", dimensions=8)
    assert Scope.ALL.collection("b") == bob
    assert Scope.ALL.collection("B") == bob
    assert get_or_create_collection("b") == (bob, False)


def test_no_new_name_can_shadow_another_collections_slug(keyword_settings):
    bob, _ = get_or_create_collection("B")
    assert bob.slug == "b"
    with pytest.raises(RetrievalError, match="called or slugged 'b'"):
        create_collection(Collection(name="b", embedder="default"))
    other = create_collection(Collection(name="b x", embedder="default"))
    Collection.objects.filter(pk=other.pk).update(name="c")
    # A new collection's slug is never another's name either.
    assert create_collection(Collection(name="C!", embedder="default")).slug == "c-2"


def test_document_counts_show_only_what_the_user_may_read(write_world):
    """The collection's count said 2 to a user who may read 1 of its documents."""
    partial = api(write_world["partial"]).get("/api/collections/atlas/").json()
    writer = api(write_world["writer"]).get("/api/collections/atlas/").json()
    assert (partial["documents"], writer["documents"]) == (1, 2)
    listed = api(write_world["partial"]).get("/api/collections/").json()["results"]
    assert [c["documents"] for c in listed] == [1]


def test_creating_a_collection_tells_nothing_of_hidden_ones(write_world):
    """ "Atlas" answered "already exists" to a user who may not see it."""
    outsider = api(write_world["outsider"])
    hidden = outsider.post("/api/collections/", {"name": "Atlas"}, format="json")
    fresh = outsider.post("/api/collections/", {"name": "Nowhere"}, format="json")
    assert hidden.status_code == fresh.status_code == 403
    assert hidden.json() == fresh.json()
    assert not Collection.objects.filter(name="Nowhere").exists()
    renamed = api(write_world["fenced"]).patch("/api/collections/atlas/", {"name": "Bestiary"})
    assert renamed.status_code == 403 and "Bestiary" not in renamed.content.decode()
    made = api(write_world["writer"]).post("/api/collections/", {"name": "Nowhere"}, format="json")
    assert made.status_code == 201 and made.json()["slug"] == "nowhere"


def test_a_golden_set_named_like_a_hidden_one_is_a_set_of_its_own(write_world):
    """Importing "Atlas gold" into Bestiary named the hidden set's collection."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("queries.jsonl", json.dumps({"_id": "q1", "text": "north"}) + "\n")
        archive.writestr("qrels/test.tsv", "query-id\tcorpus-id\tscore\nq1\tbestiary-a\t1\n")
    bestiary = Collection.objects.get(name="Bestiary")
    data = {"name": "Atlas gold", "collection": bestiary.pk, "level": "documents"}
    data |= {"split": "test", "archive": SimpleUploadedFile("s.zip", buffer.getvalue())}
    response = browser(write_world["outsider"]).post(
        reverse("admin:retrieval_evalset_import"), data, follow=True
    )
    assert "Atlas" not in response.content.decode().replace("Atlas gold", "")
    assert EvalSet.objects.filter(name="Atlas gold").count() == 2
    assert EvalSet.objects.get(name="Atlas gold", collection=bestiary).queries.count() == 1


def test_a_server_path_is_shown_to_staff_only(write_world, django_user_model):
    document = Document.objects.get(external_id="atlas-a")
    Document.objects.filter(pk=document.pk).update(source_path="/srv/private/atlas-a.txt")
    reader = django_user_model.objects.create_user("plain")
    for user, shown in ((reader, False), (write_world["writer"], True)):
        detail = api(user).get(f"/api/documents/{document.pk}/").content.decode()
        listed = api(user).get("/api/documents/").content.decode()
        assert ("/srv/private" in detail, "/srv/private" in listed) == (shown, shown)


def test_may_write_each_answers_as_may_write_one_by_one(write_world):
    """The dashboard and the promotion form ask for many collections at once."""
    from retrieval.models import Promotion

    collections = list(Collection.objects.all())
    asks = [("change", Collection), ("add", Promotion), ("change", EvalSet), ("add", Document)]
    for username, user in write_world.items():
        scope = Scope.for_user(user)
        for action, model in asks:
            for whole in (True, False):
                one_by_one = {
                    c.pk for c in collections if scope.may_write(action, model, c, whole=whole)
                }
                many = scope.may_write_each(action, model, collections, whole=whole)
                assert many == one_by_one, (username, action, model.__name__, whole)
    assert Scope.ALL.may_write_each("change", Collection, []) == set()


def test_who_may_not_write_is_told_so_whatever_is_hidden_from_her(write_world, django_user_model):
    """A reader without write permissions from whom part of Atlas is hidden ("peeker") was
    told "You may not change collection 'atlas'." where a reader who sees all of it was told
    "You may not change collections.": which of her collections hold documents hidden from her."""
    peeker = django_user_model.objects.create_user("peeker", is_staff=True)
    peeker.user_permissions.set(Permission.objects.filter(codename__startswith="view_"))
    peeker = django_user_model.objects.get(pk=peeker.pk)
    target = atlas_target()
    faces = dict(API_FACES)
    # Index runs are hidden from whoever some documents are hidden from, whatever the
    # collection (Scope.restrict_runs): a 404 there says nothing of Atlas.
    del faces["api_cancel_run"], faces["api_retry_run"]
    for name, face in sorted(faces.items()):
        sees_all, _ = attempt(face, write_world["reader"], target)
        sees_part, _ = attempt(face, peeker, target)
        assert sees_part == sees_all, name
        assert 400 <= sees_all.status < 500, name
