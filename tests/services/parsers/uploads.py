"""One file sent through the faces a person uploads with: the API and the admin's upload form."""

from __future__ import annotations

from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from retrieval.services.ingestion.collections import get_or_create_collection
from tests.conftest import editor


def api_client(collection: str) -> APIClient:
    """An API client signed in as an editor, and the collection ``collection`` created."""
    client = APIClient()
    client.force_authenticate(editor("reader"))
    get_or_create_collection(collection)
    return client


def post_to_api(client: APIClient, collection: str, name: str, data: bytes, kind: str):
    """Return the API's answer to uploading ``data`` as ``name`` into ``collection`` (a slug)."""
    upload = SimpleUploadedFile(name, data, kind)
    return client.post("/api/documents/", {"collection": collection, "file": upload})


def post_to_admin(client: Client, collection: str, name: str, data: bytes, kind: str):
    """Return the admin's answer to uploading ``data`` as ``name``, redirects followed."""
    target, _ = get_or_create_collection(collection)
    upload = SimpleUploadedFile(name, data, kind)
    return client.post(
        reverse("admin:retrieval_document_add"),
        {"collection": target.pk, "files": [upload]},
        follow=True,
    )
