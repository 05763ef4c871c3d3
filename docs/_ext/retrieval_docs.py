"""Sphinx extension: write the generated reference pages (``refgen``) before the build reads."""

from __future__ import annotations

from typing import Any

import refgen


def generate(app: Any) -> None:
    refgen.write_pages()


def setup(app: Any) -> dict[str, Any]:
    app.connect("builder-inited", generate)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
