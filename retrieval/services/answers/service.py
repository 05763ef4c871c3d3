"""Answer a question from a collection: search, pack, ask the LLM, check what it cites.

:func:`answer` runs the collection's search under the asker's scope, packs the best
results into numbered passages (:func:`~retrieval.services.query.packing.pack_context`)
and asks the ``ANSWERS["llm"]`` model to answer only from them, citing them as ``[n]``.
Every citation is checked against the passages given and, before the answer is
returned, against the scope. With no model configured, or when the model hangs, fails
or answers without citing, the answer is extractive: the passages' sentences that best
answer the question. It abstains when retrieval finds nothing good enough or the model
says the passages do not answer. The search and the model share the query's deadline
(``SEARCH_DEADLINE``) and LLM budget (``LLM_BUDGET``); the answer is traced as one
``QueryTrace`` of source ``answer``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

from asgiref.sync import sync_to_async

from retrieval.conf import DEFAULTS, retrieval_settings
from retrieval.exceptions import InvalidComponentError, RetrievalError
from retrieval.models import Chunk, Collection, QueryTrace
from retrieval.services.access import Scope, resolve_scope
from retrieval.services.answers.extractive import best_quote, extract
from retrieval.services.answers.grounding import (
    build_messages,
    check_citations,
    cited_sentences,
    says_not_answered,
    without_markers,
)
from retrieval.services.answers.records import Answer, AnswerCitation
from retrieval.services.core.filters import Filters
from retrieval.services.core.tracing import QueryTrace as Trace
from retrieval.services.core.tracing import traced
from retrieval.services.llms.fitting import fit_passages
from retrieval.services.llms.prompts import count_prompt_tokens
from retrieval.services.query.packing import SEPARATOR, PackedContext, pack_context
from retrieval.services.query.search import _closing_connections, pipeline_for, search
from retrieval.services.query.search_log import current_source, record_search, traced_as
from retrieval.services.registry import llms
from retrieval.services.types import RetrievalResult

__all__ = ["aanswer", "answer", "answer_events", "answer_settings"]

#: Documents listed when an answer abstains.
CLOSEST = 5


class _Fallback(Exception):
    """The model's answer cannot be used; the extractive one is given instead."""


def answer_settings() -> dict[str, Any]:
    """Return ``ANSWERS`` over its defaults (a site may set only some keys)."""
    return {**DEFAULTS["ANSWERS"], **(retrieval_settings.ANSWERS or {})}


def answer(
    question: str,
    *,
    collection: Collection | str,
    user: Any = None,
    scope: Scope | None = None,
    pipeline: str | None = None,
    retriever: str | None = None,
    llm: str | None = None,
    extractive: bool = False,
    top_k: int | None = None,
    filters: Filters | Mapping[str, Any] | None = None,
    min_score: float | None = None,
) -> Answer:
    """Return an :class:`Answer` to ``question`` from ``collection``, citing its passages.

    :param user: the asking user (``AnonymousUser`` for nobody signed in); or
    :param scope: a :class:`Scope` (``Scope.ALL`` for commands). One is required: the
        answer is made only of what it may see, and a hidden collection raises
        :class:`CollectionNotFound` like a missing one.
    :param pipeline: a ``PIPELINES`` alias; or ``retriever``, a ``RETRIEVERS`` alias.
    :param llm: the ``LLMS`` alias that writes the answer (default ``ANSWERS["llm"]``;
        an unknown alias named here is an error, the default one missing means the
        extractive answer).
    :param extractive: answer with the passages' own sentences, asking no model.
    :param top_k: results retrieved (default ``ANSWERS["top_k"]``).
    :param filters: :class:`Filters` or their mapping form.
    :param min_score: results scoring less are not used (default ``ANSWERS["min_score"]``).
    """
    if not isinstance(question, str) or not question.strip():
        raise ValueError("question must be a non-empty string.")
    options = answer_settings()
    allowed = resolve_scope(scope, user, caller="answer")
    target = allowed.collection(collection)
    model = _model(llm, options, extractive)
    top_k = options["top_k"] if top_k is None else top_k
    floor = options["min_score"] if min_score is None else min_score
    chosen = pipeline_for(target, pipeline=pipeline, retriever=retriever)
    face = current_source()
    with traced() as trace:
        results = search(
            question,
            collection=target,
            scope=allowed,
            pipeline=pipeline,
            retriever=retriever,
            top_k=top_k,
            filters=filters,
        )
        composed = _compose(question, list(results), model, options, floor, trace)
        composed = _within_scope(composed, allowed, trace)
        trace.record("answer", face=face, **_summary(composed))
        recorded = trace.to_dict()
    with traced_as(QueryTrace.Source.ANSWER):
        row = record_search(
            question,
            collection=target,
            pipeline=chosen.name,
            top_k=top_k,
            filters=filters,
            results=results,
            trace=recorded,
            user=allowed.user,
        )
    return _replace(composed, trace=recorded, trace_id=row.pk if row else None)


