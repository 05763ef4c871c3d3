"""API serializers: validate input, render records. Work happens in the services."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from retrieval.conf import retrieval_settings
from retrieval.exceptions import InvalidFilterError
from retrieval.models import Chunk, Collection, Document, IndexRun, Triple
from retrieval.services.access import visible_collections
from retrieval.services.filters import Filters
from retrieval.services.registry import (
    chunkers,
    embedders,
    indexes,
    rerankers,
    retrievers,
    rewriters,
)


def _json_object(value: Any) -> dict:
    if not isinstance(value, dict):
        raise serializers.ValidationError("Must be a JSON object.")
    return value


def _component(configured, alias: str, kind: str) -> str:
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
            "default_pipeline",
            "index",
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

    def validate_index(self, value: str) -> str:
        if self.instance is not None and value != self.instance.index:
            raise serializers.ValidationError(
                "A collection's index cannot change; create a new collection instead."
            )
        return _component(indexes, value, "index")

    def validate_default_retriever(self, value: str) -> str:
        return _component(retrievers, value, "retriever") if value else value

    def validate_default_pipeline(self, value: str) -> str:
        return _component(retrieval_settings.PIPELINES, value, "pipeline") if value else value


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
    metadata = serializers.JSONField(required=False, default=dict)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        request = self.context.get("request")
        if request is not None:  # a hidden collection reads as an unknown one
            self.fields["collection"].queryset = visible_collections(request.user)

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


class NeighbourhoodQuerySerializer(serializers.Serializer):
    collection = serializers.CharField(max_length=200, help_text="Collection slug (or name).")
    entity = serializers.CharField(max_length=500, help_text="An entity's name, key or alias.")
    hops = serializers.IntegerField(default=1, min_value=1, max_value=4)
    predicates = serializers.CharField(
        required=False, help_text="Comma-separated predicates to follow (default: all)."
    )
    min_confidence = serializers.FloatField(default=0.0, min_value=0.0, max_value=1.0)


class NeighbourhoodSerializer(serializers.Serializer):
    entity = serializers.CharField()
    nodes = serializers.ListField(child=serializers.DictField())
    edges = serializers.ListField(
        child=serializers.DictField(), help_text="Triples, each with its source chunk id."
    )


class SearchOptionsSerializer(serializers.Serializer):
    """What a search and a batch of searches share."""

    collection = serializers.CharField(
        max_length=200, help_text="Collection slug (or name). Unknown or hidden: 404."
    )
    pipeline = serializers.CharField(
        required=False, help_text="Pipeline alias (default: DEFAULT_PIPELINE)."
    )
    retriever = serializers.CharField(
        required=False, help_text="Retriever alias to run alone, instead of a pipeline."
    )
    rewrite = serializers.CharField(
        required=False, help_text="Rewriter alias replacing the pipeline's rewrite step."
    )
    rerank = serializers.CharField(
        required=False, help_text="Reranker alias replacing the pipeline's rerank step."
    )
    history = serializers.ListField(
        child=serializers.DictField(child=serializers.CharField()),
        required=False,
        max_length=50,
        help_text='Earlier turns, [{"role": "user", "content": "..."}], for rewriters.',
    )
    top_k = serializers.IntegerField(default=10, min_value=1, max_value=1000)
    filters = serializers.JSONField(required=False, default=None)
    max_tokens = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=1_000_000,
        help_text="Also pack the best results into a context of at most this many tokens.",
    )

    def validate_retriever(self, value: str) -> str:
        return _component(retrievers, value, "retriever")

    def validate_pipeline(self, value: str) -> str:
        return _component(retrieval_settings.PIPELINES, value, "pipeline")

    def validate_rewrite(self, value: str) -> str:
        return _component(rewriters, value, "rewriter")

    def validate_rerank(self, value: str) -> str:
        return _component(rerankers, value, "reranker")

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        if data.get("pipeline") and data.get("retriever"):
            raise serializers.ValidationError("Name a pipeline or a retriever, not both.")
        return data

    def search_options(self) -> dict[str, Any]:
        """Return the validated options as :func:`retrieval.services.search.search` takes them."""
        data = self.validated_data
        return {
            "pipeline": data.get("pipeline"),
            "retriever": data.get("retriever"),
            "rewriter": data.get("rewrite"),
            "reranker": data.get("rerank"),
            "history": data.get("history"),
            "top_k": data["top_k"],
            "filters": data["filters"],
            "max_tokens": data.get("max_tokens"),
        }

    def validate_filters(self, value: Any) -> Filters:
        try:
            return Filters.parse(value)
        except InvalidFilterError as e:
            raise serializers.ValidationError(str(e)) from e


class SearchSerializer(SearchOptionsSerializer):
    query = serializers.CharField(max_length=10_000)


class BatchSearchSerializer(SearchOptionsSerializer):
    queries = serializers.ListField(
        child=serializers.CharField(max_length=10_000),
        min_length=1,
        help_text="Query texts, run concurrently; at most MAX_BATCH_QUERIES (default 32).",
    )

    def validate_queries(self, value: list[str]) -> list[str]:
        limit = int(retrieval_settings.MAX_BATCH_QUERIES)
        if len(value) > limit:
            raise serializers.ValidationError(
                f"{len(value)} queries; a batch holds at most {limit} (MAX_BATCH_QUERIES)."
            )
        return value


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
    token_count = serializers.IntegerField()
    text = serializers.CharField()
    metadata = serializers.DictField(help_text="Includes each fused leg's score and rank.")


class CitationSerializer(serializers.Serializer):
    number = serializers.IntegerField(help_text="The [number] in the context text.")
    document_id = serializers.IntegerField()
    document = serializers.CharField(help_text="The document's external id.")
    title = serializers.CharField()
    page = serializers.IntegerField(allow_null=True)
    heading_path = serializers.ListField(child=serializers.CharField())
    start = serializers.IntegerField(help_text="Offset in the document's text.")
    end = serializers.IntegerField()
    chunk_ids = serializers.ListField(child=serializers.IntegerField())


class ContextSerializer(serializers.Serializer):
    text = serializers.CharField(help_text="Passages headed [n] title, ready for a prompt.")
    citations = CitationSerializer(many=True)
    token_count = serializers.IntegerField()
    results_used = serializers.IntegerField()


class SearchResponseSerializer(serializers.Serializer):
    results = SearchResultSerializer(many=True)
    context = ContextSerializer(required=False, help_text="Present when max_tokens was given.")
    trace = serializers.DictField(
        help_text="What ran: rewrites, agentic rounds, reranking, LLM calls (tokens, ms)."
    )


class BatchItemSerializer(SearchResponseSerializer):
    query = serializers.CharField()


class BatchSearchResponseSerializer(serializers.Serializer):
    results = BatchItemSerializer(many=True, help_text="One entry per query, in input order.")


class ToolListSerializer(serializers.Serializer):
    tools = serializers.ListField(
        child=serializers.DictField(),
        help_text='OpenAI function-calling specs: {"type": "function", "function": {...}}.',
    )


class ToolCallSerializer(serializers.Serializer):
    collection = serializers.CharField(max_length=200, help_text="Collection slug (or name).")
    name = serializers.CharField(max_length=200, help_text="The tool's name.")
    arguments = serializers.JSONField(
        required=False, default=None, help_text="The model's arguments: a JSON string or object."
    )
