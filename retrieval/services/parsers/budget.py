"""The time one file may take to parse (``MAX_PARSE_SECONDS``), checked between steps.

Each check is also a sign of life: an index run parsing a long file (hundreds of scanned
pages read by OCR, within ``MAX_OCR_SECONDS``) beats its heartbeat through
:func:`beating`, so it is not taken for dead after ``RUN_HEARTBEAT_TIMEOUT`` while it works.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from retrieval.conf import retrieval_settings
from retrieval.exceptions import ParseError

_heartbeat: ContextVar[Callable[[], None] | None] = ContextVar("parse_heartbeat", default=None)


@contextmanager
def beating(heartbeat: Callable[[], None]) -> Iterator[None]:
    """Call ``heartbeat`` at every budget check of the parsing done inside (the caller
    keeps it cheap: an index run saves its heartbeat at most every half second)."""
    token = _heartbeat.set(heartbeat)
    try:
        yield
    finally:
        _heartbeat.reset(token)


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
        heartbeat = _heartbeat.get()
        if heartbeat is not None:
            heartbeat()
        if time.monotonic() - self.started >= self.seconds:
            raise ParseError(
                f"Cannot parse {self.label}: {self.doing} took more than {self.seconds:g} s "
                f"({self.setting}); stopped {where}. Split it into smaller files."
            )
