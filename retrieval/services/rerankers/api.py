"""Rerank through a rerank API: the protocol vLLM, llama.cpp's server, Infinity, Jina,
Cohere and Hugging Face TEI share.

``POST {base_url}{path}`` with the query and the passages; the answer gives each
passage's index and relevance score: ``{"results": [{"index", "relevance_score"}]}``
(vLLM, llama.cpp, Infinity, Jina, Cohere: ``documents`` in the request) or
``[{"index", "score"}]`` (TEI: ``texts`` in the request, ``protocol="tei"``).
"""

from __future__ import annotations

from typing import Any

from retrieval.exceptions import RetrievalError, ServiceUnavailableError
from retrieval.services.clients.http import post_json
from retrieval.services.rerankers.base import BaseReranker
from retrieval.services.types import RetrievalResult

__all__ = ["APIReranker"]

PROTOCOLS = ("cohere", "tei")


class APIReranker(BaseReranker):
    """Scores from a rerank service, in one request for the first ``max_candidates``.

    OPTIONS: ``base_url`` (e.g. ``http://127.0.0.1:8080/v1``), ``model``, ``api_key``,
    ``timeout`` (seconds), ``top_n`` (the most scores to ask for; None: all),
    ``max_retries``, ``path`` ("/rerank"), ``protocol`` ("cohere" or "tei"),
    ``max_candidates``. The request stays within the search's deadline
    (``SEARCH_DEADLINE``); a service that fails or does not answer keeps the
    candidates' order, and the trace says why.
    """

    def __init__(
        self,
        *,
        base_url: str,
        model: str = "",
        api_key: str | None = None,
        timeout: float = 10.0,
        top_n: int | None = None,
        max_retries: int = 2,
        path: str = "/rerank",
        protocol: str = "cohere",
        max_candidates: int = 100,
        top_k: int | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL, not {base_url!r}.")
        if protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {', '.join(PROTOCOLS)}, not {protocol!r}.")
        if not (isinstance(timeout, int | float) and timeout > 0):
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}.")
        for name, value in (("top_n", top_n), ("top_k", top_k)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise ValueError(f"{name} must be a positive integer or None, not {value!r}.")
        if max_candidates < 1 or max_retries < 0:
            raise ValueError("max_candidates must be positive and max_retries 0 or more.")
        self.url = base_url.rstrip("/") + "/" + path.lstrip("/")
        self.model = model
        self.api_key = api_key
        self.timeout = float(timeout)
        self.top_n = top_n
        self.max_retries = max_retries
        self.protocol = protocol
        self.max_candidates = max_candidates
        self.top_k = top_k

    def _scores(
        self, query: str, results: list[RetrievalResult]
    ) -> tuple[list[float], dict[str, object]]:
        candidates = results[: self.max_candidates]
        texts = [r.chunk.indexed_text for r in candidates]
        details: dict[str, object] = {"scored": len(candidates), "url": self.url}
        try:
            scored = self._request(query, texts)
        except RetrievalError as e:
            details["error"] = str(e)
            return [1.0 - i / len(results) for i in range(len(results))], details  # kept order
        # Scored passages first, by the service's score; the rest keep their order below.
        floor = min(scored.values(), default=0.0)
        return [scored.get(i, floor - 1.0 - i / len(results)) for i in range(len(results))], details

    def _request(self, query: str, texts: list[str]) -> dict[int, float]:
        body: dict[str, Any] = {"query": query}
        if self.protocol == "tei":
            body["texts"] = texts
        else:
            body["documents"] = texts
            body["top_n"] = min(self.top_n or len(texts), len(texts))
            if self.model:
                body["model"] = self.model
        answer = post_json(
            self.url,
            body,
            api_key=self.api_key,
            timeout=self.timeout,
            max_retries=self.max_retries,
            unavailable=lambda problem: ServiceUnavailableError(f"{self.url} {problem}"),
            failed=lambda problem: RetrievalError(f"{self.url} {problem}"),
        )
        items = answer.get("results") if isinstance(answer, dict) else answer
        if not isinstance(items, list):
            raise RetrievalError(f"{self.url} answered no list of results: {str(answer)[:200]}")
        scored: dict[int, float] = {}
        for item in items:
            try:
                index = item["index"]
                score = float(
                    item["relevance_score"] if "relevance_score" in item else item["score"]
                )
            except (KeyError, TypeError, ValueError):
                continue  # a malformed item scores nothing
            if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(texts):
                continue  # an index it invented
            if score == score and index not in scored:  # not NaN, not repeated
                scored[index] = score
        return scored
