"""A small OpenAI-compatible HTTP server for tests, scripted with canned faults.

Use it as a context manager (or through a pytest fixture)::

    with OpenAIServer(dimension=8) as server:
        server.fail_next(status_fault(429), status_fault(429))
        client = openai.OpenAI(base_url=server.base_url, api_key="unused")
        ...
        assert len(server.requests_to("/v1/embeddings")) == 3

Routes are a dict ``(method, path) -> handler``; a handler takes the
:class:`RecordedRequest` and the server and returns a :class:`Reply`. Add one
with :meth:`OpenAIServer.add_route`.
Faults are handlers too: each queued fault answers one request in place of the route.

Chat completions are scripted: queue the assistant's answers, in order, then read
what the client sent::

    server.queue_chat(assistant(tool_calls=[tool_call("retrieve", {"query": "north"})]))
    server.queue_chat("North is up [1].")          # plain text, or a callable(request)
    server.queue_chat(truncated('{"score": 0.'))   # cut at max_tokens (finish_reason "length")
    ...
    sent = server.requests_to("/v1/chat/completions")[1].body["messages"]

A request with ``"stream": true`` gets the same answer as server-sent chunks, a word a
chunk; :func:`stream_fault` breaks such a stream after some words (it hangs, sends an
error event, or drops the connection).
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server received it."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any  # the parsed JSON body, or None when there was none or it was not JSON


@dataclass(frozen=True)
class Reply:
    """What to send back: a JSON-able ``body``, raw bytes sent as they are, or an iterator
    of bytes sent as server-sent events, each piece as it comes."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[RecordedRequest, "OpenAIServer"], Reply]


def error_reply(status: int, message: str, headers: dict[str, str] | None = None) -> Reply:
    """Return an error in OpenAI's wire format."""
    kind = (
        "rate_limit_error"
        if status == 429
        else "server_error"
        if status >= 500
        else "invalid_request_error"
    )
    body = {"error": {"message": message, "type": kind, "param": None, "code": None}}
    return Reply(status, body, headers or {})


# Faults: each answers one request in place of its route.


def status_fault(status: int, retry_after_ms: int = 1) -> Handler:
    """Answer with an HTTP error; ``Retry-After`` is tiny so client retries stay fast.

    The openai client ignores ``retry-after: 0`` (it then backs off 0.5 s or more), so
    ``retry-after-ms`` carries the real delay.
    """
    headers = {"retry-after": "0", "retry-after-ms": str(retry_after_ms)}
    return lambda request, server: error_reply(status, f"scripted fault {status}", headers)


def delay_fault(seconds: float) -> Handler:
    """Wait ``seconds`` (longer than the client timeout, to time it out), then answer normally."""

    def handle(request: RecordedRequest, server: OpenAIServer) -> Reply:
        server.stopping.wait(seconds)
        return server.route_reply(request)

    return handle


def hang_fault() -> Handler:
    """Never answer (until the server stops): a hung server, for every attempt it catches."""

    def handle(request: RecordedRequest, server: OpenAIServer) -> Reply:
        server.stopping.wait()
        return error_reply(503, "server stopped")

    return handle


def stream_fault(after: int, then: str = "hang") -> Handler:
    """Stream the route's answer for ``after`` chunks (the role, then a word each), then
    ``"hang"`` (until the server stops), send an ``"error"`` event, or ``"drop"`` the
    connection (no finish, no ``[DONE]``)."""
    if then not in ("hang", "error", "drop"):
        raise ValueError(f"then must be 'hang', 'error' or 'drop', not {then!r}.")

    def handle(request: RecordedRequest, server: OpenAIServer) -> Reply:
        reply = server.route_reply(request)
        if not isinstance(reply.body, Iterator):
            return reply
        pieces = [piece for piece in reply.body if b'"finish_reason": null' in piece]

        def broken() -> Iterator[bytes]:
            yield from pieces[:after]
            if then == "hang":
                server.stopping.wait()
            elif then == "error":
                error = {"error": {"message": "scripted fault mid-stream", "type": "server_error"}}
                yield f"event: error\ndata: {json.dumps(error)}\n\n".encode()

        return Reply(200, broken())

    return handle


def malformed_json_fault() -> Handler:
    """Answer 200 with a body that is not JSON."""
    return lambda request, server: Reply(200, b'{"object": "list", "data": [', {})


def wrong_dimension_fault(dimension: int) -> Handler:
    """Answer an embeddings request normally but with vectors of ``dimension`` floats."""

    def handle(request: RecordedRequest, server: OpenAIServer) -> Reply:
        return embeddings_reply(request, server, dimension=dimension)

    return handle


# The embeddings route.


