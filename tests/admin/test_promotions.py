"""Promotions in the admin: pinning documents, within the access policy."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from retrieval.models import Document, Promotion
from tests.conftest import collection_of, editor

pytestmark = pytest.mark.django_db

ADD = "/admin/retrieval/promotion/add/"


@pytest.fixture
def two(keyword_settings):
    return (
        collection_of("atlas", {"a1": "north is up", "b1": "south is down"}),
        collection_of("bestiary", {"a-wolf": "the wolf"}),
    )


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def data(collection, document, **more):
    return {"collection": collection.pk, "document": document.pk, "query": "north*"} | {
        "position": 1,
        "active": "on",
        **more,
    }


def test_a_promotion_pins_a_document_of_its_own_collection(two):
    atlas, bestiary = two
    client = signed_in(get_user_model().objects.create_superuser("root", password="x"))
    wolf = Document.objects.get(external_id="a-wolf")
    refused = client.post(ADD, data(atlas, wolf))
    assert refused.status_code == 200
    assert "is not a document of atlas" in str(refused.context["adminform"].form.errors)
    stars = client.post(ADD, data(atlas, Document.objects.get(external_id="a1"), query=" * "))
    assert "not only" in str(stars.context["adminform"].form.errors)
    saved = client.post(
        ADD, data(atlas, Document.objects.get(external_id="a1"), query="  North   pole* ")
    )
    assert saved.status_code == 302
    promotion = Promotion.objects.get()
    assert promotion.query == "North pole*" and promotion.pattern == "north pole%"
    listed = client.get(reverse("admin:retrieval_promotion_changelist")).content.decode()
    assert "query=North+pole" in listed  # "try it" opens the playground with the words


def test_staff_who_do_not_see_all_of_a_collection_may_not_promote_in_it(two, retrieval_settings):
    atlas, bestiary = two
    retrieval_settings(DOCUMENT_ACCESS="tests.admin.test_dashboard.team_docs")
    for external_id in ("a1", "b1"):
        Promotion.objects.create(
            collection=atlas, query="north", document=Document.objects.get(external_id=external_id)
        )
    reader = editor("reader-a", is_staff=True)
    client = signed_in(reader)
    # She sees all of Bestiary (its one document), only part of Atlas: she may promote in
    # Bestiary alone.
    form = client.get(ADD).context["adminform"].form
    assert list(form.fields["collection"].queryset) == [bestiary]
    a1 = Document.objects.get(external_id="a1")
    assert client.post(ADD, data(atlas, a1, query="new")).status_code == 200  # form error
    assert not Promotion.objects.filter(query="new").exists()
    listed = client.get(reverse("admin:retrieval_promotion_changelist"))
    assert [p.document.external_id for p in listed.context["cl"].result_list] == ["a1"]
    hidden = Promotion.objects.get(document__external_id="b1")
    page = client.get(reverse("admin:retrieval_promotion_change", args=[hidden.pk]))
    assert page.status_code == 302  # Django's "does not exist": back to the admin index
    shown = Promotion.objects.get(document__external_id="a1")
    post = client.post(
        reverse("admin:retrieval_promotion_change", args=[shown.pk]),
        data(atlas, shown.document, query="changed"),
    )
    assert post.status_code == 403
    assert Promotion.objects.get(pk=shown.pk).query == "north"