async def aanswer(question: str, **options: Any) -> Answer:
    """:func:`answer` for async views and agents, on a worker thread (its own connection)."""
    return await sync_to_async(_closing_connections(answer), thread_sensitive=False)(
        question, **options
    )


def answer_events(result: Answer) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield an answer as a stream's events: ``("token", {"text"})`` pieces of its text,
    then ``("answer", ...)`` with its citations and trace id (:meth:`Answer.to_dict`).

    The text streamed is the checked one: a citation the model made up never reaches
    the reader, even for a moment.
    """
    words = result.text.split(" ")
    for position, word in enumerate(words):
        yield "token", {"text": word if position == len(words) - 1 else word + " "}
    yield "answer", result.to_dict()


def _model(alias: str | None, options: Mapping[str, Any], extractive: bool) -> Any:
    """Return the LLM that writes answers, or ``None`` for the extractive answer."""
    if extractive:
        return None
    if alias is not None and alias not in llms:
        raise InvalidComponentError(
            f"Unknown LLM {alias!r}; configured: {', '.join(llms.aliases()) or '(none)'}."
        )
    alias = alias or options["llm"]
    return llms[alias] if alias and alias in llms else None


def _compose(
    question: str,
    results: list[RetrievalResult],
    model: Any,
    options: Mapping[str, Any],
    floor: float | None,
    trace: Trace,
) -> Answer:
    """Return the answer to ``question`` from ``results``, by the model or extractive."""
    used = [r for r in results if floor is None or r.score >= floor]
    if not used:
        reason = (
            "Retrieval found no passage."
            if not results
            else f"No passage scored at least {floor} (min_score)."
        )
        return _abstain(question, results, "retrieval", reason)
    packed = pack_context(used, max_tokens=int(options["context_tokens"]))
    trace.record(
        "answer_context",
        passages=[citation.to_dict() for citation in packed.citations],
        token_count=packed.token_count,
    )
    rendered = _rendered(packed)
    if model is not None:
        try:
            return _written(question, used, packed, rendered, model, options, trace)
        except _Fallback as e:
            reason = str(e)
            trace.record("answer_fallback", reason=reason)
            extracted = _extracted(question, used, packed, rendered, options)
            return _replace(extracted, reason=reason)
    return _extracted(question, used, packed, rendered, options)


def _written(
    question: str,
    results: list[RetrievalResult],
    packed: PackedContext,
    rendered: dict[int, str],
    model: Any,
    options: Mapping[str, Any],
    trace: Trace,
) -> Answer:
    """Return the model's answer, its citations checked; raise :class:`_Fallback` when
    it cannot be used."""
    texts = list(rendered.values())
    try:
        fitted = fit_passages(
            model, texts, lambda shown: (build_messages(question, shown), None), purpose="answer"
        )
        # The answer's length is the LLM's own max_tokens: the one fitting counts.
        reply = model.complete(fitted.messages, purpose="answer")
    except (RetrievalError, ValueError) as e:
        raise _Fallback(f"The LLM gave no answer: {e}") from e
    given = list(rendered)[: fitted.shown]
    trace.record(
        "answer_prompt", passages=len(given), prompt_tokens=count_prompt_tokens(fitted.messages)
    )
    if says_not_answered(reply.text):
        return _abstain(
            question, results, "llm", "The LLM said the passages do not answer the question."
        )
    checked = check_citations(reply.text, set(given))
    if checked.fabricated:
        trace.record("answer_fabricated_citations", numbers=list(checked.fabricated))
    if not checked.cited:
        raise _Fallback("The LLM's answer cited no passage it was given.")
    if not without_markers(checked.text):
        raise _Fallback("The LLM's answer held citations and no text.")
    bodies = _bodies(rendered)
    citations = []
    for number in checked.cited:
        citing = " ".join(s for s, numbers in cited_sentences(checked.text) if number in numbers)
        citations.append(_citation(packed, number, results, best_quote(citing, bodies[number])))
    return Answer(
        question=question,
        text=checked.text,
        citations=tuple(citations),
        abstained=False,
        mode="llm",
        uncited=checked.uncited,
        results=results,
    )


def _extracted(
    question: str,
    results: list[RetrievalResult],
    packed: PackedContext,
    rendered: dict[int, str],
    options: Mapping[str, Any],
) -> Answer:
    """Return the passages' sentences that best answer ``question``, each cited."""
    picked = extract(question, _bodies(rendered), sentences=int(options["sentences"]))
    if not picked:
        return _abstain(
            question,
            results,
            "extractive",
            "No sentence of the passages shares a word with the question.",
        )
    citations = []
    for number in dict.fromkeys(sentence.number for sentence in picked):
        quote = " ".join(s.text for s in picked if s.number == number)
        citations.append(_citation(packed, number, results, quote))
    groups = [  # one marker after each passage's sentences (they come in passage order)
        " ".join(s.text for s in picked if s.number == number) + f" [{number}]"
        for number in dict.fromkeys(sentence.number for sentence in picked)
    ]
    return Answer(
        question=question,
        text=" ".join(groups),
        citations=tuple(citations),
        abstained=False,
        mode="extractive",
        results=results,
    )