def hashed_bag_of_words(text: str, dimension: int) -> np.ndarray:
    """Return a unit vector that sums signed hashed words, so texts sharing words are near."""
    vector = np.zeros(dimension, dtype=np.float64)
    for word in re.findall(r"\w+", text.lower()) or [""]:
        digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
        number = int.from_bytes(digest, "little")
        vector[number % dimension] += 1.0 if (number >> 32) & 1 else -1.0
    norm = np.linalg.norm(vector)
    if norm == 0:  # words cancelled out; any fixed unit vector will do
        vector[0], norm = 1.0, 1.0
    return (vector / norm).astype(np.float32)


def embeddings_reply(
    request: RecordedRequest, server: OpenAIServer, dimension: int | None = None
) -> Reply:
    """Answer ``POST /v1/embeddings`` with deterministic vectors."""
    body = request.body
    if not isinstance(body, dict) or "input" not in body:
        return error_reply(400, "body must be a JSON object with 'input'")
    texts = [body["input"]] if isinstance(body["input"], str) else body["input"]
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        return error_reply(400, "'input' must be a string or a non-empty array of strings")
    if "dimensions" in body and server.reject_dimensions:
        return error_reply(400, "this server does not support 'dimensions'")
    size = dimension or body.get("dimensions") or server.dimension
    as_base64 = body.get("encoding_format") == "base64"
    data = []
    for index, text in enumerate(texts):
        vector = hashed_bag_of_words(text, size)
        embedding: Any = (
            base64.b64encode(vector.astype("<f4").tobytes()).decode()
            if as_base64
            else vector.tolist()
        )
        data.append({"object": "embedding", "index": index, "embedding": embedding})
    if server.shuffle and len(data) > 1:
        shuffled = random.Random(len(server.requests)).sample(data, len(data))
        data = shuffled if shuffled != data else data[::-1]
    tokens = sum(len(text.split()) for text in texts)
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    model = body.get("model", server.models[0])
    return Reply(200, {"object": "list", "data": data, "model": model, "usage": usage})


def tei_embed_reply(request: RecordedRequest, server: OpenAIServer) -> Reply:
    """Answer ``POST /embed`` as Text Embeddings Inference does: a list of vectors."""
    body = request.body
    texts = body.get("inputs") if isinstance(body, dict) else None
    texts = [texts] if isinstance(texts, str) else texts
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        return Reply(422, {"error": "inputs must be a string or a non-empty array of strings"})
    return Reply(200, [hashed_bag_of_words(t, server.dimension).tolist() for t in texts])


def word_overlap(query: str, text: str) -> float:
    words = set(re.findall(r"\w+", query.lower()))
    return len(words & set(re.findall(r"\w+", text.lower()))) / max(len(words), 1)


def rerank_reply(request: RecordedRequest, server: OpenAIServer) -> Reply:
    """Answer a rerank request, scored by the query's words each passage holds: Cohere's
    form (``documents`` in, ``{"results": [{"index", "relevance_score"}]}`` out, best
    first, at most ``top_n``) or TEI's (``texts`` in, ``[{"index", "score"}]`` out)."""
    body = request.body
    if not isinstance(body, dict) or not isinstance(body.get("query"), str):
        return Reply(422, {"error": "a query and documents (or texts) are required"})
    tei = "texts" in body
    texts = body.get("texts" if tei else "documents")
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        return Reply(422, {"error": "documents must be an array of strings"})
    scores = [word_overlap(body["query"], text) for text in texts]
    order = sorted(range(len(texts)), key=lambda i: (-scores[i], i))
    if tei:
        return Reply(200, [{"index": i, "score": scores[i]} for i in order])
    top_n = body.get("top_n") or len(texts)
    results = [{"index": i, "relevance_score": scores[i]} for i in order[:top_n]]
    return Reply(200, {"results": results, "model": body.get("model", "")})


# The chat completions route: answers come from a script queued by the test.

ChatAnswer = str | dict[str, Any] | Callable[[RecordedRequest], "str | dict[str, Any]"]


def tool_call(name: str, arguments: dict[str, Any] | str, call_id: str = "") -> dict[str, Any]:
    """Return a tool call as an assistant message carries it (arguments as a JSON string)."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {
        "id": call_id or f"call_{hashlib.blake2b(text.encode(), digest_size=4).hexdigest()}",
        "type": "function",
        "function": {"name": name, "arguments": text},
    }


def assistant(content: str | None = None, tool_calls: list[dict[str, Any]] | None = None) -> dict:
    """Return an assistant message: text, tool calls, or both."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return message


def truncated(content: str) -> dict[str, Any]:
    """Return an assistant answer cut at ``max_tokens`` (``finish_reason`` ``"length"``)."""
    return {**assistant(content), "finish_reason": "length"}


