"""HtmlParser: visible text only, block layout, heading sections, declared charsets."""

from __future__ import annotations

import pytest

from retrieval.exceptions import ParseError
from retrieval.services.parsers.html import HtmlParser
from retrieval.services.types import ParsedDocument
from retrieval.testing.parsers import assert_well_formed

PAGE = """<!DOCTYPE html>
<html>
<head>
  <title>  The   manual </title>
  <style>body { color: red; }</style>
  <script>var secret = "tracking";</script>
</head>
<body>
  <nav>Home</nav>
  <noscript>Please enable JavaScript</noscript>
  <template><p>template text</p></template>
  <svg><title>icon title</title><text>svg text</text></svg>
  <!-- a comment -->
  <h1>Guide</h1>
  <p>Fish &amp; chips &lt;cheap&gt; &copy; 2024,
     <b>bold</b>  and <a href="/x">a   link</a>.</p>
  <div>First div</div><div>Second<br>after break</div>
  <h2>Install</h2>
  <ul><li>one</li><li><em>two</em></li></ul>
  <pre>
def f():
    return   1


print(f())</pre>
  <h3>Deeper</h3>
  <table><tr><th>Key</th><th>Value</th></tr><tr><td>a</td><td>1</td></tr></table>
  <h2>Use</h2>
  <p>Un<span>broken</span> word</p>
</body>
</html>
"""


def parse(markup: str | bytes, filename: str | None = "page.html") -> ParsedDocument:
    data = markup.encode() if isinstance(markup, str) else markup
    return HtmlParser().parse(data, filename=filename)


def test_hidden_content_is_dropped() -> None:
    text = parse(PAGE).text

    for hidden in ("color: red", "tracking", "enable JavaScript", "template text", "svg text"):
        assert hidden not in text
    assert "icon title" not in text and "a comment" not in text
    assert "The manual" not in text  # the title is metadata, not body text


def test_block_elements_break_lines_and_inline_elements_do_not() -> None:
    text = parse(PAGE).text

    assert "Fish & chips <cheap> © 2024, bold and a link." in text
    assert "First div\nSecond\nafter break" in text
    assert "one\ntwo" in text
    assert "Key | Value\na | 1" in text
    assert "Unbroken word" in text


def test_a_term_and_the_first_block_of_its_definition_are_one_block() -> None:
    # AsciiDoc's and Sphinx's HTML wrap each definition in paragraphs; a blank line
    # between term and definition let a chunk end at the term.
    markup = """<h1>Revisions</h1><dl>
      <dt class="hdlist1">&lt;sha1&gt;, e.g. dae86e</dt>
      <dd><p>The full SHA-1 object name.</p><p>A second paragraph.</p></dd>
      <dt>@{upstream}</dt><dt>@{u}</dt><dd><div class="para"><p>The upstream branch.</p></div></dd>
      <dd><p>A second definition.</p></dd>
      <dt><p>A term in a paragraph</p></dt><dd><p>Its definition.</p></dd>
      <dt>a term with no definition</dt><dd></dd>
    </dl><p>After the list.</p>"""

    assert parse(markup).text == (
        "Revisions\n\n"
        "<sha1>, e.g. dae86e\nThe full SHA-1 object name.\n\nA second paragraph.\n\n"
        "@{upstream}\n@{u}\nThe upstream branch.\n\nA second definition.\n\n"
        "A term in a paragraph\nIts definition.\n\n"
        "a term with no definition\n\nAfter the list."
    )


def test_a_definition_after_an_empty_term_is_not_joined_to_the_text_before() -> None:
    # Before, an empty <dt> still joined its definition to whatever preceded it.
    markup = "<p>Before the list.</p><dl><dt> </dt><dd><p>A definition.</p></dd></dl>"

    assert parse(markup).text == "Before the list.\n\nA definition."


