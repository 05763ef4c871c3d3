"""``POST /api/feedback/``: a reader's vote on a result, kept as a candidate judgment.

Votes wait in the admin's judgment list (status "candidate") until someone accepts or
rejects them; only accepted judgments count in evaluations.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from retrieval.exceptions import RetrievalError
from retrieval.models import Chunk, EvalSet, Judgment
from retrieval.services.goldens import judge, target_of

from .throttling import WriteThrottleMixin
from .views import RetrievalAPIMixin


class FeedbackSerializer(serializers.Serializer):
    collection = serializers.CharField(max_length=200, help_text="Collection name or slug.")
    query = serializers.CharField(max_length=10_000)
    chunk_id = serializers.IntegerField(min_value=1, help_text="A result's chunk_id.")
    relevant = serializers.BooleanField()
    eval_set = serializers.CharField(
        max_length=200,
        required=False,
        help_text="Golden set receiving the vote (default: '<collection> feedback', created "
        "on first use).",
    )


class FeedbackResponseSerializer(serializers.Serializer):
    eval_set = serializers.CharField()
    target = serializers.CharField(help_text="The judged document or chunk, as the set names it.")
    grade = serializers.IntegerField(help_text="The vote: 1 relevant, 0 not.")


class FeedbackView(WriteThrottleMixin, RetrievalAPIMixin, APIView):
    """Vote a search result relevant or not; the vote becomes a candidate judgment.

    Needs Django's ``retrieval.add_judgment`` permission and a collection the user may
    change (see ``retrieval.services.access``; the vote's chunk must be visible, the
    rest of the collection need not be). The answer echoes the vote and nothing of what
    others judged.
    """

    @extend_schema(request=FeedbackSerializer, responses={202: FeedbackResponseSerializer})
    def post(self, request: Request) -> Response:
        serializer = FeedbackSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data: dict[str, Any] = serializer.validated_data
        collection = self.collection_or_404(data["collection"])
        chunks = Chunk.objects.select_related("document").filter(collection=collection)
        # A chunk of a hidden document reads as missing.
        chunk = self.scope.restrict(chunks, document="document").filter(pk=data["chunk_id"]).first()
        if chunk is None:
            raise NotFound({"chunk_id": [f"No chunk {data['chunk_id']} in {collection}."]})
        self.scope.authorize("add", Judgment, collection, whole=False)
        grade = 1 if data["relevant"] else 0
        with transaction.atomic():
            name = data.get("eval_set") or f"{collection.name} feedback"
            if "eval_set" in data:
                eval_set = EvalSet.objects.filter(name=name, collection=collection).first()
                if eval_set is None:
                    raise NotFound({"eval_set": [f"No eval set {name!r} here."]})
            else:
                eval_set, _ = EvalSet.objects.get_or_create(name=name, collection=collection)
            try:
                judge(
                    eval_set,
                    data["query"],
                    chunk,
                    grade=grade,
                    status=Judgment.Status.CANDIDATE,
                    source="feedback",
                    user=request.user,
                )
            except RetrievalError as e:
                raise ValidationError(str(e)) from e
        body = {"eval_set": eval_set.name, "target": target_of(eval_set, chunk), "grade": grade}
        return Response(body, status=status.HTTP_202_ACCEPTED)