def chat_completions_reply(request: RecordedRequest, server: OpenAIServer) -> Reply:
    """Answer ``POST /v1/chat/completions`` with the next queued answer, or with an echo
    of the last user message when none is queued."""
    body = request.body
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        return error_reply(400, "body must be a JSON object with a 'messages' array")
    if server.strict_messages and any(
        m.get("role") == "assistant" and "content" not in m for m in body["messages"]
    ):  # as llama-cpp-python does
        return error_reply(500, "assistant message without 'content'")
    with server._lock:
        answer = server._chat_script.popleft() if server._chat_script else None
    if answer is None:  # nothing queued: echo the last user message
        users = [m for m in body["messages"] if m.get("role") == "user"]
        answer = str(users[-1].get("content") or "") if users else ""
    if callable(answer):
        answer = answer(request)
    message = assistant(answer) if isinstance(answer, str) else dict(answer)
    finish = message.pop("finish_reason", None) or (
        "tool_calls" if message.get("tool_calls") else "stop"
    )
    if server.tokens is not None:
        return streamed(body, counted_reply(body, message, finish, server))
    words = sum(len(str(m.get("content") or "").split()) for m in body["messages"])
    completion = {
        "id": f"chatcmpl-{len(server.requests)}",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", server.models[0]),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": finish,
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": words,
            "completion_tokens": len(str(message.get("content") or "").split()),
            "total_tokens": words + len(str(message.get("content") or "").split()),
        },
    }
    return streamed(body, Reply(200, completion))


def streamed(body: dict[str, Any], reply: Reply) -> Reply:
    """Return ``reply`` as server-sent chunks (a word each) if ``body`` asks for a stream."""
    if not body.get("stream") or reply.status != 200:
        return reply
    completion = reply.body
    choice = completion["choices"][0]
    words = re.findall(r"\S+\s*|\s+", str(choice["message"].get("content") or ""))
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))

    def chunk(delta: dict[str, Any], finish: str | None, usage: Any = None) -> bytes:
        choices = [] if usage else [{"index": 0, "delta": delta, "finish_reason": finish}]
        data = {
            "id": completion["id"],
            "object": "chat.completion.chunk",
            "created": 0,
            "model": completion["model"],
            "choices": choices,
            **({"usage": usage} if usage else {}),
        }
        return f"data: {json.dumps(data)}\n\n".encode()

    def pieces() -> Iterator[bytes]:
        yield chunk({"role": "assistant", "content": ""}, None)
        for word in words:
            yield chunk({"content": word}, None)
        yield chunk({}, choice["finish_reason"])
        if include_usage:
            yield chunk({}, None, usage=completion["usage"])
        yield b"data: [DONE]\n\n"

    return Reply(200, pieces())


def counted_reply(
    body: dict[str, Any], message: dict[str, Any], finish: str, server: OpenAIServer
) -> Reply:
    """Answer as a server with a tokenizer and a chat template does: the prompt counted
    through the template, the answer cut at ``max_tokens`` (``finish_reason`` "length")."""
    count = server.tokens
    assert count is not None
    prompt = server.template_tokens + sum(
        count(str(m.get("content") or "")) + server.message_tokens for m in body["messages"]
    )
    window = server.context_window
    if window is not None and prompt >= window:  # as llama-cpp-python answers
        return error_reply(400, f"Requested tokens ({prompt}) exceed context window of {window}")
    content = str(message.get("content") or "")
    limit = body.get("max_tokens")
    if window is not None:  # the answer gets what the prompt leaves
        limit = min(limit or window, window - prompt)
    if limit is not None and count(content) > limit:
        low, high = 0, len(content)  # the longest prefix within the limit
        while low < high:
            middle = (low + high + 1) // 2
            low, high = (middle, high) if count(content[:middle]) <= limit else (low, middle - 1)
        content, finish = content[:low], "length"
        message = {**message, "content": content}
    completion = count(content)
    reply = {
        "id": f"chatcmpl-{len(server.requests)}",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", server.models[0]),
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }
    return Reply(200, reply)


def characters(text: str) -> int:
    """Count a token per character, as a small model pays for "1.0.3.4.1.1"."""
    return len(text)


def models_reply(request: RecordedRequest, server: OpenAIServer) -> Reply:
    """Answer ``GET /v1/models``."""
    data = [
        {"id": name, "object": "model", "created": 0, "owned_by": "tests"} for name in server.models
    ]
    return Reply(200, {"object": "list", "data": data})


