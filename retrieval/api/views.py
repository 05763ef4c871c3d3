"""Thin DRF views over the services: the serializer validates, a service works."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.core.files.base import ContentFile
from django.db import DataError, IntegrityError, InterfaceError, OperationalError
from django.db.models import Count, OuterRef, QuerySet, Subquery
from django.utils.text import slugify
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, permissions, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import (
    APIException,
    NotFound,
    PermissionDenied,
    UnsupportedMediaType,
    ValidationError,
)
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings

from retrieval.conf import retrieval_settings
from retrieval.exceptions import (
    AccessDenied,
    CollectionNotFound,
    RetrievalError,
    UnsupportedFileType,
)
from retrieval.models import Chunk, Collection, Document, IndexRun
from retrieval.services.access import Scope
from retrieval.services.ingestion.collections import (
    EDITABLE_FIELDS,
    create_collection,
    update_collection,
)
from retrieval.services.ingestion.documents import (
    Upload,
    authorize_documents,
    delete_documents,
    store_uploads,
)
from retrieval.services.ingestion.parsing import parser_for_upload
from retrieval.services.ingestion.reindexing import discard_new_document
from retrieval.services.ingestion.runs import ACTIVE, cancel_run, enqueue_run, retry_run
from retrieval.tasks import index_document
from retrieval.validation.storable import refuse_unstorable

from . import parsers, serializers
from .throttling import UploadThrottleMixin, WriteThrottleMixin

logger = logging.getLogger(__name__)


class Pagination(PageNumberPagination):
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500


class RetrievalAPIMixin:
    """Paginated, and authenticated unless the host's DRF settings say otherwise.

    The schema class is drf-spectacular's whatever the host's default, so the
    OpenAPI schema builds in any site.
    """

    pagination_class = Pagination
    schema = AutoSchema()
    get_parsers = parsers.bounded_parsers  # JSON nested too deep: a 400, not a 500

    def handle_exception(self, exc: Exception) -> Response:
        # A value PostgreSQL cannot take (a NUL character, a number out of range) is bad
        # input, not a server error.
        if isinstance(exc, DataError):
            exc = ValidationError(f"Invalid value: {exc}")
        elif isinstance(exc, AccessDenied):
            exc = PermissionDenied(str(exc))
        elif isinstance(exc, CollectionNotFound):
            exc = NotFound({"collection": [str(exc)]})
        elif isinstance(exc, OperationalError | InterfaceError):
            # The database restarting, failing over or out of connections: a client may
            # retry, as a load balancer does. Logged, since no 500 traceback will be.
            logger.warning("The database did not answer %s: %s", self.request.path, exc)
            exc = DatabaseUnavailable()
        return super().handle_exception(exc)

    #: Path from this view's rows to their document (``"pk"`` for documents), or None
    #: for rows that belong to no single document (restricted by collection only).
    document_path: str | None = None

    @property
    def scope(self) -> Scope:
        """The requesting user's :class:`Scope`, resolved once per request."""
        return Scope.for_request(self.request)

    def visible(self, queryset: QuerySet) -> QuerySet:
        """Keep the rows the requesting user may see (collection and document hooks)."""
        return self.scope.restrict(queryset, document=self.document_path)

    def collection_or_404(self, name: str) -> Collection:
        """Return a visible collection; hidden and unknown ones are the same 404."""
        return self.scope.collection(name)

    def get_permissions(self) -> list[Any]:
        if "DEFAULT_PERMISSION_CLASSES" in getattr(settings, "REST_FRAMEWORK", {}):
            classes = api_settings.DEFAULT_PERMISSION_CLASSES
        else:
            classes = [permissions.IsAuthenticated]
        return [permission() for permission in classes]


