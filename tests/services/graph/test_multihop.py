"""A multi-hop test set from the sample documents, with the real extractor and embedder.

Each question describes one entity in words of its own glossary entry; the answer
is a fact about that entity in another chunk that shares no word with the question
(checked with the BM25 analyser: stop words out, stems compared). Dense retrieval
finds the entity's chunk but not the answer; the graph retriever reaches the answer
through the entity.
"""

from __future__ import annotations

import pytest

from retrieval.services.access import Scope
from retrieval.services.graph.extraction import extract_graph
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.ingest import Source, ingest
from retrieval.services.query.search import search
from retrieval.services.registry import analyzers

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

TOP_K = 5
# (question, the entity it describes, a phrase of the answer chunk)
MULTI_HOP = [
    (
        "What does the structure that links each node on several layers, descending from a "
        "sparse top layer, sacrifice?",
        "hnsw",
        "trades a small loss of recall for a large gain in speed",
    ),
    (
        "Which encoder has six transformer layers, trained on a billion sentence pairs, and "
        "what does it cost to use?",
        "all minilm l6 v2",
        "runs all-MiniLM-L6-v2 as an int8 ONNX model on the CPU",
    ),
    (
        "Which software computes one minus the cosine of the angle between two vectors, and "
        "how do I fix its absence?",
        "pgvector",
        "Install the pgvector package that matches your PostgreSQL major version",
    ),
]


@pytest.fixture
def handbook(retrieval_settings, sample_docs):
    retrieval_settings(
        CHUNKERS={
            "default": {
                "BACKEND": "retrieval.services.chunkers.paragraph.ParagraphChunker",
                "OPTIONS": {"max_chars": 600},
            }
        },
        RETRIEVERS={
            "graph": {
                "BACKEND": "retrieval.services.retrievers.graph.GraphRetriever",
                "OPTIONS": {"retriever": "dense", "beam_width": 3, "max_hops": 2},
            }
        },
        # Chunks embedded as they are: with their titles and headings (the default),
        # dense retrieval reaches one of these answers itself, and the set tests the graph.
        CHUNK_CONTEXT=None,
        # The set was chosen on the user guide's tables read as lines: read as rows, they
        # are other chunks, and dense retrieval's top 5 then reaches the pgvector answer.
        PARSERS={
            "pdf": {
                "BACKEND": "retrieval.services.parsers.pdf.PdfParser",
                "OPTIONS": {"tables": False},
            }
        },
    )
    collection, _ = get_or_create_collection("handbook")
    sources = [
        Source.from_path(path, external_id=path.name)
        for path in sorted(sample_docs.iterdir())
        if path.suffix != ".py"
    ]
    assert ingest(collection, sources).documents_failed == 0
    assert extract_graph(collection).status == "succeeded"
    return collection


def test_graph_retrieval_answers_what_dense_alone_cannot(handbook):
    analyse = analyzers["default"].terms
    for question, entity, answer in MULTI_HOP:
        answer_chunks = list(handbook.chunks.filter(content__contains=answer))
        assert answer_chunks, f"no chunk holds {answer!r}"
        for chunk in answer_chunks:
            assert not set(analyse(question)) & set(analyse(chunk.content)), question

        dense = search(
            question, collection=handbook, retriever="dense", top_k=TOP_K, scope=Scope.ALL
        )
        graph = search(
            question, collection=handbook, retriever="graph", top_k=TOP_K, scope=Scope.ALL
        )

        assert not any(answer in r.chunk.content for r in dense), question
        found = [r for r in graph if answer in r.chunk.content]
        assert found, f"graph missed the answer to {question!r}"
        assert found[0].metadata["graph_hop"] >= 1
        assert entity in found[0].metadata["graph_path"]
        assert found[0].chunk_id not in {r.chunk_id for r in dense}
