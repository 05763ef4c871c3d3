"""reStructuredText: titles nest by adornment style, markup reduced, reST in .txt found."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retrieval.services.parsers.rst import RstParser, looks_like_rst
from retrieval.services.parsers.text import TextParser
from retrieval.testing.parsers import assert_well_formed

GUIDE = b"""\
:orphan:

.. _guide:

==========
User guide
==========

Welcome to *the* guide. See :ref:`the install notes <install>` and
:func:`~retrieval.search`.

.. toctree::
   :maxdepth: 2

   install
   usage

Installation
============

Requirements
------------

You need ``Python 3.11`` and `PostgreSQL <https://www.postgresql.org>`_.

.. code-block:: sh
   :caption: shell

   pip install django-retrieval

.. note:: Mind the extra.

   The ``local`` extra brings the embedder.

..
   A comment that says nothing to readers.

Upgrading
---------

Run the migrations::

    python manage.py migrate

Usage
=====

Search with the command.
"""


def sections_by_heading(document) -> dict[tuple[str, ...], str]:
    return {s.heading_path: document.text[s.start : s.end] for s in document.sections}


def test_titles_nest_by_the_order_their_adornments_first_appear() -> None:
    document = RstParser().parse(GUIDE, filename="guide.rst")
    assert_well_formed(document)
    assert document.title == "User guide"
    assert list(sections_by_heading(document)) == [
        ("User guide",),
        ("User guide", "Installation"),
        ("User guide", "Installation", "Requirements"),
        ("User guide", "Installation", "Upgrading"),
        ("User guide", "Usage"),
    ]
    assert "=====" not in document.text and "-----" not in document.text


def test_markup_is_reduced_to_its_text() -> None:
    parts = sections_by_heading(RstParser().parse(GUIDE, filename="guide.rst"))
    assert parts[("User guide",)] == (
        "User guide\n\nWelcome to the guide. See the install notes and\nsearch."
    )
    requirements = parts[("User guide", "Installation", "Requirements")]
    assert requirements == (
        "Requirements\n\nYou need Python 3.11 and PostgreSQL.\n\n"
        "pip install django-retrieval\n\nMind the extra.\n\nThe local extra brings the embedder."
    )
    assert parts[("User guide", "Installation", "Upgrading")] == (
        "Upgrading\n\nRun the migrations:\n\npython manage.py migrate"
    )
    text = RstParser().parse(GUIDE).text
    for dropped in (
        "toctree",
        "maxdepth",
        "usage\n",
        "comment",
        "_guide",
        "caption",
        "::",
        "orphan",
    ):
        assert dropped not in text


def test_rest_in_a_txt_file_gets_its_sections_and_plain_text_does_not() -> None:
    document = TextParser().parse(GUIDE, filename="guide.txt")
    assert document.metadata == {"encoding": "utf-8", "format": "rst"}
    assert len(document.sections) == 5
    plain = b"Shopping list\n=============\n\nEggs, milk and bread.\n"
    assert TextParser().parse(plain, filename="list.txt").sections == ()
    assert TextParser(detect_rst=False).parse(GUIDE, filename="guide.txt").sections == ()
    assert not looks_like_rst("Dear Ann,\n\nthanks for the cake.\n\n-- Bob\n")
    assert looks_like_rst("Intro\n=====\n\nText\n\nMore\n----\n\nText\n")


def test_an_underline_shorter_than_its_title_is_no_title() -> None:
    document = RstParser().parse(b"A long title\n===\n\nBody.\n\nReal\n====\n\nText.\n")
    assert [s.heading_path for s in document.sections] == [(), ("Real",)]


_LINES = st.sampled_from(
    [
        "",
        "Title",
        "=====",
        "-----",
        "~~~",
        "Some *text* with ``code`` and `a link <http://x>`_.",
        ".. note::",
        ".. toctree::",
        ".. code-block:: python",
        "   indented line",
        "   :option: value",
        "..",
        ".. _target:",
        "::",
        "Example::",
        "    literal",
        "*",
        "``",
        ":ref:`x`",
    ]
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(_LINES, max_size=30))
def test_any_mix_of_constructs_gives_a_well_formed_document_or_a_parse_error(
    lines: list[str],
) -> None:
    from retrieval.exceptions import ParseError

    try:
        document = RstParser().parse("\n".join(lines).encode(), filename="x.rst")
    except ParseError:
        return
    assert_well_formed(document)
    assert document.title


NESTED = b"""\
Options
=======

.. confval:: autodoc_default_options

   The default options for autodoc directives. For example:

   .. code-block:: python

      autodoc_default_options = {'members': True}

   .. versionadded:: 1.8

   .. versionchanged:: 2.0
      Accepts ``True`` as a value.

   .. note:: Mind the *order*.
"""


AUTODOC = b"""\
Logging API
===========

.. currentmodule:: sphinx.util.logging

.. autofunction:: getLogger(name)

.. autoclass:: SphinxLoggerAdapter(logging.LoggerAdapter)
   :members:

   .. method:: SphinxLoggerAdapter.warning(msg, *args, **kwargs)

      Logs a message on this logger with the specified level.

      **location**
        Where the warning happened, with the path and line number.

.. automodule:: sphinx.util.logging
   :no-members:
"""


@pytest.mark.parametrize(
    ("source", "filename", "text"),
    [
        (
            NESTED,
            "options.rst",
            "Options\n\nautodoc_default_options\n\n"
            "The default options for autodoc directives. For example:\n\n"
            "autodoc_default_options = {'members': True}\n\n"
            "Added in version 1.8.\n\nChanged in version 2.0.\n\nAccepts True as a value.\n\n"
            "Mind the order.",
        ),
        # The docstrings an autodoc directive pulls in are elsewhere; what the file says
        # under it is not (it was all dropped: a page of method descriptions read as its
        # title).
        (
            AUTODOC,
            "logging.rst",
            "Logging API\n\ngetLogger(name)\n\nSphinxLoggerAdapter(logging.LoggerAdapter)\n\n"
            "SphinxLoggerAdapter.warning(msg, *args, **kwargs)\n\n"
            "Logs a message on this logger with the specified level.\n\n"
            "location\n  Where the warning happened, with the path and line number.\n\n"
            "sphinx.util.logging",
        ),
    ],
    ids=["directives inside directives", "autodoc directives keep the text under them"],
)
def test_directives_leave_their_text_not_their_markup(
    source: bytes, filename: str, text: str
) -> None:
    document = RstParser().parse(source, filename=filename)
    assert_well_formed(document)
    assert document.text == text
