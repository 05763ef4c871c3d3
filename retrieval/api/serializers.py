"""API serializers: validate input, render records. Work happens in the services."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from retrieval.exceptions import InvalidFilterError
from retrieval.models import Chunk, Collection, Document, IndexRun
from retrieval.services.filters import Filters
from retrieval.services.registry import chunkers, embedders, retrievers


def _json_object(value: Any) -> dict:
    if not isinstance(value, dict):
        raise serializers.ValidationError("Must be a JSON object.")
    return value


def _component(handler, alias: str, kind: str) -> str:
    if alias not in handler:
        raise serializers.ValidationError(
            f"Unknown {kind} {alias!r}; configured: {', '.join(handler.aliases())}."
        )
    return alias


class CollectionSerializer(serializers.ModelSerializer):
    embedder = serializers.CharField(
        required=False, help_text="Embedder alias (default: DEFAULT_EMBEDDER)."
    )
    metadata = serializers.JSONField(required=False, help_text="A JSON object.")
    documents = serializers.IntegerField(source="documents.count", read_only=True)

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
            "metadata",
            "documents",
            "created_at",
            "updated_at",
        ]
        read_only_fields = ["slug", "model_name", "dimensions", "created_at", "updated_at"]

    def validate_metadata(self, value: Any) -> dict:
        return _json_object(value)

    def validate_embedder(self, value: str) -> str:
        if self.instance is not None and value != self.instance.embedder:
            raise serializers.ValidationError(
                "A collection's embedder cannot change; re-embed it instead."
            )
        return _component(embedders, value, "embedder")

    def validate_chunker(self, value: str) -> str:
        return _component(chunkers, value, "chunker") if value else value

    def validate_default_retriever(self, value: str) -> str:
        return _component(retrievers, value, "retriever") if value else value


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


class ChunkSerializer(serializers.ModelSerializer):
    document = serializers.CharField(source="document.external_id", read_only=True)
    collection = serializers.CharField(source="collection.slug", read_only=True)

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
    metadata = serializers.JSONField(required=False, default=dict)

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
            "scope",
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


class SearchSerializer(serializers.Serializer):
    query = serializers.CharField(max_length=10_000)
    collection = serializers.SlugRelatedField(slug_field="slug", queryset=Collection.objects.all())
    retriever = serializers.CharField(
        required=False, help_text="Retriever alias (default: the collection's)."
    )
    top_k = serializers.IntegerField(default=10, min_value=1, max_value=1000)
    filters = serializers.JSONField(required=False, default=None)

    def validate_retriever(self, value: str) -> str:
        return _component(retrievers, value, "retriever")

    def validate_filters(self, value: Any) -> Filters:
        try:
            return Filters.parse(value)
        except InvalidFilterError as e:
            raise serializers.ValidationError(str(e)) from e


class SearchResultSerializer(serializers.Serializer):
    rank = serializers.IntegerField()
    score = serializers.FloatField()
    document = serializers.CharField(help_text="The document's external id.")
    title = serializers.CharField()
    chunk_id = serializers.IntegerField()
    chunk_index = serializers.IntegerField()
    start = serializers.IntegerField()
    end = serializers.IntegerField()
    page = serializers.IntegerField(allow_null=True)
    heading_path = serializers.ListField(child=serializers.CharField())
    text = serializers.CharField()
    metadata = serializers.DictField(help_text="Includes each fused leg's score and rank.")
