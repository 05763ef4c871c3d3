"""A prompt's size as the server counts it: its own tokenizer, with its chat template.

The app counts with ``TOKEN_ENCODING`` (tiktoken); a server applies a chat template
(role markers, often a default system message) and counts with its own tokenizer,
so its ``prompt_tokens`` are usually more. :class:`PromptEstimator` learns how many
more from what the server reports and keeps a margin, so a budget is never overrun.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping, Sequence

from retrieval.services.chunkers.tokens import count_tokens

#: Before the server has reported anything: room for a chat template with a default
#: system message (SmolLM2's, Llama 3's date header) and a tokenizer 25% less compact.
PRIOR_SCALE = 1.25
PRIOR_EXTRA = 32
#: Kept on top of what was measured: tokenizers differ more on some texts than others.
MARGIN = 0.05
MARGIN_TOKENS = 4


def count_prompt_tokens(messages: Sequence[Mapping[str, str]]) -> int:
    """Return the app's count of ``messages``: content tokens plus 4 a message."""
    return sum(count_tokens(m.get("content") or "") + 4 for m in messages)


class PromptEstimator:
    """Upper-bound a server's ``prompt_tokens`` from the app's count of the messages.

    If the server counts ``a * n + b`` for the app's ``n`` (a tokenizer ``a`` times
    less compact, ``b`` tokens of template) with ``a >= 1``, then one report ``(n0, p0)``
    bounds every later prompt by ``max(n + (p0 - n0), n * p0 / n0)``: the first term
    covers shorter prompts, the second longer ones. The largest of each over all
    reports is kept, plus :data:`MARGIN`.
    """

    def __init__(self) -> None:
        self.extra: int | None = None  # most tokens the server counted above the app
        self.scale: float | None = None  # largest ratio of the server's count to the app's
        self._lock = threading.Lock()

    def estimate(self, messages: Sequence[Mapping[str, str]]) -> int:
        """Return the most prompt tokens the server is expected to count for ``messages``."""
        counted = count_prompt_tokens(messages)
        if self.extra is None or self.scale is None:
            return math.ceil(counted * PRIOR_SCALE) + PRIOR_EXTRA
        bound = max(counted, counted + self.extra, counted * self.scale)
        return math.ceil(bound * (1 + MARGIN)) + MARGIN_TOKENS

    def observe(self, messages: Sequence[Mapping[str, str]], reported: int) -> None:
        """Learn from the server's ``prompt_tokens`` for ``messages`` (ignored if 0)."""
        counted = count_prompt_tokens(messages)
        if reported <= 0 or counted <= 0:
            return
        with self._lock:
            self.extra = max(self.extra or 0, reported - counted)
            self.scale = max(self.scale or 1.0, reported / counted)