@pytest.mark.parametrize(
    "toc",
    [
        '<div class="toc"><p><b>Table of Contents</b></p><dl class="toc"><dt>{}</dt></dl></div>',
        '<div id="toc"><div id="toctitle">Table of Contents</div><p>{}</p></div>',
        '<nav id="TOC" role="doc-toc"><a href="#install">{}</a></nav>',
        '<nav class="contents" id="contents" role="doc-toc"><p>Contents</p>{}</nav>',
        '<nav class="md-nav md-nav--secondary" aria-label="Table of contents">{}</nav>',
    ],
)
def test_a_table_of_contents_is_not_text(toc: str) -> None:
    # DocBook, AsciiDoc, Pandoc, docutils and MkDocs Material mark theirs so. It repeats
    # the headings that open their sections: as text it made chunks of bare titles, and
    # a manual's opening sentence "Introduction 1."
    page = "<h1>Manual</h1>{}<p>The manual begins here.</p><h2>Install</h2><p>Run it.</p>"
    document = parse(page.format(toc.format("<ul><li>1. Install</li></ul>")))

    assert document.text == "Manual\n\nThe manual begins here.\n\nInstall\n\nRun it."


def test_pre_is_kept_verbatim() -> None:
    assert "def f():\n    return   1\n\nprint(f())" in parse(PAGE).text


def test_headings_start_sections_with_their_paths() -> None:
    document = parse(PAGE)
    texts = {s.heading_path: document.text[s.start : s.end] for s in document.sections}

    assert [s.heading_path for s in document.sections] == [
        (),
        ("Guide",),
        ("Guide", "Install"),
        ("Guide", "Install", "Deeper"),
        ("Guide", "Use"),
    ]
    assert texts[()] == "Home"
    assert texts[("Guide", "Install", "Deeper")] == "Deeper\n\nKey | Value\na | 1"
    assert texts[("Guide", "Use")] == "Use\n\nUnbroken word"
    assert_well_formed(document)


def test_title_prefers_title_tag_then_h1_then_filename() -> None:
    assert parse(PAGE).title == "The manual"
    assert parse("<svg><title>icon</title></svg><h1>Heading <i>one</i></h1>").title == (
        "Heading one"
    )
    assert parse("<p>just text</p>", filename="site/about.htm").title == "about"


@pytest.mark.parametrize(
    ("declaration", "encoding", "words"),
    [
        ('<meta charset="windows-1252">', "cp1252", "Café “quoted” – €5"),
        (
            '<meta http-equiv="Content-Type" content="text/html; charset=koi8-r">',
            "koi8-r",
            "Привет, мир",
        ),
        ('<meta charset="shift_jis">', "shift_jis", "日本語のテキスト"),
        # Browsers read a latin-1 declaration as cp1252, so 0x93/0x94 are curly quotes.
        ('<meta charset="iso-8859-1">', "cp1252", "“smart” quotes"),
    ],
)
def test_declared_charset_decodes_non_utf8_bytes(
    declaration: str, encoding: str, words: str
) -> None:
    markup = f"<html><head>{declaration}</head><body><p>{words}</p></body></html>"

    assert parse(markup.encode(encoding)).text == words


def test_undeclared_bytes_are_read_as_utf8() -> None:
    assert parse("<p>naïve café ✓ — 日本</p>").text == "naïve café ✓ — 日本"


def test_utf8_bytes_win_over_a_wrong_utf16_declaration() -> None:
    assert parse('<meta charset="utf-16"><p>café</p>').text == "café"


def test_page_without_visible_text_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="'page.html'.*no visible text"):
        parse("<html><head><title>Only a title</title><script>x()</script></head></html>")


def test_deeply_nested_markup_does_not_exhaust_recursion() -> None:
    markup = "<span>" * 3000 + "deep" + "</span>" * 3000

    assert parse(markup).text == "deep"


def test_markup_the_stdlib_parser_rejects_is_a_parse_error():
    """bs4 raised ParserRejectedMarkup (found by the conformance suite's fuzzing)."""
    from retrieval.exceptions import ParseError

    with pytest.raises(ParseError, match="malformed markup"):
        HtmlParser().parse(b"<![\x00", filename="x.html")
