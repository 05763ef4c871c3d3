"""The same document in another format gets the same title and text furniture-free.

Found by ``bench/formats.py`` (a documentation set converted by pandoc to DOCX, ODT,
EPUB and PDF): files are written here by pandoc and pymupdf as the bench writes them.
"""

from __future__ import annotations

import pymupdf
import pypandoc
import pytest

from retrieval.services.parsers.opendocument import OdtParser
from retrieval.services.parsers.pdf import PdfParser
from retrieval.services.parsers.word import DocxParser

#: A page of documentation that opens at a subheading, as many do (their title is in
#: the site's navigation, not in the file).
OPENS_AT_SUBHEADING = (
    "Handlers can share objects created at startup.\n\n"
    "## Lifespan State\n\nThe lifespan yields a dictionary of state.\n"
)


def pandoc(markdown: str, to: str, tmp_path) -> bytes:
    out = tmp_path / f"converted.{to}"
    pypandoc.convert_text(markdown, to, format="gfm", outputfile=str(out))
    return out.read_bytes()


@pytest.mark.parametrize("parser, to", [(OdtParser(), "odt"), (DocxParser(), "docx")])
def test_a_subheading_does_not_title_the_document(parser, to, tmp_path):
    document = parser.parse(pandoc(OPENS_AT_SUBHEADING, to, tmp_path), filename=f"lifespan.{to}")
    assert document.title == "lifespan"
    assert document.sections[-1].heading_path == ("Lifespan State",)


@pytest.mark.parametrize("parser, to", [(OdtParser(), "odt"), (DocxParser(), "docx")])
def test_the_top_heading_titles_the_document(parser, to, tmp_path):
    data = pandoc("# Lifespan\n\n" + OPENS_AT_SUBHEADING, to, tmp_path)
    assert parser.parse(data, filename=f"lifespan.{to}").title == "Lifespan"
