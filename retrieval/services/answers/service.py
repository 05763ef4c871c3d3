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
from dataclasses import dataclass, replace
from typing import Any

from asgiref.sync import sync_to_async

from retrieval.conf import DEFAULTS, retrieval_settings
from retrieval.exceptions import InvalidComponentError, RetrievalError
from retrieval.models import Chunk, Collection, QueryTrace
from retrieval.services.access import Scope, resolve_scope
from retrieval.services.answers.extractive import best_quote, coverage, extract
from retrieval.services.answers.grounding import (
    MarkerGate,
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
from retrieval.services.quality.analytics import EDITORS
from retrieval.services.query.packing import SEPARATOR, PackedContext, pack_context
from retrieval.services.query.search import _closing_connections, pipeline_for, search
from retrieval.services.query.search_log import current_source, record_search, traced_as
from retrieval.services.registry import llms
from retrieval.services.types import RetrievalResult

__all__ = [
    "aanswer",
    "answer",
    "answer_events",
    "answer_settings",
    "answer_stream",
    "extractive_answer",
]

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
    asked = _asked(
        question, collection, user, scope, pipeline, retriever, llm, extractive, top_k, filters
    )
    answering = _answering(asked, min_score, stream=False)
    for _ in answering:  # nothing is streamed: this only runs it to its end
        pass
    return asked.result


def extractive_answer(question: str, results: list[RetrievalResult], **options: Any) -> Answer:
    """Return the extractive answer :func:`answer` gives to ``question`` from search
    ``results`` already found, ``ANSWERS`` overridden by ``options`` (neither searched
    nor recorded): what ``bench/answers.py --sweep`` measures each setting with."""
    settings = {**answer_settings(), **options}
    with traced() as trace:
        steps = _compose(question, results, None, settings, settings["min_score"], trace)
        while True:  # no model: nothing is streamed, the answer is the return value
            try:
                next(steps)
            except StopIteration as done:
                return done.value


def answer_stream(question: str, **options: Any) -> Iterator[tuple[str, Any]]:
    """Return the events of :func:`answer` (same arguments) as the model writes it.

    The arguments are checked now (the same errors as :func:`answer`); the search and
    the model run as the events are read:

    - ``("token", {"text"})``: the next piece of the answer's text. A ``[n]`` marker is
      held back until it is whole and names a passage given: a made-up one never comes.
    - ``("reset", {"reason"})``: the model failed mid-answer (a hang, an error, no
      citation); forget the tokens so far, the extractive answer's tokens follow.
    - ``("answer", Answer)``: last, the :class:`Answer` with the checked text, the
      citations and the trace id.

    The model's stream ends within the same time and token budget as :func:`answer`.
    """
    min_score = options.pop("min_score", None)
    asked = _asked(question, **options)
    return _streamed(asked, min_score)


async def aanswer(question: str, **options: Any) -> Answer:
    """:func:`answer` for async views and agents, on a worker thread (its own connection)."""
    return await sync_to_async(_closing_connections(answer), thread_sensitive=False)(
        question, **options
    )


def answer_events(result: Answer) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield a finished answer as a stream's events: ``("token", {"text"})`` pieces of its
    checked text, then ``("answer", ...)`` with its citations and trace id."""
    yield from _tokens(result.text)
    yield "answer", result.to_dict()


@dataclass
class _Asked:
    """A question with its checked arguments, and (once answered) its answer."""

    question: str
    allowed: Scope
    target: Collection
    model: Any
    options: dict[str, Any]
    top_k: int
    pipeline: str | None
    retriever: str | None
    chosen: Any
    filters: Any
    face: str
    result: Any = None


def _asked(
    question: str,
    collection: Collection | str,
    user: Any = None,
    scope: Scope | None = None,
    pipeline: str | None = None,
    retriever: str | None = None,
    llm: str | None = None,
    extractive: bool = False,
    top_k: int | None = None,
    filters: Filters | Mapping[str, Any] | None = None,
) -> _Asked:
    """Check the arguments before anything runs (a bad one raises here, not mid-stream)."""
    if not isinstance(question, str) or not question.strip():
        raise ValueError("question must be a non-empty string.")
    options = answer_settings()
    allowed = resolve_scope(scope, user, caller="answer")
    target = allowed.collection(collection)
    return _Asked(
        question=question,
        allowed=allowed,
        target=target,
        model=_model(llm, options, extractive),
        options=options,
        top_k=options["top_k"] if top_k is None else top_k,
        pipeline=pipeline,
        retriever=retriever,
        chosen=pipeline_for(target, pipeline=pipeline, retriever=retriever),
        filters=filters,
        face=current_source(),  # now: a stream runs after the view's traced_as has ended
    )


def _answering(
    asked: _Asked, min_score: float | None, *, stream: bool
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Answer ``asked`` (into ``asked.result``), yielding the model's checked tokens as
    they come when ``stream``."""
    floor = asked.options["min_score"] if min_score is None else min_score
    with traced() as trace:
        results = search(
            asked.question,
            collection=asked.target,
            scope=asked.allowed,
            pipeline=asked.pipeline,
            retriever=asked.retriever,
            top_k=asked.top_k,
            filters=asked.filters,
        )
        composed = yield from _compose(
            asked.question, list(results), asked.model, asked.options, floor, trace, stream
        )
        composed = _within_scope(composed, asked.allowed, trace)
        trace.record("answer", face=asked.face, **_summary(composed))
        recorded = trace.to_dict()
    # Editors' answers keep their face's source, so the readers' analytics leave them out.
    source = asked.face if asked.face in EDITORS else QueryTrace.Source.ANSWER
    with traced_as(source):
        row = record_search(
            asked.question,
            collection=asked.target,
            pipeline=asked.chosen.name,
            top_k=asked.top_k,
            filters=asked.filters,
            results=results,
            trace=recorded,
            user=asked.allowed.user,
        )
    asked.result = _replace(composed, trace=recorded, trace_id=row.pk if row else None)


def _streamed(asked: _Asked, min_score: float | None) -> Iterator[tuple[str, Any]]:
    streamed = False
    for event in _answering(asked, min_score, stream=True):
        streamed = True
        yield event
    result: Answer = asked.result
    if streamed and result.mode != "llm":
        yield "reset", {"reason": result.reason}
        streamed = False
    if not streamed:
        yield from _tokens(result.text)
    yield "answer", result


def _tokens(text: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield ``text`` as ``token`` events, a word each."""
    words = text.split(" ")
    for position, word in enumerate(words):
        yield "token", {"text": word if position == len(words) - 1 else word + " "}


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
    stream: bool = False,
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Return the answer to ``question`` from ``results``, by the model or extractive
    (yielding the model's checked tokens as they come when ``stream``)."""
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
            return (
                yield from _written(question, used, packed, rendered, model, options, trace, stream)
            )
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
    stream: bool = False,
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Return the model's answer, its citations checked; raise :class:`_Fallback` when
    it cannot be used. When ``stream``, yield its text's pieces as they pass a
    :class:`MarkerGate`."""
    texts = list(rendered.values())
    try:
        fitted = fit_passages(
            model, texts, lambda shown: (build_messages(question, shown), None), purpose="answer"
        )
        given = list(rendered)[: fitted.shown]
        trace.record(
            "answer_prompt",
            passages=len(given),
            prompt_tokens=count_prompt_tokens(fitted.messages),
        )
        # The answer's length is the LLM's own max_tokens: the one fitting counts.
        if stream:
            text = yield from _gated(model.stream(fitted.messages, purpose="answer"), given)
        else:
            text = model.complete(fitted.messages, purpose="answer").text
    except (RetrievalError, ValueError) as e:
        raise _Fallback(f"The LLM gave no answer: {e}") from e
    if says_not_answered(text):
        return _abstain(
            question, results, "llm", "The LLM said the passages do not answer the question."
        )
    checked = check_citations(text, set(given))
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


def _gated(pieces: Iterator[str], given: list[int]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield ``pieces`` as ``token`` events through a :class:`MarkerGate`; return the
    whole reply as the model wrote it."""
    gate, written = MarkerGate(given), []
    for piece in pieces:
        written.append(piece)
        shown = gate.feed(piece)
        if shown:
            yield "token", {"text": shown}
    rest = gate.close()
    if rest:
        yield "token", {"text": rest}
    return "".join(written)


def _extracted(
    question: str,
    results: list[RetrievalResult],
    packed: PackedContext,
    rendered: dict[int, str],
    options: Mapping[str, Any],
) -> Answer:
    """Return the passages' sentences that best answer ``question``, each cited; abstain
    when they cover less than ``options["min_coverage"]`` of the question's terms."""
    bodies = _bodies(rendered)
    picked = extract(question, bodies, sentences=int(options["sentences"]))
    if not picked:
        return _abstain(
            question,
            results,
            "extractive",
            "No sentence of the passages shares a word with the question.",
        )
    floor = options["min_coverage"]
    covered = coverage(question, bodies, sentences=int(options["sentences"]))
    if floor is not None and covered < floor:
        return _abstain(
            question,
            results,
            "extractive",
            f"The best sentences cover {covered:.2f} of the question's terms, "
            f"less than {floor} (min_coverage).",
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
