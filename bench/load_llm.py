"""The LLM server of ``bench/load.py``'s run: a local OpenAI-compatible server whose chat
completions answer a rewriter's prompt with its question, after a pause, as a small local
model would (the tests' ``OpenAIServer``, with its chat route replaced).

    python bench/load_llm.py READY_FILE MILLISECONDS

writes its base URL to READY_FILE once it listens, and serves until SIGTERM.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.openai_server import OpenAIServer, chat_completions_reply  # noqa: E402


def serve_llm(ready: Path, delay_ms: int) -> None:
    """Answer chat completions as a small local model would: the question, after a pause."""

    def rewrite(request: Any) -> str:
        time.sleep(delay_ms / 1000)
        prompt = str(request.body["messages"][-1]["content"])
        question = prompt.rpartition("Question: ")[2].partition("\n")[0].strip()
        return question or prompt[-200:]

    server = OpenAIServer(models=("load-llm",))
    server.add_route("POST", "/v1/chat/completions", _answering(rewrite))
    with server:
        ready.write_text(server.base_url + "\n")
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        while not stop.wait(1):
            with server._lock:
                server.requests.clear()  # it would keep every request of the run


def _answering(rewrite: Callable[[Any], str]) -> Callable[[Any, Any], Any]:
    """Return a chat route answering each request with ``rewrite(request)``."""

    def reply(request: Any, server: Any) -> Any:
        server.queue_chat(rewrite)  # every queued answer is the same function of its request
        return chat_completions_reply(request, server)

    return reply


if __name__ == "__main__":
    serve_llm(Path(sys.argv[1]), int(sys.argv[2]))