class CollectionViewSet(WriteThrottleMixin, RetrievalAPIMixin, viewsets.ModelViewSet):
    """Collections: each a corpus with its own embedding space.

    Created and renamed by users who may create collections; changed and deleted by
    those the access policy lets change them (see ``retrieval.services.access``).
    """

    queryset = Collection.objects.all()
    serializer_class = serializers.CollectionSerializer
    lookup_field = "slug"

    def get_queryset(self) -> QuerySet:
        visible = self.scope.restrict(
            Document.objects.filter(collection=OuterRef("pk")),
            collection="collection_id",
            document="pk",
        )
        return self.scope.visible_collections().annotate(
            document_count=Subquery(
                visible.order_by().values("collection_id").annotate(n=Count("pk")).values("n")
            )
        )

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        # Authorized before validation: a name clash must not answer someone who may not
        # create collections (it would reveal a hidden one).
        self.scope.authorize_creation()
        return super().create(request, *args, **kwargs)

    def update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        # Authorized before validation, as a creation is: a name clash must not answer
        # someone who may not rename.
        collection = self.get_object()
        fields = self.get_serializer().fields
        data = request.data if isinstance(request.data, Mapping) else {}
        asked = {key: data[key] for key in data if key in fields and not fields[key].read_only}
        self.scope.authorize_change(collection, asked)
        return super().update(request, *args, **kwargs)

    def perform_create(self, serializer: serializers.CollectionSerializer) -> None:
        data = serializer.validated_data
        fields = {"description", "metadata", "default_pipeline"} & set(data)
        collection = Collection(
            name=data["name"],
            embedder=data.get("embedder") or retrieval_settings.DEFAULT_EMBEDDER,
            default_retriever=data.get("default_retriever") or "",
            chunker=data.get("chunker") or "",
            index=data.get("index") or "default",
            **{field: data[field] for field in fields},
        )
        try:
            serializer.instance = create_collection(collection)
        except (RetrievalError, IntegrityError) as e:
            raise ValidationError({"name": [str(e)]}) from e

    def perform_update(self, serializer: serializers.CollectionSerializer) -> None:
        data = serializer.validated_data
        changes = {key: value for key, value in data.items() if key in EDITABLE_FIELDS}
        try:
            update_collection(serializer.instance, changes, scope=self.scope)
        except (AccessDenied, CollectionNotFound):
            raise  # 403, 404
        except RetrievalError as e:  # the new name or slug is another collection's
            raise ValidationError({"name": [str(e)]}) from e

    def perform_destroy(self, instance: Collection) -> None:
        self.scope.authorize("delete", Collection, instance)
        # The delete's signal records an external index's "drop" and drains it after the commit.
        instance.delete()


FILTER_PARAMETERS = [
    OpenApiParameter("collection", str, description="Collection slug."),
    OpenApiParameter("status", str, description="Document status."),
    OpenApiParameter(
        "metadata", str, description='JSON object the metadata must contain, e.g. {"lang": "en"}.'
    ),
]


