"""Every chunker of the app through the public suite (retrieval.testing.chunkers), small sizes."""

from __future__ import annotations

from retrieval.services.chunkers.character import CharacterChunker
from retrieval.services.chunkers.paragraph import ParagraphChunker
from retrieval.services.chunkers.recursive import RecursiveChunker
from retrieval.services.chunkers.token import TokenChunker
from retrieval.services.chunkers.whole import WholeChunker
from retrieval.services.types import ChunkSpan
from retrieval.testing.chunkers import PROSE, ChunkerSuite

CHUNKERS = {
    "Character": lambda: CharacterChunker(size=12, overlap=0),
    "CharacterOverlap": lambda: CharacterChunker(size=12, overlap=5),
    "Paragraph": lambda: ParagraphChunker(max_chars=20),
    "ParagraphOverlap": lambda: ParagraphChunker(max_chars=30, overlap=1),
    "Token": lambda: TokenChunker(max_tokens=6, overlap=0),
    "TokenOverlap": lambda: TokenChunker(max_tokens=6, overlap=2),
    "Recursive": lambda: RecursiveChunker(max_tokens=8, min_tokens=3),
    "RecursiveOverlap": lambda: RecursiveChunker(max_tokens=8, overlap_tokens=3, min_tokens=0),
    "Whole": WholeChunker,
}

globals().update(
    {
        f"Test{name}Chunker": type(
            f"Test{name}Chunker", (ChunkerSuite,), {"make_chunker": staticmethod(make)}
        )
        for name, make in CHUNKERS.items()
    }
)


def test_prose_is_split_by_all_but_the_whole_chunker() -> None:
    for name, make in CHUNKERS.items():
        spans = make().chunk(PROSE)
        if name == "Whole":
            assert spans == [ChunkSpan(0, len(PROSE) - 1)]  # all but the final newline
        else:
            assert len(spans) > 3, name
