"""API serializers: validate input, render records. Work happens in the services."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from retrieval.conf import retrieval_settings
from retrieval.models import Chunk, Collection, Document, IndexRun, Triple
from retrieval.services.access import Scope
from retrieval.services.registry import (
    chunkers,
    embedders,
    indexes,
    retrievers,
)
from retrieval.validation.storable import refuse_unstorable

from .parsers import BoundedJSONField


def _json_object(value: Any) -> dict:
    if not isinstance(value, dict):
        raise serializers.ValidationError("Must be a JSON object.")
    refuse_unstorable(value, "metadata", serializers.ValidationError)
    return value


def known_component(configured, alias: str, kind: str) -> str:
    """Return ``alias`` if ``configured`` holds it; else a validation error naming what does."""
    if alias not in configured:
        raise serializers.ValidationError(
            f"Unknown {kind} {alias!r}; configured: {', '.join(sorted(configured)) or '(none)'}."
        )
    return alias


class CollectionSerializer(serializers.ModelSerializer):
    embedder = serializers.CharField(
        required=False, help_text="Embedder alias (default: DEFAULT_EMBEDDER)."
    )
    index = serializers.CharField(
        required=False, help_text="Vector index alias in RETRIEVAL['INDEXES'] (default: default)."
    )
    metadata = BoundedJSONField(required=False, help_text="A JSON object.")
    documents = serializers.SerializerMethodField(
        help_text="How many of its documents the requesting user may see."
    )

    class Meta:
        model = Collection
        fields = [
            "id",
            "name",
            "slug",
            "description",
            "embedder",
            "model_name",
            "dimensions",
            "chunker",
            "default_retriever",
            "default_pipeline",
            "index",
            "metadata",
            "documents",
            "created_at",
            "updated_at",
        ]
        read_only_fields = ["slug", "model_name", "dimensions", "created_at", "updated_at"]

    def get_documents(self, collection: Collection) -> int:
        return getattr(collection, "document_count", None) or 0

    def validate_metadata(self, value: Any) -> dict:
        return _json_object(value)

    def validate_embedder(self, value: str) -> str:
        if self.instance is not None and value != self.instance.embedder:
            raise serializers.ValidationError(
                "A collection's embedder cannot change; re-embed it instead."
            )
        return known_component(embedders, value, "embedder")

    def validate_chunker(self, value: str) -> str:
        return known_component(chunkers, value, "chunker") if value else value

    def validate_index(self, value: str) -> str:
        if self.instance is not None and value != self.instance.index:
            raise serializers.ValidationError(
                "A collection's index cannot change; create a new collection instead."
            )
        return known_component(indexes, value, "index")

    def validate_default_retriever(self, value: str) -> str:
        return known_component(retrievers, value, "retriever") if value else value

    def validate_default_pipeline(self, value: str) -> str:
        return known_component(retrieval_settings.PIPELINES, value, "pipeline") if value else value


class DocumentSerializer(serializers.ModelSerializer):
    collection = serializers.SlugRelatedField(slug_field="slug", queryset=Collection.objects.all())

    class Meta:
        model = Document
        fields = [
            "id",
            "collection",
            "external_id",
            "title",
            "mime_type",
            "source_path",
            "content_hash",
            "metadata",
            "status",
            "error",
            "created_at",
            "updated_at",
            "indexed_at",
        ]
        read_only_fields = fields

    def to_representation(self, instance: Document) -> dict[str, Any]:
        data = super().to_representation(instance)
        user = getattr(self.context.get("request"), "user", None)
        if not getattr(user, "is_staff", False):
            data.pop("source_path", None)  # a server's file path is for staff only
        return data


class ChunkSerializer(serializers.ModelSerializer):
    document = serializers.CharField(source="document.external_id", read_only=True)
    collection = serializers.CharField(source="collection.slug", read_only=True)
    indexed_text = serializers.CharField(
        read_only=True, help_text="What was embedded and BM25-indexed: a header, then content."
    )

    class Meta:
        model = Chunk
        fields = [
            "id",
            "collection",
            "document",
            "document_id",
            "index",
            "content",
            "start",
            "end",
            "page",
            "heading_path",
            "token_count",
            "metadata",
            "indexed_text",
        ]
        read_only_fields = fields


class DocumentDetailSerializer(DocumentSerializer):
    chunks = ChunkSerializer(many=True, read_only=True)

    class Meta(DocumentSerializer.Meta):
        fields = [*DocumentSerializer.Meta.fields, "content", "chunks"]
        read_only_fields = fields


class DocumentCreatedSerializer(DocumentDetailSerializer):
    index_run = serializers.IntegerField(read_only=True, help_text="The indexing job's id.")

    class Meta(DocumentDetailSerializer.Meta):
        fields = [*DocumentDetailSerializer.Meta.fields, "index_run"]
        read_only_fields = fields


class DocumentCreateSerializer(serializers.Serializer):
    """A document to index: JSON ``text``, or a multipart ``file``."""

    collection = serializers.SlugRelatedField(slug_field="slug", queryset=Collection.objects.all())
    external_id = serializers.CharField(
        max_length=1000, required=False, help_text="Default: the file name."
    )
    text = serializers.CharField(trim_whitespace=False, required=False)
    file = serializers.FileField(required=False)
    title = serializers.CharField(required=False, allow_blank=True, default="", max_length=1000)
    metadata = BoundedJSONField(required=False, default=dict)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        request = self.context.get("request")
        if request is not None:  # a hidden collection reads as an unknown one
            self.fields["collection"].queryset = Scope.for_request(request).visible_collections()

    def validate_metadata(self, value: Any) -> dict:
        return _json_object(value)

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        if ("text" in data) == ("file" in data):
            raise serializers.ValidationError("Give either text or a file.")
        if "text" in data and not data["text"].strip():
            raise serializers.ValidationError({"text": ["The text is empty."]})
        if "external_id" not in data:
            if "file" not in data:
                raise serializers.ValidationError({"external_id": ["Required with text."]})
            data["external_id"] = data["file"].name
        return data


class IndexRunSerializer(serializers.ModelSerializer):
    collection = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = IndexRun
        fields = [
            "id",
            "collection",
            "task",
            "options",
            "status",
            "documents_total",
            "documents_done",
            "documents_indexed",
            "documents_skipped",
            "documents_failed",
            "chunks_written",
            "errors",
            "message",
            "created_at",
            "started_at",
            "heartbeat_at",
            "finished_at",
            "duration_seconds",
        ]
        read_only_fields = fields


class TripleSerializer(serializers.ModelSerializer):
    collection = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    document = serializers.CharField(
        source="chunk.document.external_id", read_only=True, allow_null=True
    )

    class Meta:
        model = Triple
        fields = [
            "id",
            "collection",
            "subject",
            "predicate",
            "object",
            "subject_key",
            "predicate_key",
            "object_key",
            "confidence",
            "chunk",
            "document",
            "created_at",
        ]
        read_only_fields = fields
