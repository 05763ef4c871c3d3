"""Sphinx configuration: MyST Markdown pages, the Furo theme, references generated from code.

Build with ``python3 dev.py docs`` (warnings are errors); nothing here uses the network.
"""

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path[:0] = [str(DOCS.parent), str(DOCS / "_ext")]

project = "django-retrieval"
author = "django-retrieval's developers"
copyright = "django-retrieval's developers"  # noqa: A001 (Sphinx's name)
release = "0.1.0"

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.graphviz",
    "retrieval_docs",
]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "README.md"]
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]
# The pages link to files of the repository outside docs/ (bench/README.md ...) by relative
# paths the repository's browser follows; Sphinx does not build them, and warns. Every
# relative link is checked by tests/test_docs.py instead (test_relative_links_...).
suppress_warnings = ["myst.xref_missing"]
nitpicky = False

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"undoc-members": False}

graphviz_output_format = "svg"

html_theme = "furo"
html_title = "django-retrieval"
html_static_path = ["_static"]
