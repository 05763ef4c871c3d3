"""Run every LLM feature against a real OpenAI-compatible server (llama.cpp, vLLM, Ollama...).

    python bench/llm_features.py --llm-url http://127.0.0.1:8080/v1 [--model NAME]
        [--json-mode llama_cpp] [--timeout 60] [--api-key KEY]

It configures the LLM as ``default`` (the alias every component uses unless told
otherwise), ingests a small ``llm-features`` collection into the example project's
database, then runs, one after another: a text completion, a JSON completion, the
standalone/multi-query/decomposition/HyDE rewriters, the LLM reranker, the agentic retriever (with
the configured budget and with a tiny one), the LLM triple extractor, and a tool
loop (``tool_choice`` naming ``retrieve``). It prints what each returned and how long
it took, and exits 1 if any failed. Nothing is mocked: this is the check that the
README's LLM examples work against that server.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from common import setup_django

TEXTS = {
    "password": "To reset your password, open Settings, choose Security and click Reset "
    "password. A link valid for one hour is sent to your e-mail address.",
    "vpn": "The VPN client connects to vpn.example.com. Install it from the Software "
    "Center and sign in with your staff account.",
    "leave": "Annual leave is 25 days. Ask your manager for approval in the HR portal "
    "at least two weeks before.",
}
QUESTION = "how do I reset my password?"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--llm-url", required=True, help="server URL ending in /v1")
    parser.add_argument("--model", default="local", help="model id sent to the server")
    parser.add_argument("--json-mode", default="llama_cpp", help="OpenAIChatLLM json_mode")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per call")
    parser.add_argument("--api-key", default=None)
    args = parser.parse_args()
    setup_django()
    from django.conf import settings
    from django.test import override_settings

    options = {
        "model": args.model,
        "base_url": args.llm_url,
        "json_mode": args.json_mode,
        "timeout": args.timeout,
        "max_retries": 1,
        "cache": None,  # time every call, never a cached answer
    }
    if args.api_key:
        options["api_key"] = args.api_key
    config = {
        **getattr(settings, "RETRIEVAL", {}),
        "LLMS": {
            "default": {
                "BACKEND": "retrieval.services.llms.openai.OpenAIChatLLM",
                "OPTIONS": options,
            }
        },  # fmt: skip
        "REWRITERS": {
            "standalone": {"BACKEND": "retrieval.services.rewriters.llm.LLMQueryRewriter"},
            "multi": {
                "BACKEND": "retrieval.services.rewriters.llm.MultiQueryRewriter",
                "OPTIONS": {"n": 2},
            },
            "decompose": {"BACKEND": "retrieval.services.rewriters.llm.DecompositionRewriter"},
            "hyde": {"BACKEND": "retrieval.services.rewriters.llm.HyDEQueryRewriter"},
        },
        "RERANKERS": {"llm": {"BACKEND": "retrieval.services.rerankers.llm.LLMReranker"}},
        "EXTRACTORS": {"llm": {"BACKEND": "retrieval.services.extractors.llm.LLMTripleExtractor"}},
    }
    with override_settings(RETRIEVAL=config):
        return run_all(args)


def run_all(args: argparse.Namespace) -> int:
    from retrieval.services.ingestion.collections import get_or_create_collection
    from retrieval.services.ingestion.ingest import Source, ingest

    collection, _ = get_or_create_collection("llm-features")
    ingest(collection, [Source.from_text(t, external_id=k) for k, t in TEXTS.items()])
    print(f"LLM {args.model!r} at {args.llm_url} (json_mode={args.json_mode})\n")
    failed = [name for name, feature in features(collection) if not report(name, feature)]
    print(f"\n{len(failed)} failed" + (f": {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


def report(name: str, feature: Callable[[], Any]) -> bool:
    """Run one feature, print what it returned and how long it took; return success."""
    started = time.monotonic()
    try:
        value = feature()
    except Exception as e:  # a failing feature is reported, the others still run
        print(f"FAIL {name} ({time.monotonic() - started:.2f} s): {e.__class__.__name__}: {e}")
        return False
    shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    print(f"ok   {name} ({time.monotonic() - started:.2f} s): {shown[:300]}")
    return True


def features(collection: Any) -> list[tuple[str, Callable[[], Any]]]:
    from retrieval.services.access import Scope
    from retrieval.services.core.tracing import Budget, traced
    from retrieval.services.graph.extraction import extract_graph
    from retrieval.services.query.search import search
    from retrieval.services.registry import llms, rewriters

    ask = [{"role": "user", "content": "Name one colour of the sky. Answer in one word."}]
    score = {
        "type": "object",
        "properties": {"score": {"type": "number", "minimum": 0, "maximum": 1}},
        "required": ["score"],
    }
    history = [{"role": "user", "content": "I forgot my password."}]

    def rewrite(alias: str) -> Callable[[], Any]:
        def run() -> Any:
            result = rewriters[alias].rewrite(
                "how do I change it?", collection=collection, history=history
            )
            if result.fallback:
                raise RuntimeError(f"fell back to the original query: {result.reason}")
            return list(result.queries)

        return run

    def searched(**options: Any) -> Callable[[], Any]:
        def run() -> Any:
            results = search(QUESTION, collection=collection, top_k=2, scope=Scope.ALL, **options)
            calls = results.trace["llm_calls"]
            if not results:
                raise RuntimeError("no results")
            budget = results.trace["budget"]
            if budget["max_tokens"] is not None and budget["tokens"] > budget["max_tokens"]:
                raise RuntimeError(f"spent {budget['tokens']} of {budget['max_tokens']} tokens")
            return {
                "results": [r.chunk.document.external_id for r in results],
                "llm_calls": [(c["purpose"], c.get("error") or "ok") for c in calls],
            }

        return run

    def tiny_budget() -> Any:
        with traced(Budget(max_tokens=100)):
            return searched(retriever="agentic")()

    def rewrite_budget() -> Any:
        with traced(Budget(max_tokens=100)):
            return searched(rewriter="standalone")()

    def extraction() -> Any:
        run = extract_graph(collection, extractor="llm")
        if run.documents_failed:
            raise RuntimeError(f"{run.message}; first error: {run.errors[0]['error']}")
        return run.message

    return [
        ("complete", lambda: llms["default"].complete(ask, purpose="bench").text),
        ("complete_json", lambda: llms["default"].complete_json(ask, schema=score)),
        ("rewriter standalone", rewrite("standalone")),
        ("rewriter multi_query", rewrite("multi")),
        ("rewriter decompose", rewrite("decompose")),
        ("rewriter hyde", rewrite("hyde")),
        ("reranker llm", searched(reranker="llm")),
        ("retriever agentic", searched(retriever="agentic")),
        ("retriever agentic, LLM_BUDGET max_tokens=100", tiny_budget),
        ("rewritten search, LLM_BUDGET max_tokens=100", rewrite_budget),
        ("extractor llm (retrieval_extract_graph)", extraction),
        ("tool loop (tool_choice: retrieve)", lambda: tool_loop(collection)),
    ]


def tool_loop(collection: Any) -> Any:
    """Run the README's tool loop once with ``tool_choice`` naming ``retrieve``."""
    from retrieval.services.access import Scope
    from retrieval.services.registry import llms
    from retrieval.services.tools import assistant_message, collection_tools, run_tool_call

    llm = llms["default"]
    client = llm._get_client()
    tools = collection_tools(collection, scope=Scope.ALL)
    messages: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
    reply = client.chat.completions.create(
        model=llm.model,
        messages=messages,
        tools=[t.spec for t in tools],
        tool_choice=tools[0].choice,
    )
    message = reply.choices[0].message
    if not message.tool_calls:
        raise RuntimeError(f"no tool call; the model answered {message.content!r}")
    messages.append(assistant_message(message))
    messages.extend(run_tool_call(tools, call) for call in message.tool_calls)
    final = client.chat.completions.create(model=llm.model, messages=messages)
    calls = [(c.function.name, c.function.arguments) for c in message.tool_calls]
    return {"tool_calls": calls, "answer": final.choices[0].message.content}


if __name__ == "__main__":
    sys.exit(main())
