"""Contextual chunk text: what is embedded and BM25-indexed for a chunk.

A chunk's ``content`` is exact text of its document (offsets and citations rely on
it). What the embedder and the BM25 analyzer read is that content after a short
header naming where it comes from: the document's title, its opening sentence (what
the document is about, for the chunks that do not hold it), the chunk's heading path,
chosen metadata values if the site asks for them and, for a document read from a
file, its path as words. A passage that says "Run the migrations" is then found for
"how do I upgrade django-retrieval?" because its header says "User guide >
Installation > Upgrading".

The header is stored on the chunk (``Chunk.indexed_prefix``), so what was indexed
can be shown and indexed again exactly (``sparse.index.rebuild_postings``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from retrieval.conf import retrieval_settings
from retrieval.models import indexed_text

__all__ = [
    "ContextOptions",
    "context_options",
    "context_prefix",
    "indexed_text",
    "opening_sentence",
    "source_line",
]

_KEYS = {"title", "source", "headings", "metadata_keys", "summary"}
#: Words of the document's opening sentence a chunk's header may carry.
SUMMARY_WORDS = 24
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")
# A file name's extension starts with a letter: "notes.md", not "release-3.1" or "1.2e5".
_EXTENSION = re.compile(r"\.[^\W\d_]\w*$")


class ContextOptions(dict):
    """The validated ``RETRIEVAL["CHUNK_CONTEXT"]``: title, source, headings, metadata_keys,
    summary."""


def context_options() -> ContextOptions:
    """Return ``RETRIEVAL["CHUNK_CONTEXT"]`` checked; ``None`` or ``False`` turn it off."""
    value = retrieval_settings.CHUNK_CONTEXT
    if value in (None, False):
        return ContextOptions(
            title=False, source=False, headings=False, metadata_keys=[], summary=False
        )
    if not isinstance(value, Mapping) or set(value) - _KEYS:
        raise ImproperlyConfigured(
            'RETRIEVAL["CHUNK_CONTEXT"] must be None or a dict with the keys "title" (bool), '
            '"source" (bool), "headings" (bool), "summary" (bool) and "metadata_keys" '
            "(list of str), "
            f"got {value!r}."
        )
    keys = value.get("metadata_keys", [])
    if isinstance(keys, str) or not all(isinstance(k, str) for k in keys):
        raise ImproperlyConfigured(
            f'RETRIEVAL["CHUNK_CONTEXT"]["metadata_keys"] must be a list of str, got {keys!r}.'
        )
    return ContextOptions(
        title=bool(value.get("title", True)),
        source=bool(value.get("source", True)),
        headings=bool(value.get("headings", True)),
        metadata_keys=list(keys),
        summary=bool(value.get("summary", True)),
    )


def context_prefix(
    title: str,
    heading_path: Sequence[str],
    metadata: Mapping[str, Any],
    options: ContextOptions,
    *,
    source: str = "",
    summary: str = "",
) -> str:
    """Return the header put before a chunk's content when it is indexed.

    One line each: the title, the heading path joined with `` > `` (headings that
    repeat the title left out), ``key: value`` for each chosen metadata key the
    document has, then ``source`` (the external id of a document read from a file,
    ``""`` for none) as words, if it reads as a path (:func:`source_line`).
    """
    lines = []
    title = " ".join(title.split())
    if options["title"] and title:
        lines.append(title)
    if options.get("summary") and summary:
        lines.append(summary)
    if options["headings"]:
        path = [" ".join(h.split()) for h in heading_path]
        while path and path[0] == title:
            path.pop(0)
        if path := [h for h in path if h]:
            lines.append(" > ".join(path))
    for key in options["metadata_keys"]:
        value = metadata.get(key)
        if value not in (None, "", [], {}):
            shown = ", ".join(map(str, value)) if isinstance(value, list) else str(value)
            lines.append(f"{key}: {' '.join(shown.split())}")
    if options["source"] and (source := source_line(source)):
        lines.append(source)
    return "\n".join(lines)


def opening_sentence(text: str, headings: Sequence[str]) -> tuple[str, int, int]:
    """Return a document's opening sentence (at most ``SUMMARY_WORDS`` words) and the span
    of the paragraph it opens, or ``("", 0, 0)``.

    The opening paragraph is the first block of text of five words or more that is not a
    heading: what a manual page's NAME line, or a guide's first paragraph, says the
    document is about.
    """
    headings = {" ".join(h.split()) for h in headings}
    for match in re.finditer(r"\S(?:.|\n(?!\s*\n))*", text):
        words = match.group().split()
        if len(words) < 5 or " ".join(words) in headings:
            continue
        sentence = _SENTENCE_END.split(" ".join(words), maxsplit=1)[0]
        return " ".join(sentence.split()[:SUMMARY_WORDS]), match.start(), match.end()
    return "", 0, 0


def source_line(source: str) -> str:
    """Return a file's path as the words of its folders and name, without the extension.

    ``docs/patterns/sqlalchemy.rst`` gives ``docs patterns sqlalchemy``. An id that
    does not read as a path (no folder, no extension: ``doc-42``, a UUID) names no
    topic, so it gives ``""``. On the real-documents bench the words, last in the
    header, ranked better than the path as written (``/``, ``.rst``), a labelled
    ``file_path: ...`` line, or the words right after the title.
    """
    if not ("/" in source or "\\" in source or _EXTENSION.search(source)):
        return ""
    return " ".join(_EXTENSION.sub("", source).replace("/", " ").replace("\\", " ").split())
