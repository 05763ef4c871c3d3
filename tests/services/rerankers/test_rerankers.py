"""Rerankers: the LLM's listwise order (with omitted and invented ids), a score function,
and a cross-encoder run on a tiny ONNX model built here (no download)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from retrieval.services.access import Scope
from retrieval.services.core.tracing import traced
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.ingest import Source, ingest
from retrieval.services.query.search import search
from retrieval.services.rerankers.cross_encoder import CrossEncoderReranker
from retrieval.services.rerankers.llm import LLMReranker
from retrieval.services.rerankers.score import ScoreReranker
from tests.support.openai_server import status_fault

pytestmark = pytest.mark.django_db
TEXTS = {
    "a": "Penguins slide on ice.",
    "b": "Volcanoes erupt lava.",
    "c": "Penguins eat fish.",
    "d": "Ice covers the pole.",
    "e": "Deserts are dry.",
}
WEIGHTS = {"penguins": 2.0, "ice": 1.0, "fish": 0.5}


@pytest.fixture
def results(keyword_settings):
    collection, _ = get_or_create_collection("nature")
    ingest(collection, [Source.from_text(t, external_id=k) for k, t in TEXTS.items()])
    found = search(
        "penguins ice volcanoes deserts pole fish",
        collection=collection,
        top_k=5,
        retriever="bm25",
        scope=Scope.ALL,
    )
    assert len(found) == 5
    return list(found)


def _ids(results) -> list[str]:
    return [r.chunk.document.external_id for r in results]


def test_llm_reranker_orders_scores_and_keeps_omitted_passages(llm_server, results):
    before = _ids(results)
    # The model ranks passages 3 and 1 (1 as 1.0, a JSON Schema integer), repeats 3 and
    # invents 17 (negative ids are refused by the schema).
    llm_server.queue_chat(json.dumps({"ranking": [3, 1.0, 3, 17]}))
    with traced() as trace:
        reranked = LLMReranker().rerank("question", results, top_k=4)
    expected = [before[3], before[1], *(x for i, x in enumerate(before) if i not in (1, 3))]
    assert _ids(reranked) == expected[:4]
    assert [r.score for r in reranked] == [1.0, 0.8, 0.6, 0.4]  # 1 - rank / 5
    assert [r.rank for r in reranked] == [0, 1, 2, 3]
    assert reranked[0].metadata["original_score"] == results[3].score
    (event,) = trace.events
    assert event["ranked_by_model"] == 2 and event["ignored_ids"] == [3, 17]
    prompt = llm_server.requests_to("/v1/chat/completions")[0].body["messages"][-1]["content"]
    assert "[0] " in prompt and "Question: question" in prompt


def test_llm_reranker_keeps_the_order_when_the_model_fails(llm_server, results):
    llm_server.fail_next(*[status_fault(500)] * 3, path="/v1/chat/completions")
    with traced() as trace:
        reranked = LLMReranker().rerank("question", results)
    assert _ids(reranked) == _ids(results)
    assert "failed" in trace.events[0]["error"]


def test_score_reranker_takes_any_function(results):
    def longest(query: str, text: str) -> float:
        return len(text)

    reranked = ScoreReranker(function=longest).rerank("q", results, top_k=2)
    assert [r.chunk.content for r in reranked] == [
        "Penguins slide on ice.",
        "Volcanoes erupt lava.",
    ]
    assert reranked[0].metadata["raw_score"] == 22.0 and reranked[0].score == 1.0
    with pytest.raises(ValueError, match="cannot import"):
        ScoreReranker(function="nowhere.nothing")
    with pytest.raises(ValueError, match="top_k"):
        ScoreReranker(function=longest).rerank("q", results, top_k=0)


def build_cross_encoder(folder: Path) -> dict[str, int]:
    """Write a tiny cross-encoder: the logit is the sum of per-word weights over the pair."""
    import onnx
    from onnx import TensorProto, helper
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    words = [
        "[UNK]",
        "[CLS]",
        "[SEP]",
        *sorted({w.strip(".").lower() for t in TEXTS.values() for w in t.split()}),
    ]
    vocab = {word: i for i, word in enumerate(words)}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 1), ("[SEP]", 2)],
    )
    tokenizer.save(str(folder / "tokenizer.json"))
    weights = np.zeros((len(words), 1), dtype=np.float32)
    for word, weight in WEIGHTS.items():
        weights[vocab[word], 0] = weight
    graph = helper.make_graph(
        [
            helper.make_node("Gather", ["weights", "input_ids"], ["per_token"]),
            helper.make_node("Cast", ["attention_mask"], ["mask"], to=TensorProto.FLOAT),
            helper.make_node("Unsqueeze", ["mask", "axis2"], ["mask3"]),
            helper.make_node("Mul", ["per_token", "mask3"], ["masked"]),
            helper.make_node("ReduceSum", ["masked", "axis1"], ["logits"], keepdims=0),
        ],
        "tiny_cross_encoder",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "tokens"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "tokens"]),
        ],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1])],
        initializer=[
            helper.make_tensor("weights", TensorProto.FLOAT, weights.shape, weights.ravel()),
            helper.make_tensor("axis2", TensorProto.INT64, [1], [2]),
            helper.make_tensor("axis1", TensorProto.INT64, [1], [1]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(folder / "model.onnx"))
    return vocab


@pytest.fixture
def cross_encoder_dir(tmp_path) -> Path:
    build_cross_encoder(tmp_path)
    return tmp_path


def test_cross_encoder_scores_pairs_in_batches(cross_encoder_dir, results):
    reranker = CrossEncoderReranker(model_dir=cross_encoder_dir, batch_size=2)
    reranked = reranker.rerank("which animal?", results)
    # Logits: penguins 2 + ice 1 = 3, penguins + fish = 2.5, ice = 1, the others 0.
    assert [r.chunk.content for r in reranked[:3]] == [TEXTS["a"], TEXTS["c"], TEXTS["d"]]
    assert [r.metadata["raw_score"] for r in reranked[:3]] == [3.0, 2.5, 1.0]
    assert [r.score for r in reranked[:3]] == [1.0, 2.5 / 3, 1 / 3]  # min-max over 3 .. 0
    one_batch = CrossEncoderReranker(model_dir=cross_encoder_dir, batch_size=16)
    texts = [r.chunk.content for r in results]
    np.testing.assert_allclose(
        reranker.score_pairs("q", texts), one_batch.score_pairs("q", texts)
    )  # padding to each batch's longest pair changes nothing


def test_cross_encoder_candidate_cap_and_time_budget(cross_encoder_dir, results):
    capped = CrossEncoderReranker(model_dir=cross_encoder_dir, max_candidates=2)
    with traced() as trace:
        reranked = capped.rerank("q", results)
    assert trace.events[0]["scored"] == 2 and trace.events[0]["unscored"] == 3
    top_two = sorted(
        results[:2], key=lambda r: -(WEIGHTS.get(r.chunk.content.split()[0].lower(), 0))
    )
    assert {r.chunk_id for r in reranked[:2]} == {r.chunk_id for r in top_two}
    assert [r.chunk_id for r in reranked[2:]] == [r.chunk_id for r in results[2:]]  # kept order
    hurried = CrossEncoderReranker(model_dir=cross_encoder_dir, batch_size=2, time_budget=1e-9)
    with traced() as trace:
        hurried.rerank("q", results)
    assert trace.events[0]["scored"] == 2  # one batch, then the budget is spent


def test_cross_encoder_reports_a_missing_model(tmp_path, results):
    reranker = CrossEncoderReranker(model_dir=tmp_path)
    assert reranker.check()[0].id == "retrieval.E013"
    with pytest.raises(Exception, match="No model.onnx"):
        reranker.rerank("q", results)


def test_llm_reranker_reads_integer_valued_floats(llm_server, results):
    # Issue 37: {"ranking": [1.0, 0.0]} passes the schema's integer check (JSON Schema counts
    # 1.0 as an integer); indexing the passages with it was a TypeError, and a 500.
    before = _ids(results)
    llm_server.queue_chat('{"ranking": [1.0, 0.0]}')
    reranked = LLMReranker().rerank("question", results)
    assert _ids(reranked) == [before[1], before[0], *before[2:]]


def test_score_reranker_keeps_its_own_top_k_unless_the_call_says(results):
    """The design's ScoreReranker(top_k=...) was refused as an unknown option."""

    def length(query: str, text: str) -> float:
        return len(text)

    reranker = ScoreReranker(function=length, top_k=2)
    assert len(reranker.rerank("q", results)) == 2
    assert len(reranker.rerank("q", results, top_k=4)) == 4
    with pytest.raises(ValueError, match="top_k"):
        ScoreReranker(function=length, top_k=0)
