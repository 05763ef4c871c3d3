"""LlamaIndex and Haystack on the real-documents bench (run in bench/.venv-peers).

Each gets the app's local embedder (with the bench's vector cache) behind its own
embedding interface, and its recommended hybrid set-up; ``run_peer`` returns each
leg's file rankings per question, for ``realdocs.py`` to score.
"""

from __future__ import annotations

import sys
from html.parser import HTMLParser
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
DEPTH = 50


def app_embedder():
    import django
    from django.conf import settings

    if not settings.configured:
        settings.configure()
        django.setup()
    from cached_embedder import CachedLocalEmbedder

    return CachedLocalEmbedder()


def run_peer(
    name: str, docs: Path, questions: list[str], files: list[Path]
) -> dict[str, list[list[str]]]:
    if name.startswith("llamaindex"):
        size = int(name.split("-")[1])
        return llamaindex(docs, questions, files, size, 32 if size == 256 else 200)
    if name.startswith("haystack"):
        return haystack(docs, questions, files, int(name.split("-")[1]), 30)
    raise SystemExit(f"unknown peer {name!r}")


class _TextOfHtml(HTMLParser):
    """The text of an HTML page: tags dropped, scripts and styles left out, blocks on lines."""

    BLOCKS = frozenset("p div br li tr h1 h2 h3 h4 h5 h6 pre dt dd table ul ol dl title".split())

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.hidden = 0

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag in ("script", "style"):
            self.hidden += 1
        elif tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style"):
            self.hidden = max(0, self.hidden - 1)
        elif tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self.hidden:
            self.parts.append(data)


def html_text(path: Path) -> str:
    """Return an HTML page's text, as a peer's user would feed it (neither core reads HTML)."""
    parser = _TextOfHtml()
    parser.feed(path.read_text(encoding="utf-8", errors="replace"))
    lines = (" ".join(line.split()) for line in "".join(parser.parts).split("\n"))
    return "\n".join(line for line in lines if line)


def read_text(path: Path) -> str:
    """A file's text as the peers get it: HTML pages as their text, others as they are."""
    if path.suffix in (".html", ".htm"):
        return html_text(path)
    return path.read_text(encoding="utf-8")


def _files(paths: list[str], docs: Path) -> list[str]:
    """Collapse a chunk ranking to files (relative to docs), each at its best chunk."""
    return list(dict.fromkeys(str(Path(p).resolve().relative_to(docs.resolve())) for p in paths))


def llamaindex(
    docs: Path, questions: list[str], files: list[Path], size: int, overlap: int
) -> dict:
    from llama_index.core import Settings, SimpleDirectoryReader, VectorStoreIndex
    from llama_index.core.embeddings import BaseEmbedding
    from llama_index.core.llms import MockLLM
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.core.retrievers import QueryFusionRetriever
    from llama_index.retrievers.bm25 import BM25Retriever

    from retrieval.services.clients.tokens import get_encoding

    embedder = app_embedder()

    class AppEmbedding(BaseEmbedding):
        def _get_query_embedding(self, query: str) -> list[float]:
            return embedder.embed_query(query).tolist()

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_query_embedding(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            return embedder.embed_batch([text])[0].tolist()

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return np.asarray(embedder.embed_batch(texts)).tolist()

    Settings.llm = MockLLM()
    Settings.embed_model = AppEmbedding(model_name="all-MiniLM-L6-v2", embed_batch_size=32)
    encoding = get_encoding("cl100k_base")
    # The download is unpacked under bench/.cache: a hidden folder the reader skips by default.
    reader = SimpleDirectoryReader(input_files=[str(f) for f in files], exclude_hidden=False)
    documents = reader.load_data()
    for document in documents:  # HTML as its text, the reader's metadata kept
        if document.metadata["file_path"].endswith((".html", ".htm")):
            document.set_content(html_text(Path(document.metadata["file_path"])))
    splitter = SentenceSplitter(chunk_size=size, chunk_overlap=overlap, tokenizer=encoding.encode)
    nodes = splitter.get_nodes_from_documents(documents)
    index = VectorStoreIndex(nodes)
    dense = index.as_retriever(similarity_top_k=DEPTH)
    bm25 = BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=DEPTH)
    hybrid = QueryFusionRetriever(
        [dense, bm25],
        similarity_top_k=DEPTH,
        num_queries=1,  # no LLM-generated query variants
        mode="reciprocal_rerank",
        use_async=False,
    )
    legs = {"bm25": bm25, "dense": dense, "hybrid": hybrid}
    return {
        leg: [
            _files([n.node.metadata["file_path"] for n in retriever.retrieve(q)], docs)
            for q in questions
        ]
        for leg, retriever in legs.items()
    }


