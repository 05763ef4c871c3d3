"""Context packing on in-memory results: budgets, merging, sentence cuts, citations."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.models import Chunk, Document
from retrieval.services.clients.tokens import count_tokens
from retrieval.services.query.packing import pack_context, sentence_boundaries
from retrieval.services.types import RetrievalResult

_ids = iter(range(1, 10**9))


def document(content: str, external_id: str = "doc", title: str = "") -> Document:
    return Document(pk=next(_ids), external_id=external_id, title=title, content=content)


def chunks_of(doc: Document, *spans: tuple[int, int], page: int | None = None) -> list[Chunk]:
    return [
        Chunk(
            pk=next(_ids),
            document=doc,
            index=index,
            content=doc.content[start:end],
            start=start,
            end=end,
            page=page,
            heading_path=[],
            token_count=count_tokens(doc.content[start:end]),
        )
        for index, (start, end) in enumerate(spans)
    ]


def results(*scored: tuple[Chunk, float]) -> list[RetrievalResult]:
    return [RetrievalResult(chunk=c, score=s, rank=r) for r, (c, s) in enumerate(scored)]


NORTH = document("North is up. The map says so.\n\nEast is right. The sun rises there.", "n")
NORTH_CHUNKS = chunks_of(NORTH, (0, 29), (31, 45), (46, 66))
WEST = document("West is left.", "w", title="West")
WEST_CHUNK = chunks_of(WEST, (0, 13), page=2)[0]


def test_results_carry_their_token_count():
    (result,) = results((WEST_CHUNK, 1.0))
    assert result.token_count == count_tokens("West is left.") == 4
    assert result.to_dict()["token_count"] == 4


def test_everything_fits_in_score_order_with_neighbours_merged():
    a, b, c = NORTH_CHUNKS
    packed = pack_context(results((c, 0.9), (WEST_CHUNK, 0.8), (a, 0.7)), max_tokens=1000)
    assert packed.text == (
        "[1] n\nThe sun rises there.\n\n[2] West, page 2\nWest is left.\n\n"
        "[3] n\nNorth is up. The map says so."
    )
    # b joins c (consecutive indexes) and a (touching offsets would also do): one passage.
    packed = pack_context(results((c, 0.9), (WEST_CHUNK, 0.8), (a, 0.7), (b, 0.6)), max_tokens=1000)
    assert packed.text == (
        "[1] n\nNorth is up. The map says so.\nEast is right.\nThe sun rises there.\n\n"
        "[2] West, page 2\nWest is left."
    )
    first, second = packed.citations
    assert (first.number, first.external_id, first.start, first.end) == (1, "n", 0, 66)
    assert first.chunk_ids == (a.pk, b.pk, c.pk)
    assert (second.title, second.page, second.start, second.end) == ("West", 2, 0, 13)
    assert packed.results_used == 4 and packed.token_count == count_tokens(packed.text)


def test_a_chunk_that_does_not_fit_is_cut_at_a_sentence_end_or_left_out():
    a = NORTH_CHUNKS[0]
    whole = count_tokens("[1] n\nNorth is up. The map says so.")
    first_sentence = count_tokens("[1] n\nNorth is up.")
    assert pack_context(results((a, 1.0)), max_tokens=whole).text.endswith("says so.")
    cut = pack_context(results((a, 1.0)), max_tokens=whole - 1)
    assert cut.text == "[1] n\nNorth is up." and cut.token_count == first_sentence
    assert (cut.citations[0].start, cut.citations[0].end) == (0, 12)
    nothing = pack_context(results((a, 1.0)), max_tokens=first_sentence - 1)
    assert nothing.text == "" and nothing.citations == () and nothing.results_used == 0


def test_a_smaller_result_still_fits_after_a_larger_one_did_not():
    long = document("One long sentence, with no end in sight, on and on", "l")
    (long,) = chunks_of(long, (0, 50))
    budget = count_tokens("[1] West, page 2\nWest is left.")
    packed = pack_context(results((long, 0.9), (WEST_CHUNK, 0.5)), max_tokens=budget)
    assert packed.text == "[1] West, page 2\nWest is left." and packed.results_used == 1


def test_overlapping_chunks_are_not_repeated():
    doc = document("One two. Three four. Five six.")
    first, second = chunks_of(doc, (0, 20), (9, 30))
    packed = pack_context(results((first, 1.0), (second, 0.5)), max_tokens=100)
    assert packed.text == "[1] doc\nOne two. Three four. Five six."
    assert (packed.citations[0].start, packed.citations[0].end) == (0, 30)


def test_a_chunk_given_twice_is_packed_once():
    a = NORTH_CHUNKS[0]
    packed = pack_context(results((a, 0.9), (a, 0.5)), max_tokens=100)
    assert packed.text == "[1] n\nNorth is up. The map says so." and packed.results_used == 1
    assert packed.citations[0].chunk_ids == (a.pk,)


def test_bad_budget():
    with pytest.raises(ValueError, match="max_tokens must be a positive integer"):
        pack_context([], max_tokens=0)


def test_sentence_boundaries():
    assert sentence_boundaries('He said "go." Then left! Why? 終わり。次\nnext') == [
        13,
        24,
        29,
        34,
        35,  # a line break ends a sentence (headings, list items)
    ]


sentences = st.lists(
    st.text(st.sampled_from("abc xyz€"), min_size=1, max_size=12).map(lambda s: s.strip() or "w"),
    min_size=1,
    max_size=6,
).map(lambda words: ". ".join(words) + ".")


@settings(max_examples=150, deadline=None)
@given(
    texts=st.lists(
        st.lists(st.tuples(sentences, st.booleans()), min_size=1, max_size=4),
        min_size=1,
        max_size=3,
    ),
    picks=st.lists(st.tuples(st.integers(0, 20), st.floats(0, 1)), max_size=10),
    max_tokens=st.integers(1, 80),
)
def test_never_over_budget_never_mid_sentence(texts, picks, max_tokens):
    """Chunks are runs of sentences; some overlap the chunk before by one part."""
    chunks = []
    for number, parts in enumerate(texts):
        content = " ".join(text for text, _ in parts)
        spans, offset, previous = [], 0, 0
        for text, overlaps in parts:
            spans.append((previous if overlaps else offset, offset + len(text)))
            previous, offset = offset, offset + len(text) + 1
        chunks.extend(chunks_of(document(content, f"d{number}"), *spans))
    chosen = {chunks[i % len(chunks)].pk: (chunks[i % len(chunks)], s) for i, s in picks}
    packed = pack_context(results(*chosen.values()), max_tokens=max_tokens)
    assert packed.token_count == count_tokens(packed.text) <= max_tokens
    blocks = packed.text.split("\n\n") if packed.text else []
    assert len(blocks) == len(packed.citations)
    for citation, block in zip(packed.citations, blocks, strict=True):
        content = next(c.document.content for c in chunks if c.pk == citation.chunk_ids[0])
        span = content[citation.start : citation.end]
        # Cuts fall only at sentence boundaries; whole chunks end with their sentence.
        assert span.endswith(".") and (citation.start == 0 or content[citation.start - 2] == ".")
        header, body = block.split("\n", 1)
        assert header == f"[{citation.number}] {citation.external_id}"
        # The passage is the document's text, with the gaps between chunks as line breaks.
        assert body.replace("\n", " ") == span
