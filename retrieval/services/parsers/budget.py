"""The time one file may take to parse (``MAX_PARSE_SECONDS``), checked between steps."""

from __future__ import annotations

import time

from retrieval.conf import retrieval_settings
from retrieval.exceptions import ParseError


class ParseBudget:
    """Seconds left to parse one file; a parser calls :meth:`check` between its steps.

    A step already running is not interrupted: the steps' own size is bounded by the
    parser's other limits (a PDF's pages and decoded bytes). ``setting`` names the
    setting the seconds come from (``MAX_OCR_SECONDS`` for OCR), and ``doing`` what
    took them, for the message.
    """

    def __init__(
        self,
        label: str,
        *,
        seconds: float | None = None,
        setting: str = "MAX_PARSE_SECONDS",
        doing: str = "reading it",
    ) -> None:
        self.label = label
        self.setting = setting
        self.doing = doing
        self.seconds = float(getattr(retrieval_settings, setting) if seconds is None else seconds)
        self.started = time.monotonic()

    def check(self, where: str) -> None:
        """Raise ``ParseError`` naming ``where`` parsing stopped once the budget is spent."""
        if time.monotonic() - self.started >= self.seconds:
            raise ParseError(
                f"Cannot parse {self.label}: {self.doing} took more than {self.seconds:g} s "
                f"({self.setting}); stopped {where}. Split it into smaller files."
            )