def haystack(docs: Path, questions: list[str], files: list[Path], words: int, overlap: int) -> dict:
    from haystack import Document, Pipeline, component
    from haystack.components.joiners import DocumentJoiner
    from haystack.components.preprocessors import DocumentSplitter
    from haystack.components.retrievers.in_memory import (
        InMemoryBM25Retriever,
        InMemoryEmbeddingRetriever,
    )
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    embedder = app_embedder()

    @component
    class AppDocumentEmbedder:
        @component.output_types(documents=list[Document])
        def run(self, documents: list[Document]):
            vectors = embedder.embed_batch([d.content or "" for d in documents])
            for document, vector in zip(documents, vectors, strict=True):
                document.embedding = vector.tolist()
            return {"documents": documents}

    @component
    class AppTextEmbedder:
        @component.output_types(embedding=list[float])
        def run(self, text: str):
            return {"embedding": embedder.embed_query(text).tolist()}

    sources = [Document(content=read_text(path), meta={"file_path": str(path)}) for path in files]
    splitter = DocumentSplitter(split_by="word", split_length=words, split_overlap=overlap)
    splitter.warm_up()
    chunks = splitter.run(documents=sources)["documents"]
    store = InMemoryDocumentStore()
    store.write_documents(AppDocumentEmbedder().run(chunks)["documents"])
    pipeline = Pipeline()
    pipeline.add_component("text_embedder", AppTextEmbedder())
    pipeline.add_component("dense", InMemoryEmbeddingRetriever(store, top_k=DEPTH))
    pipeline.add_component("bm25", InMemoryBM25Retriever(store, top_k=DEPTH))
    pipeline.add_component(
        "joiner", DocumentJoiner(join_mode="reciprocal_rank_fusion", top_k=DEPTH)
    )
    pipeline.connect("text_embedder.embedding", "dense.query_embedding")
    pipeline.connect("dense", "joiner")
    pipeline.connect("bm25", "joiner")
    results: dict[str, list[list[str]]] = {"bm25": [], "dense": [], "hybrid": []}
    for question in questions:
        output = pipeline.run(
            {"text_embedder": {"text": question}, "bm25": {"query": question}},
            include_outputs_from={"dense", "bm25"},
        )
        for leg, key in (("bm25", "bm25"), ("dense", "dense"), ("hybrid", "joiner")):
            found = output[key]["documents"]
            results[leg].append(_files([d.meta["file_path"] for d in found], docs))
    return results


#: The file types each peer's reader takes (``read_files``); the others have none.
PEER_READERS = {
    # SimpleDirectoryReader's default readers: MarkdownReader, DocxReader (docx2txt),
    # EpubReader (EbookLib + html2text), PDFReader (pypdf); other files as plain text.
    "llamaindex": (".md", ".rst", ".docx", ".epub", ".pdf"),
    # MarkdownToDocument, TextFileToDocument, DOCXToDocument, PyPDFToDocument.
    "haystack": (".md", ".rst", ".docx", ".pdf"),
}


def read_files(reader: str, paths: list[Path]) -> dict[str, dict]:
    """Return each file's text as a peer's reader gives it, and the seconds it took."""
    import time

    read = {"llamaindex": _llamaindex_text, "haystack": _haystack_text()}[reader]
    texts = {}
    for path in paths:
        started = time.perf_counter()
        try:
            text = read(path)
        except Exception as error:  # a reader that fails on a file: the file is lost
            texts[str(path)] = {"error": f"{type(error).__name__}: {error}"}
            continue
        texts[str(path)] = {"text": text, "seconds": time.perf_counter() - started}
    return texts


def _llamaindex_text(path: Path) -> str:
    from llama_index.core import SimpleDirectoryReader

    # A file's documents (a PDF's pages, a Markdown file's sections) joined again.
    reader = SimpleDirectoryReader(input_files=[str(path)], exclude_hidden=False)
    return "\n\n".join(document.text for document in reader.load_data())


def _haystack_text():
    from haystack.components.converters import (
        DOCXToDocument,
        MarkdownToDocument,
        PyPDFToDocument,
        TextFileToDocument,
    )

    converters = {
        ".md": MarkdownToDocument(),
        ".rst": TextFileToDocument(),
        ".docx": DOCXToDocument(),
        ".pdf": PyPDFToDocument(),
    }

    def read(path: Path) -> str:
        (document,) = converters[path.suffix].run(sources=[path])["documents"]
        return document.content or ""

    return read
