"""MarkdownParser: formatting stripped, code kept, one section per heading region."""

from __future__ import annotations

import pytest

from retrieval.exceptions import ParseError
from retrieval.services.parsers.markdown import MarkdownParser
from retrieval.services.types import ParsedDocument
from retrieval.testing.parsers import assert_well_formed

GUIDE = """\
---
title: "Front matter title"
tags: [docs]
---
Before any heading, with *emphasis*.

# User guide

Read **this** first: see [the docs](https://example.com/docs "Docs") and ![a diagram](d.png).

## Installation

### From PyPI

```bash
pip install   django-retrieval   # **not bold**


echo "done"
```

Run `pip  install *x*` then <kbd>Enter</kbd>.

### From source

- clone the repo
- install it
  - in a virtualenv

3. third step
4. fourth step

## Usage

Ünïcödé text — naïve café ✓ 日本語
"""


def parse(source: str, filename: str | None = "guide.md") -> ParsedDocument:
    return MarkdownParser().parse(source.encode(), filename=filename)


def section_texts(document: ParsedDocument) -> dict[tuple[str, ...], str]:
    return {s.heading_path: document.text[s.start : s.end] for s in document.sections}


def test_sections_follow_the_heading_stack() -> None:
    document = parse(GUIDE)

    assert [s.heading_path for s in document.sections] == [
        (),
        ("User guide",),
        ("User guide", "Installation"),
        ("User guide", "Installation", "From PyPI"),
        ("User guide", "Installation", "From source"),
        ("User guide", "Usage"),
    ]
    assert all(s.page is None for s in document.sections)
    assert_well_formed(document)


def test_each_section_starts_with_its_heading_and_holds_its_body() -> None:
    texts = section_texts(parse(GUIDE))

    assert texts[()] == "Before any heading, with emphasis."
    assert texts[("User guide", "Installation")] == "Installation"
    assert texts[("User guide", "Installation", "From PyPI")].startswith("From PyPI\n\npip")
    assert texts[("User guide", "Usage")] == "Usage\n\nÜnïcödé text — naïve café ✓ 日本語"


def test_formatting_is_stripped() -> None:
    text = parse(GUIDE).text

    assert "Read this first: see the docs and a diagram." in text
    assert "https://example.com" not in text
    assert "d.png" not in text
    assert "*emphasis*" not in text
    assert "<kbd>" not in text and "then Enter." in text


def test_code_is_kept_verbatim_without_fences() -> None:
    text = parse(GUIDE).text

    assert 'pip install   django-retrieval   # **not bold**\n\necho "done"' in text
    assert "Run pip  install *x* then" in text
    assert "```" not in text and "`" not in text


def test_lists_become_lines_and_ordered_lists_keep_their_numbers() -> None:
    text = parse(GUIDE).text

    assert "clone the repo\ninstall it\nin a virtualenv" in text
    assert "3. third step\n4. fourth step" in text


def test_front_matter_is_removed() -> None:
    text = parse(GUIDE).text

    assert not text.startswith("---")
    assert "tags:" not in text and "Front matter title" not in text


def test_title_prefers_first_h1_then_front_matter_then_filename() -> None:
    assert parse(GUIDE).title == "User guide"
    assert parse("---\ntitle: 'Quoted title'\n---\n## Only h2\n").title == "Quoted title"
    assert parse("## Only h2\n\ntext", filename="docs/intro.md").title == "intro"


def test_setext_h1_counts_as_title() -> None:
    document = parse("Intro text\n\nSetext title\n============\n\nBody\n")

    assert document.title == "Setext title"
    assert document.sections[-1].heading_path == ("Setext title",)


def test_skipped_heading_levels_nest_under_the_nearest_outer_heading() -> None:
    document = parse("# A\n\n### C\n\nc\n\n## B\n\nb\n\n# D\n")

    assert [s.heading_path for s in document.sections] == [
        ("A",),
        ("A", "C"),
        ("A", "B"),
        ("D",),
    ]


def test_html_blocks_tables_and_blockquotes_become_text() -> None:
    source = (
        '<div align="center">\n<img src="logo.png"> <b>Bold</b> &amp; more\n'
        "<!-- hidden comment -->\n</div>\n\n"
        "| Name | Value |\n|------|-------|\n| *a*  | 1     |\n\n"
        "> quoted **text**\n"
    )

    text = parse(source).text

    assert text == "Bold & more\n\nName | Value\na | 1\n\nquoted text"


def test_empty_and_front_matter_only_files_are_parse_errors() -> None:
    with pytest.raises(ParseError, match="'guide.md'.*no text"):
        parse("")
    with pytest.raises(ParseError, match="no text"):
        parse("---\ntitle: Nothing else\n---\n\n")


def test_thematic_break_later_in_the_file_is_not_front_matter() -> None:
    text = parse("Intro\n\n---\n\ntitle: kept\n").text

    assert text == "Intro\n\ntitle: kept"


MKDOCS_PAGE = """\
??? abstract "API Reference"
    ::: starlette.testclient.TestClient
        options:
            parameter_headings: false
            show_root_heading: true
            filters:
                - "__init__"

The test client allows you to make requests against your ASGI application.

!!! note "Lifespan in tests"
    Use the client as a context manager.

    ```python
    with TestClient(app) as client:
        pass
    ```

    !!! warning
        Nested, and indented twice.

After the note.

```text
::: not.a.directive
!!! inside code
```
"""


def test_mkdocs_admonitions_give_their_title_and_body_and_autodoc_its_name() -> None:
    """MkDocs reads these markers; their words are the title, the body and the name."""
    document = parse(MKDOCS_PAGE, filename="testclient.md")

    assert document.text == (
        "API Reference\n\nstarlette.testclient.TestClient\n\n"
        "The test client allows you to make requests against your ASGI application.\n\n"
        "Lifespan in tests\n\nUse the client as a context manager.\n\n"
        "with TestClient(app) as client:\n    pass\n\n"
        "Warning\n\nNested, and indented twice.\n\nAfter the note.\n\n"
        "::: not.a.directive\n!!! inside code"
    )
    assert_well_formed(document)


def test_an_autodoc_page_opens_with_its_first_sentence_not_the_directive_options() -> None:
    from retrieval.services.core.headers import opening_sentence

    document = parse(MKDOCS_PAGE, filename="testclient.md")

    assert opening_sentence(document.text, [])[0] == (
        "The test client allows you to make requests against your ASGI application."
    )


def test_a_directive_mark_inside_a_paragraph_or_an_indented_code_block_stays_text() -> None:
    text = parse("Intro line\n::: kept.as.text\n\n    ::: code.block\n").text

    assert text == "Intro line ::: kept.as.text\n\n::: code.block"