@extend_schema(parameters=FILTER_PARAMETERS)
class DocumentViewSet(
    UploadThrottleMixin,
    RetrievalAPIMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Documents: list and filter, create from text or a file (indexed by a task), read, delete."""

    queryset = Document.objects.select_related("collection").defer("content")
    document_path = "pk"

    def perform_destroy(self, instance: Document) -> None:
        delete_documents(Document.objects.filter(pk=instance.pk), scope=self.scope)

    def get_serializer_class(self) -> type:
        if self.action == "retrieve":
            return serializers.DocumentDetailSerializer
        if self.action == "create":
            return serializers.DocumentCreateSerializer
        return serializers.DocumentSerializer

    def get_queryset(self) -> QuerySet:
        if self.action == "retrieve":
            return self.visible(
                Document.objects.select_related("collection").prefetch_related("chunks")
            )
        documents = self.visible(super().get_queryset())
        params = self.request.query_params
        if "collection" in params:
            documents = documents.filter(collection__slug=params["collection"])
        if "status" in params:
            documents = documents.filter(status=params["status"])
        if "metadata" in params:
            documents = documents.filter(
                metadata__contains=_json_object(params["metadata"], "metadata")
            )
        return documents

    @extend_schema(
        request={
            "application/json": serializers.DocumentCreateSerializer,
            "multipart/form-data": serializers.DocumentCreateSerializer,
        },
        responses={
            201: serializers.DocumentCreatedSerializer,
            202: serializers.DocumentCreatedSerializer,
        },
    )
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Store the document's source and enqueue its indexing.

        202 with the document pending and its IndexRun id; when tasks run inline
        (``TASKS_SYNC``) the document is indexed already: 201, or 400 if it failed.
        """
        serializer = serializers.DocumentCreateSerializer(
            data=request.data, context=self.get_serializer_context()
        )
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        if "file" in data:
            name, content, mime_type = _checked_upload(data["file"])
        else:
            name = f"{slugify(data['external_id'])[:100] or 'text'}.txt"
            content, mime_type = ContentFile(data["text"].encode("utf-8")), "text/plain"
        upload = Upload(
            external_id=data["external_id"],
            file=content,
            name=name,
            mime_type=mime_type or "",
            title=data["title"],
            metadata=data["metadata"],
        )
        existed = Document.objects.filter(
            collection=data["collection"], external_id=data["external_id"]
        ).exists()
        (document,) = store_uploads(data["collection"], [upload], scope=self.scope)
        run = _enqueue_indexing(document, request)
        document.refresh_from_db()
        if run.status == IndexRun.Status.FAILED:
            if not existed:  # a document this request stored is not left behind
                discard_new_document(document)
            field = "file" if "file" in data else "text"
            raise ValidationError({field: [document.error or run.message]})
        detail = serializers.DocumentDetailSerializer(document, context={"request": request})
        body = {**detail.data, "index_run": run.pk}
        queued = run.status in ACTIVE
        return Response(body, status=status.HTTP_202_ACCEPTED if queued else 201)

    @extend_schema(request=None, responses=serializers.IndexRunSerializer)
    @action(detail=True, methods=["post"])
    def reindex(self, request: Request, pk: str | None = None) -> Response:
        """Enqueue indexing the document again from its source; return the IndexRun."""
        document = self.get_object()
        authorize_documents([document], "change", scope=self.scope)
        return _run_response(_enqueue_indexing(document, request))


@extend_schema(
    parameters=[
        OpenApiParameter("collection", str, description="Collection slug."),
        OpenApiParameter("document", int, description="Document id."),
    ]
)
class ChunkViewSet(RetrievalAPIMixin, viewsets.ReadOnlyModelViewSet):
    """Chunks: list and filter by collection and document."""

    queryset = Chunk.objects.select_related("document", "collection").defer(
        "embedding", "document__content"
    )
    serializer_class = serializers.ChunkSerializer
    document_path = "document"

    def get_queryset(self) -> QuerySet:
        chunks = self.visible(super().get_queryset())
        params = self.request.query_params
        if "collection" in params:
            chunks = chunks.filter(collection__slug=params["collection"])
        if "document" in params:
            if not params["document"].isdigit():
                raise ValidationError({"document": ["A document id is an integer."]})
            chunks = chunks.filter(document_id=int(params["document"]))
        return chunks


class IndexRunViewSet(WriteThrottleMixin, RetrievalAPIMixin, viewsets.ReadOnlyModelViewSet):
    """Index runs: progress, counts and per-document errors of every indexing job."""

    queryset = IndexRun.objects.select_related("collection")
    serializer_class = serializers.IndexRunSerializer

    def get_queryset(self) -> QuerySet:
        runs = self.visible(super().get_queryset())
        if self.scope.documents is not None:
            # A run's errors name its documents: under a document restriction a user
            # sees only the runs they started.
            user = self.request.user
            runs = runs.filter(created_by=user) if user.is_authenticated else runs.none()
        return runs

    @extend_schema(request=None, responses=serializers.IndexRunSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        """Cancel a queued or running run (a running one stops before its next document)."""
        run = self.get_object()
        self.scope.authorize("change", IndexRun, run.collection)
        if not cancel_run(run):
            raise Conflict(f"Index run #{run.pk} already ended: it {run.status}.")
        return Response(serializers.IndexRunSerializer(run).data)

    @extend_schema(request=None, responses=serializers.IndexRunSerializer)
    @action(detail=True, methods=["post"])
    def retry(self, request: Request, pk: str | None = None) -> Response:
        """Enqueue again the documents that failed in this run; return the new run."""
        run = self.get_object()
        self.scope.authorize("change", IndexRun, run.collection)
        try:
            new = retry_run(run, created_by=request.user)
        except RetrievalError as e:
            raise Conflict(str(e)) from e
        return _run_response(new)


def _enqueue_indexing(document: Document, request: Request) -> IndexRun:
    """Enqueue indexing ``document`` again from its source, for the requesting user."""
    return enqueue_run(
        index_document,
        document.pk,
        force=True,
        collection=document.collection,
        created_by=request.user,
    )


def _run_response(run: IndexRun) -> Response:
    """202 for a run still queued or running, 200 for one that ran inline."""
    code = status.HTTP_202_ACCEPTED if run.status in ACTIVE else status.HTTP_200_OK
    return Response(serializers.IndexRunSerializer(run).data, status=code)


def _checked_upload(upload: Any) -> tuple[str, Any, str | None]:
    """Return an upload's name, file and MIME type within the size limit, for a known type."""
    limit = int(retrieval_settings.MAX_UPLOAD_BYTES)
    if upload.size > limit:
        raise PayloadTooLarge(
            f"The file is {upload.size} bytes; the limit is {limit} (MAX_UPLOAD_BYTES)."
        )
    content_type = (
        upload.content_type if upload.content_type != "application/octet-stream" else None
    )
    try:
        parser_for_upload(upload, mime_type=content_type)
    except UnsupportedFileType as e:
        raise UnsupportedMediaType(content_type or upload.name, detail=str(e)) from e
    return upload.name, upload, content_type


class Conflict(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The index run is not in a state that allows this."
    default_code = "conflict"


class DatabaseUnavailable(APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = "The database did not answer. Try again shortly."
    default_code = "database_unavailable"
    wait = 5  # seconds: DRF's handler sends it as Retry-After


class PayloadTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The upload is too large."
    default_code = "payload_too_large"


def _json_object(raw: str, name: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except (json.JSONDecodeError, RecursionError) as e:  # RecursionError: nested too deep
        raise ValidationError({name: [f"Not valid JSON: {e}"]}) from e
    if not isinstance(value, dict):
        raise ValidationError({name: ["Must be a JSON object."]})
    refuse_unstorable(value, name, lambda message: ValidationError({name: [message]}))
    return value
