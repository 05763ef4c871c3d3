"""Every parser of the app through the public suite (retrieval.testing.parsers)."""

from __future__ import annotations

import pymupdf

from retrieval.services.parsers.base import BaseParser
from retrieval.services.parsers.html import HtmlParser
from retrieval.services.parsers.json import JsonParser
from retrieval.services.parsers.markdown import MarkdownParser
from retrieval.services.parsers.pdf import PdfParser
from retrieval.services.parsers.rst import RstParser
from retrieval.services.parsers.text import TextParser
from retrieval.testing.parsers import ParserSuite


def _pdf_sample() -> bytes:
    with pymupdf.open() as document:
        for number in (1, 2):
            page = document.new_page()
            page.insert_text((72, 72), f"Page {number} heading\nBody of page {number}.")
        document.set_toc([[1, "Page 1 heading", 1], [1, "Page 2 heading", 2]])
        return document.tobytes()


SAMPLES: list[tuple[BaseParser, str, str, bytes]] = [
    (TextParser(), "notes.txt", "text/plain", b"Notes\r\n\r\n\r\nSecond   \r\nThird\n"),
    (
        MarkdownParser(),
        "guide.md",
        "text/markdown",
        b"Intro\n\n# Guide\n\nText *here*.\n\n## Install\n\n```\npip install x\n```\n",
    ),
    (
        HtmlParser(),
        "page.html",
        "text/html",
        b"<title>T</title><p>Intro</p><h1>Main</h1><p>One</p><h2>Sub</h2><pre>  x\n\n\n y</pre>",
    ),
    (JsonParser(), "data.json", "application/json", b'{"title": "T", "a": {"b": [1, 2]}}'),
    (PdfParser(), "report.pdf", "application/pdf", _pdf_sample()),
    (
        RstParser(),
        "guide.rst",
        "text/x-rst",
        b"=====\nGuide\n=====\n\nText *here*.\n\nInstall\n-------\n\n"
        b".. code-block:: sh\n\n   pip install x\n",
    ),
]


globals().update(
    {
        f"Test{type(parser).__name__}": type(
            f"Test{type(parser).__name__}",
            (ParserSuite,),
            {
                "make_parser": staticmethod(lambda parser=parser: parser),
                "sample": (filename, mime_type, data),
                "structured": not isinstance(parser, TextParser),
            },
        )
        for parser, filename, mime_type, data in SAMPLES
    }
)
