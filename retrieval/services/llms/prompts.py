"""A prompt's size as the server counts it: its own tokenizer, with its chat template.

The app counts with ``TOKEN_ENCODING`` (tiktoken); a server applies a chat template
(role markers, often a default system message) and counts with its own tokenizer,
so its ``prompt_tokens`` are usually more. :class:`PromptEstimator` learns how many
more from what the server reports and keeps a margin, so a budget is never overrun.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Mapping, Sequence

from retrieval.services.clients.tokens import count_tokens

#: Before the server has reported a long prompt: a tokenizer 25% less compact than the
#: app's, and (before any report) room for a chat template with a default system
#: message (SmolLM2's: 26 tokens on top of a 9-token question; Llama 3's date header).
PRIOR_SCALE = 1.25
PRIOR_EXTRA = 32
#: Prompts at least this long (the app's count) measure the tokenizers' ratio: the
#: template's fixed tokens are a small part of them.
LONG_PROMPT = 200
#: Kept on top of what was measured: tokenizers differ more on some texts than others.
MARGIN = 0.05
MARGIN_TOKENS = 4
#: Reports remembered per LLM.
REPORTS = 64


def count_prompt_tokens(messages: Sequence[Mapping[str, str]]) -> int:
    """Return the app's count of ``messages``: content tokens plus 4 a message."""
    return sum(count_tokens(m.get("content") or "") + 4 for m in messages)


class PromptEstimator:
    """Upper-bound a server's ``prompt_tokens`` from the app's count of the messages.

    The server is taken to count ``scale * n + extra`` for the app's ``n``: ``scale``
    is the largest ratio reported for a long prompt (else :data:`PRIOR_SCALE`), and
    ``extra`` the most any report exceeded ``scale * n`` by (the template's tokens),
    so every prompt reported so far is covered; :data:`MARGIN` is added on top.
    """

    def __init__(self) -> None:
        self._reports: deque[tuple[int, int]] = deque(maxlen=REPORTS)
        self._lock = threading.Lock()
        self.scale = PRIOR_SCALE
        self.extra: float = PRIOR_EXTRA

    def estimate(self, messages: Sequence[Mapping[str, str]]) -> int:
        """Return the most prompt tokens the server is expected to count for ``messages``."""
        counted = count_prompt_tokens(messages)
        if not self._reports:
            return math.ceil(counted * PRIOR_SCALE) + PRIOR_EXTRA
        bound = counted * self.scale + self.extra
        return math.ceil(bound * (1 + MARGIN)) + MARGIN_TOKENS

    def observe(self, messages: Sequence[Mapping[str, str]], reported: int) -> None:
        """Learn from the server's ``prompt_tokens`` for ``messages`` (ignored if 0)."""
        counted = count_prompt_tokens(messages)
        if reported <= 0 or counted <= 0:
            return
        with self._lock:
            self._reports.append((counted, reported))
            ratios = [p / n for n, p in self._reports if n >= LONG_PROMPT]
            self.scale = max(ratios) if ratios else PRIOR_SCALE
            self.extra = max(0.0, *(p - n * self.scale for n, p in self._reports))