def _abstain(question: str, results: list[RetrievalResult], mode: str, reason: str) -> Answer:
    closest: dict[int, dict[str, Any]] = {}
    for result in results:
        document = result.chunk.document
        if document.pk not in closest and len(closest) < CLOSEST:
            closest[document.pk] = {
                "document_id": document.pk,
                "document": document.external_id,
                "title": document.title,
                "url": _url(document),
                "score": result.score,
            }
    return Answer(
        question=question,
        text="The passages found do not answer this question.",
        citations=(),
        abstained=True,
        mode=mode,
        reason=reason,
        closest=tuple(closest.values()),
        results=results,
    )


def _within_scope(composed: Answer, allowed: Scope, trace: Trace) -> Answer:
    """Drop the citations (and closest documents) the scope no longer shows."""
    chunk_ids = {pk for citation in composed.citations for pk in citation.chunk_ids}
    documents = {item["document_id"] for item in composed.closest}
    rows = allowed.restrict(
        Chunk.objects.filter(pk__in=chunk_ids) | Chunk.objects.filter(document_id__in=documents),
        document="document",
    )
    seen = set(rows.values_list("pk", flat=True))
    seen_documents = set(rows.values_list("document_id", flat=True))
    kept = tuple(c for c in composed.citations if seen.issuperset(c.chunk_ids))
    closest = tuple(item for item in composed.closest if item["document_id"] in seen_documents)
    if len(kept) == len(composed.citations) and len(closest) == len(composed.closest):
        return composed
    trace.record("answer_hidden_citations", count=len(composed.citations) - len(kept))
    if not kept and composed.citations:
        return _replace(
            _abstain(composed.question, [], composed.mode, "No cited passage may be shown."),
            results=[],
        )
    checked = check_citations(composed.text, {c.number for c in kept})
    return _replace(composed, text=checked.text, citations=kept, closest=closest)


def _rendered(packed: PackedContext) -> dict[int, str]:
    """Return each passage of ``packed`` as the context shows it (``[n] label`` first)."""
    text, starts = packed.text, []
    for citation in packed.citations:
        marker = f"[{citation.number}] "
        if not starts:
            starts.append(0)
        else:
            at = text.index(SEPARATOR + marker, starts[-1] + len(marker))
            starts.append(at + len(SEPARATOR))
    ends = [start - len(SEPARATOR) for start in starts[1:]] + [len(text)]
    return {
        citation.number: text[start:end]
        for citation, start, end in zip(packed.citations, starts, ends, strict=True)
    }


def _bodies(rendered: Mapping[int, str]) -> dict[int, str]:
    """Return each passage's text without its ``[n] label`` line."""
    return {number: (text.split("\n", 1) + [""])[1] for number, text in rendered.items()}


def _citation(
    packed: PackedContext, number: int, results: list[RetrievalResult], quote: str
) -> AnswerCitation:
    citation = packed.citations[number - 1]
    document = next(
        r.chunk.document for r in results if r.chunk.document_id == citation.document_id
    )
    return AnswerCitation.of(citation, url=_url(document), quote=quote)


def _url(document: Any) -> str:
    url = (document.metadata or {}).get("url") if isinstance(document.metadata, dict) else None
    return url if isinstance(url, str) else ""


def _summary(composed: Answer) -> dict[str, Any]:
    """Return what the trace keeps of an answer."""
    return {
        "mode": composed.mode,
        "text": composed.text,
        "abstained": composed.abstained,
        "reason": composed.reason,
        "citations": [citation.to_dict() for citation in composed.citations],
        "uncited": list(composed.uncited),
        "closest": list(composed.closest),
    }


def _replace(composed: Answer, **changes: Any) -> Answer:
    return replace(composed, **changes)
