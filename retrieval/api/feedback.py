"""``POST /api/feedback/``: a reader's vote on a result, kept as a candidate judgment, or
on an answer they asked for.

Votes on results wait in the admin's judgment list (status "candidate") until someone
accepts or rejects them; only accepted judgments count in evaluations. Votes on answers
(``trace_id`` and ``helpful``) are :class:`~retrieval.models.AnswerVote` rows, counted by
answer analytics (:mod:`retrieval.services.answers.votes`).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotAuthenticated, NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from retrieval.exceptions import RetrievalError
from retrieval.models import Chunk, EvalSet, Judgment
from retrieval.services.answers.votes import AnswerNotFound, vote_on_answer
from retrieval.services.quality.goldens import judge, target_of

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


class AnswerVoteSerializer(serializers.Serializer):
    trace_id = serializers.IntegerField(
        min_value=1, max_value=2**63 - 1, help_text="The answer's trace_id, as it was returned."
    )
    helpful = serializers.BooleanField()


class FeedbackView(WriteThrottleMixin, RetrievalAPIMixin, APIView):
    """Vote a search result relevant or not (the vote becomes a candidate judgment), or
    an answer helpful or not.

    A vote on a result needs Django's ``retrieval.add_judgment`` permission and a
    collection the user may change (see ``retrieval.services.access``; the vote's chunk
    must be visible, the rest of the collection need not be). A vote on an answer
    (``trace_id``) needs no permission: only the signed-in user who asked may cast it,
    and any other answer reads as missing. The answer echoes the vote and nothing of
    what others judged.
    """

    @extend_schema(
        request=PolymorphicProxySerializer(
            component_name="FeedbackVote",
            serializers=[FeedbackSerializer, AnswerVoteSerializer],
            resource_type_field_name=None,
        ),
        responses={
            202: PolymorphicProxySerializer(
                component_name="FeedbackVoteResponse",
                serializers=[FeedbackResponseSerializer, AnswerVoteSerializer],
                resource_type_field_name=None,
            )
        },
    )
    def post(self, request: Request) -> Response:
        if isinstance(request.data, dict) and "trace_id" in request.data:
            return self.vote_on_answer(request)
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

    def vote_on_answer(self, request: Request) -> Response:
        """Record the asker's vote on their answer; any other answer is a 404 like none."""
        serializer = AnswerVoteSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data: dict[str, Any] = serializer.validated_data
        if not request.user.is_authenticated:
            raise NotAuthenticated("Sign in to vote on your answers.")
        try:
            vote = vote_on_answer(
                data["trace_id"], user=request.user, scope=self.scope, helpful=data["helpful"]
            )
        except AnswerNotFound as e:
            raise NotFound({"trace_id": [str(e)]}) from e
        body = {"trace_id": vote.trace_id, "helpful": vote.helpful}
        return Response(body, status=status.HTTP_202_ACCEPTED)