class OpenAIServer:
    """Serve the OpenAI API on 127.0.0.1 from a background thread, recording every request.

    :param dimension: length of embedding vectors unless a request asks for ``dimensions``.
    :param models: model ids listed by ``GET /v1/models``.
    :param shuffle: return embedding items out of order (each still carries its ``index``).
    :param reject_dimensions: answer 400 to requests that send ``dimensions``, as many
        local servers do.
    :param strict_messages: answer 500 to an assistant message without ``content``, as
        llama-cpp-python does.
    :param tokens: count chat tokens with this function (e.g. :func:`characters`) and cut
        answers at the request's ``max_tokens``, as a real server does; ``None`` counts
        words and never cuts.
    :param template_tokens: with ``tokens``, what the chat template adds to each prompt
        (a default system message, the assistant header); ``message_tokens`` a message.
    :param context_window: with ``tokens``, the model's context (a llama.cpp server's
        ``--n_ctx``): a longer prompt is a 400, and an answer is cut where it fills it.
    """

    def __init__(
        self,
        dimension: int = 16,
        models: tuple[str, ...] = ("test-embedding",),
        shuffle: bool = False,
        reject_dimensions: bool = False,
        strict_messages: bool = False,
        tokens: Callable[[str], int] | None = None,
        template_tokens: int = 0,
        message_tokens: int = 0,
        context_window: int | None = None,
    ) -> None:
        self.context_window = context_window
        self.strict_messages = strict_messages
        self.tokens = tokens
        self.template_tokens = template_tokens
        self.message_tokens = message_tokens
        self.dimension = dimension
        self.models = models
        self.shuffle = shuffle
        self.reject_dimensions = reject_dimensions
        self.routes: dict[tuple[str, str], Handler] = {
            ("POST", "/v1/embeddings"): embeddings_reply,
            ("GET", "/v1/models"): models_reply,
            ("POST", "/v1/chat/completions"): chat_completions_reply,
            ("POST", "/embed"): tei_embed_reply,
            ("POST", "/v1/rerank"): rerank_reply,
            ("POST", "/rerank"): rerank_reply,
        }
        self._chat_script: deque[ChatAnswer] = deque()
        self.requests: list[RecordedRequest] = []
        self.stopping = threading.Event()
        self._faults: deque[tuple[str | None, Handler]] = deque()
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def root_url(self) -> str:
        """The server's URL without ``/v1`` (where TEI's routes are)."""
        return self.base_url.removesuffix("/v1")

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("OpenAIServer is not running; use it as a context manager.")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def add_route(self, method: str, path: str, handler: Handler) -> None:
        """Serve ``method path`` with ``handler`` (replacing any handler there)."""
        self.routes[(method.upper(), path)] = handler

    def fail_next(self, *faults: Handler, path: str | None = None) -> None:
        """Queue faults to answer the next requests (only those to ``path``, if given)."""
        with self._lock:
            self._faults.extend((path, fault) for fault in faults)

    def queue_chat(self, *answers: ChatAnswer) -> None:
        """Queue the next chat completions' answers, one per request, in order.

        An answer is the assistant's text, a message dict (see :func:`assistant`), or a
        callable taking the :class:`RecordedRequest` and returning either.
        """
        with self._lock:
            self._chat_script.extend(answers)

    def requests_to(self, path: str) -> list[RecordedRequest]:
        """Return the recorded requests to ``path``, oldest first."""
        with self._lock:
            return [request for request in self.requests if request.path == path]

    def reset(self) -> None:
        """Forget recorded requests and pending faults."""
        with self._lock:
            self.requests.clear()
            self._faults.clear()
            self._chat_script.clear()

    def route_reply(self, request: RecordedRequest) -> Reply:
        """Return the normal answer of the route ``request`` is for."""
        handler = self.routes.get((request.method, request.path))
        if handler is None:
            return error_reply(404, f"no route {request.method} {request.path}")
        return handler(request, self)

    def handle(self, request: RecordedRequest) -> Reply:
        """Record ``request`` and answer it with the next matching fault, else its route."""
        with self._lock:
            self.requests.append(request)
            fault = self._pop_fault(request.path)
        return fault(request, self) if fault else self.route_reply(request)

    def _pop_fault(self, path: str) -> Handler | None:
        for position, (fault_path, fault) in enumerate(self._faults):
            if fault_path is None or fault_path == path:
                del self._faults[position]
                return fault
        return None

    def start(self) -> OpenAIServer:
        self.stopping.clear()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _make_request_handler(self))
        self._httpd.daemon_threads = True
        # A short poll interval keeps stop(), and so every test's teardown, fast.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()  # wakes delay faults
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = self._thread = None

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def _make_request_handler(server: OpenAIServer) -> type[BaseHTTPRequestHandler]:
    class RequestHandler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._answer()

        def do_POST(self) -> None:
            self._answer()

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            path = self.path.split("?", 1)[0]
            headers = {name.lower(): value for name, value in self.headers.items()}
            reply = server.handle(RecordedRequest(self.command, path, headers, body))
            if isinstance(reply.body, Iterator):
                self._stream(reply)
                return
            payload = (
                reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
            )
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test); nothing to answer

        def _stream(self, reply: Reply) -> None:
            """Send the events one by one; the connection's close ends the stream."""
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for piece in reply.body:
                    self.wfile.write(piece)
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass
            self.close_connection = True

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output clean

    return RequestHandler
