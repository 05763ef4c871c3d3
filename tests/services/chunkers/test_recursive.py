"""RecursiveChunker: structure first, merging, sections, overlap and the budget."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from retrieval.services.chunkers.recursive import RecursiveChunker
from retrieval.services.clients import tokens
from retrieval.services.clients.tokens import count_tokens
from retrieval.services.types import Section
from retrieval.testing.chunkers import (
    PROPERTY_SETTINGS,
    assert_contract,
    assert_within_tokens,
    texts,
    texts_with_sections,
)

MARKDOWN = (
    "# Cats\n\nCats sleep most of the day. They purr when they are happy.\n\n"
    "Cats hunt mice at night. They move very quietly.\n\n"
    "# Dogs\n\nDogs bark at strangers. Dogs fetch sticks happily."
)
DOGS = MARKDOWN.index("# Dogs")
MARKDOWN_SECTIONS = (
    Section(0, DOGS, heading_path=("Cats",)),
    Section(DOGS, len(MARKDOWN), heading_path=("Dogs",)),
)


def texts_of(text: str, chunker: RecursiveChunker, sections: tuple[Section, ...] = ()) -> list[str]:
    return [text[span.start : span.end] for span in chunker.chunk(text, sections=sections)]


def test_sections_and_paragraphs_split_before_sentences() -> None:
    # Each paragraph fits in 24 tokens (2, 16, 12, 2 and 11), two of them do not.
    assert texts_of(MARKDOWN, RecursiveChunker(max_tokens=24, min_tokens=0), MARKDOWN_SECTIONS) == [
        "# Cats\n\nCats sleep most of the day. They purr when they are happy.",
        "Cats hunt mice at night. They move very quietly.",
        "# Dogs\n\nDogs bark at strangers. Dogs fetch sticks happily.",
    ]


def test_a_section_boundary_ends_a_chunk_even_when_the_next_text_would_fit() -> None:
    # Without sections the second Cats paragraph and the whole Dogs section fit in 28 tokens.
    chunker = RecursiveChunker(max_tokens=28, min_tokens=0)
    assert texts_of(MARKDOWN, chunker)[1] == (
        "Cats hunt mice at night. They move very quietly.\n\n# Dogs\n\n"
        "Dogs bark at strangers. Dogs fetch sticks happily."
    )
    assert texts_of(MARKDOWN, chunker, MARKDOWN_SECTIONS)[1:] == [
        "Cats hunt mice at night. They move very quietly.",
        "# Dogs\n\nDogs bark at strangers. Dogs fetch sticks happily.",
    ]


def test_a_chunk_runs_on_into_a_section_that_continues_the_one_before() -> None:
    # A PDF's page turned inside one part: the page is a section (for its number), not a break.
    text = "Cats sleep most of the day.\n\nThey purr when they are happy."
    turn = text.index("They")
    pages = (
        Section(0, turn - 2, page=1, heading_path=("Cats",)),
        Section(turn, len(text), page=2, heading_path=("Cats",), continues=True),
    )
    chunker = RecursiveChunker(max_tokens=64, min_tokens=0)
    assert texts_of(text, chunker, pages) == [text]
    apart = (pages[0], Section(turn, len(text), page=2, heading_path=("Cats",)))
    assert texts_of(text, chunker, apart) == [text[: turn - 2], text[turn:]]


def test_text_outside_sections_is_chunked_on_its_own() -> None:
    text = "Preface text.\n\nBody of the one section."
    body = text.index("Body")
    spans = texts_of(text, RecursiveChunker(max_tokens=64), (Section(body, len(text)),))

    assert spans == ["Preface text.", "Body of the one section."]


def test_lines_split_before_sentences() -> None:
    text = "Rain fell all day.\nThe river rose quickly. By night the bridge was closed!"
    # Lines of 5 and 12 tokens. Splitting at sentences first would instead give
    # "Rain fell all day.\nThe river rose quickly." (10) and the last sentence.
    assert texts_of(text, RecursiveChunker(max_tokens=12, min_tokens=0)) == [
        "Rain fell all day.",
        "The river rose quickly. By night the bridge was closed!",
    ]


def test_sentences_split_before_words() -> None:
    text = (
        "Rain fell all day. The river rose quickly. By night the bridge was closed! "
        "Nobody crossed it."
    )
    assert texts_of(text, RecursiveChunker(max_tokens=6, min_tokens=0)) == [
        "Rain fell all day.",
        "The river rose quickly.",
        "By night the bridge was",
        "closed!",
        "Nobody crossed it.",
    ]


def test_words_split_before_tokens() -> None:
    text = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu"
    # Plain 6-token windows would cut "zeta" into "z" and "eta".
    assert texts_of(text, RecursiveChunker(max_tokens=6, min_tokens=0)) == [
        "alpha beta gamma delta epsilon",
        "zeta eta theta iota kappa",
        "lambda mu",
    ]


def test_a_word_over_budget_falls_back_to_token_windows() -> None:
    word = "supercalifragilisticexpialidocious" * 4
    spans = RecursiveChunker(max_tokens=8, min_tokens=0).chunk(f"Tiny. {word}")

    assert [(span.start, span.end) for span in spans][0] == (0, 5)
    assert "".join(f"Tiny. {word}"[span.start : span.end] for span in spans[1:]) == word
    assert all(count_tokens(f"Tiny. {word}"[span.start : span.end]) <= 8 for span in spans)


def test_chunks_under_min_tokens_join_a_neighbour_that_fits() -> None:
    text = "One. Two three four five six seven eight nine ten eleven twelve. End."
    assert texts_of(text, RecursiveChunker(max_tokens=8, min_tokens=0))[-2:] == [
        "ten eleven twelve.",
        "End.",
    ]
    assert texts_of(text, RecursiveChunker(max_tokens=8, min_tokens=4))[-1] == (
        "ten eleven twelve. End."
    )


def test_min_tokens_joins_only_chunks_under_it() -> None:
    text = (
        "Cats sleep.\n\nDogs bark.\n\n"
        "Birds sing at dawn. Owls hunt quietly through the long and very dark night."
    )
    # Chunks of 8, 6 and 13 tokens; the first two would fit together in 16.
    assert texts_of(text, RecursiveChunker(max_tokens=16, min_tokens=6)) == [
        "Cats sleep.\n\nDogs bark.",
        "Birds sing at dawn.",
        "Owls hunt quietly through the long and very dark night.",
    ]
    assert texts_of(text, RecursiveChunker(max_tokens=16, min_tokens=7))[0] == (
        "Cats sleep.\n\nDogs bark.\n\nBirds sing at dawn."
    )


def test_overlap_prepends_the_tail_of_the_previous_chunk() -> None:
    text = " ".join(["the cat sat on the mat."] * 4)
    assert texts_of(text, RecursiveChunker(max_tokens=16, overlap_tokens=4, min_tokens=0)) == [
        "the cat sat on the mat.",
        "on the mat. the cat sat on the mat.",
        "on the mat. the cat sat on the mat.",
        "on the mat. the cat sat on the mat.",
    ]


def test_overlap_never_reaches_into_the_previous_section() -> None:
    chunker = RecursiveChunker(max_tokens=24, overlap_tokens=6, min_tokens=0)
    spans = chunker.chunk(MARKDOWN, sections=MARKDOWN_SECTIONS)

    assert spans[-1].start == DOGS
    assert spans[1].start < spans[0].end  # the two chunks of "Cats" do overlap


@PROPERTY_SETTINGS
@given(
    text_and_sections=texts_with_sections(),
    max_tokens=st.integers(4, 16),
    data=st.data(),
)
def test_no_chunk_crosses_a_section_boundary(
    text_and_sections: tuple[str, tuple[Section, ...]], max_tokens: int, data: st.DataObject
) -> None:
    text, sections = text_and_sections
    overlap_tokens = data.draw(st.integers(0, max_tokens - 1))
    min_tokens = data.draw(st.integers(0, max_tokens))
    chunker = RecursiveChunker(
        max_tokens=max_tokens, overlap_tokens=overlap_tokens, min_tokens=min_tokens
    )
    spans = chunker.chunk(text, sections=sections)

    assert_contract(text, spans, may_overlap=overlap_tokens > 0)
    assert_within_tokens(text, spans, max_tokens)
    boundaries = {offset for section in sections for offset in (section.start, section.end)}
    for span in spans:
        crossed = [offset for offset in boundaries if span.start < offset < span.end]
        assert not crossed, f"{span} crosses section boundaries at {crossed}"


@PROPERTY_SETTINGS
@given(text=texts, max_tokens=st.integers(4, 16), data=st.data())
def test_overlap_shares_at_most_overlap_tokens(
    text: str, max_tokens: int, data: st.DataObject
) -> None:
    overlap_tokens = data.draw(st.integers(1, max_tokens - 1))
    spans = RecursiveChunker(max_tokens=max_tokens, overlap_tokens=overlap_tokens).chunk(text)

    for previous, span in pairwise(spans):
        if span.start < previous.end:
            assert count_tokens(text[span.start : previous.end]) <= overlap_tokens


def test_a_long_document_keeps_the_contract_and_the_budget() -> None:
    paragraph = "A sentence about retrieval and chunking. " * 30
    text = "\n\n".join(f"## Part {number}\n\n{paragraph}" for number in range(40))
    spans = RecursiveChunker().chunk(text)

    assert_contract(text, spans, may_overlap=False)
    assert_within_tokens(text, spans, 256)
    assert min(count_tokens(text[span.start : span.end]) for span in spans) >= 32


def test_constructor_does_not_load_the_encoding(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(name: str) -> None:
        raise AssertionError(f"loaded {name}")

    monkeypatch.setattr(tokens, "get_encoding", fail)
    chunker = RecursiveChunker(encoding="o200k_base")

    with pytest.raises(AssertionError, match="loaded o200k_base"):
        chunker.chunk("now it loads")


def test_a_section_outside_the_text_is_a_value_error() -> None:
    with pytest.raises(ValueError, match=r"Section\(start=3, end=99.* <= 10\)"):
        RecursiveChunker().chunk("0123456789", sections=(Section(3, 99),))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_tokens": 0}, "max_tokens must be an integer of at least 4, got 0"),
        ({"max_tokens": 8, "overlap_tokens": 8}, r"overlap_tokens .* \(7\), got 8"),
        ({"overlap_tokens": -1}, "overlap_tokens must be .* got -1"),
        ({"min_tokens": -1}, "min_tokens must be a non-negative integer, got -1"),
        ({"min_tokens": 2.0}, "min_tokens must be a non-negative integer, got 2.0"),
        ({"encoding": "gpt5"}, "encoding must be one of .* got 'gpt5'"),
    ],
)
def test_bad_options_raise_value_error(options: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RecursiveChunker(**options)  # type: ignore[arg-type]


GUIDE = (
    "User guide\n\n2. Installation\n\nRequirements\n\n"
    "You need Python 3.11 and PostgreSQL with pgvector. Install the package with pip.\n\n"
    "Upgrading\n\nRun the migrations after every upgrade."
)


def guide_sections(text: str = GUIDE) -> tuple[Section, ...]:
    starts = [text.index(h) for h in ("User guide", "2. Installation", "Requirements", "Upgrading")]
    paths = [
        ("User guide",),
        ("User guide", "2. Installation"),
        ("User guide", "2. Installation", "Requirements"),
        ("User guide", "2. Installation", "Upgrading"),
    ]
    ends = [*starts[1:], len(text)]
    return tuple(
        Section(start, end, heading_path=path)
        for start, end, path in zip(starts, ends, paths, strict=True)
    )


def test_a_section_that_is_only_its_heading_starts_the_next_chunk() -> None:
    chunks = texts_of(GUIDE, RecursiveChunker(max_tokens=64, min_tokens=0), guide_sections())
    assert chunks == [
        "User guide\n\n2. Installation\n\nRequirements\n\n"
        "You need Python 3.11 and PostgreSQL with pgvector. Install the package with pip.",
        "Upgrading\n\nRun the migrations after every upgrade.",
    ]


def test_a_leading_heading_makes_room_by_splitting_the_text_after_it() -> None:
    # "Requirements" and its paragraph fill 20 tokens: the two headings before them
    # need the paragraph split for the first chunk to stay within budget.
    chunker = RecursiveChunker(max_tokens=20, min_tokens=0)
    chunks = texts_of(GUIDE, chunker, guide_sections())
    assert chunks[0].startswith("User guide\n\n2. Installation\n\nRequirements\n\nYou need")
    assert all(count_tokens(chunk) <= 20 for chunk in chunks)
    assert not any(chunk in ("User guide", "2. Installation") for chunk in chunks)
    assert "".join(chunks).replace("\n", "").replace(" ", "") == GUIDE.replace("\n", "").replace(
        " ", ""
    )


def test_headings_at_the_end_of_the_text_are_kept() -> None:
    text = "Intro\n\nSome text here.\n\nAppendix"
    sections = (
        Section(0, text.index("Appendix"), heading_path=("Intro",)),
        Section(text.index("Appendix"), len(text), heading_path=("Appendix",)),
    )
    assert texts_of(text, RecursiveChunker(min_tokens=0), sections) == [
        "Intro\n\nSome text here.",
        "Appendix",
    ]


@st.composite
def texts_with_headings(draw: st.DrawFn) -> tuple[str, tuple[Section, ...]]:
    """Return text whose sections each start with a heading line; some hold only it."""
    parts, sections, offset = [], [], 0
    for number in range(draw(st.integers(1, 6))):
        heading = draw(st.sampled_from(["Intro", "2. Installation", "Notes on cats", "x" * 40]))
        body = draw(st.one_of(st.just(""), texts))
        part = f"{heading}\n\n{body}" if body else heading
        sections.append(Section(offset, offset + len(part), heading_path=(f"{number}", heading)))
        parts.append(part)
        offset += len(part) + 2
    return "\n\n".join(parts), tuple(sections)


@PROPERTY_SETTINGS
@given(text_and_sections=texts_with_headings(), max_tokens=st.integers(4, 24), data=st.data())
def test_no_chunk_is_a_bare_heading_unless_nothing_follows_it(
    text_and_sections: tuple[str, tuple[Section, ...]], max_tokens: int, data: st.DataObject
) -> None:
    text, sections = text_and_sections
    overlap_tokens = data.draw(st.integers(0, max_tokens - 1))
    chunker = RecursiveChunker(
        max_tokens=max_tokens,
        overlap_tokens=overlap_tokens,
        min_tokens=data.draw(st.integers(0, max_tokens)),
    )
    spans = chunker.chunk(text, sections=sections)

    assert_contract(text, spans, may_overlap=overlap_tokens > 0)
    assert_within_tokens(text, spans, max_tokens)
    bare = {(section.start, section.start + len(section.heading_path[-1])) for section in sections}
    first_of_run = 0
    for number, section in enumerate(sections):
        heading_end = section.start + len(section.heading_path[-1])
        if not text[heading_end : section.end].strip():
            continue  # a bare heading: it leads the next section with text
        body = heading_end + len(text[heading_end:]) - len(text[heading_end:].lstrip())
        leading = text[sections[first_of_run].start : body]
        # Chunks are built within max_tokens - overlap_tokens; that must leave room for
        # the headings and the space after them, and 4 tokens (the longest character).
        if count_tokens(leading) + 5 <= max_tokens - overlap_tokens:
            run = sections[first_of_run : number + 1]
            starts = {(s.start, s.start + len(s.heading_path[-1])) for s in run}
            assert not starts & {(span.start, span.end) for span in spans}, leading
        first_of_run = number + 1
    assert bare  # (every section has a heading)


NOTES = "1.2\n\nFixed a crash.\n\n1.1\n\nAdded sessions.\n\n1.0\n\n" + "First release. " * 20
NOTES_SECTIONS = tuple(
    Section(start, end, heading_path=(title,))
    for title, start, end in (
        ("1.2", 0, NOTES.index("1.1")),
        ("1.1", NOTES.index("1.1"), NOTES.index("1.0")),
        ("1.0", NOTES.index("1.0"), len(NOTES)),
    )
)


def test_short_sections_are_packed_together_while_they_fit() -> None:
    # Each section alone is a chunk; packed, the two short ones share one, and the long
    # one (61 tokens) does not fit beside them.
    assert len(texts_of(NOTES, RecursiveChunker(max_tokens=64), NOTES_SECTIONS)) == 3
    packed = texts_of(NOTES, RecursiveChunker(max_tokens=64, pack_sections=16), NOTES_SECTIONS)
    assert packed == [
        "1.2\n\nFixed a crash.\n\n1.1\n\nAdded sessions.",
        NOTES[NOTES.index("1.0") :].strip(),
    ]
    chunker = RecursiveChunker(max_tokens=64, pack_sections=16)
    assert_contract(NOTES, chunker.chunk(NOTES, sections=NOTES_SECTIONS), may_overlap=False)
    with pytest.raises(ValueError, match="pack_sections"):
        RecursiveChunker(pack_sections=-1)


def test_a_chunk_is_split_again_into_smaller_parts_on_request() -> None:
    chunker = RecursiveChunker(max_tokens=64, min_tokens=0)
    cats = MARKDOWN[:DOGS].strip()
    (span,) = chunker.chunk(cats)
    whole = count_tokens(cats, "cl100k_base")
    parts = chunker.split_span(cats, span.start, span.end, fraction=0.7)
    # Split at paragraph breaks, each part within 70% of the chunk's tokens.
    assert len(parts) >= 2
    assert all(count_tokens(cats[p.start : p.end], "cl100k_base") <= whole * 0.7 for p in parts)
    paragraph_ends = {cats.index(p) + len(p) for p in cats.split("\n\n")}
    assert {p.end for p in parts} <= paragraph_ends
    assert_contract(cats, parts, may_overlap=False)
