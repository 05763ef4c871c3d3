"""Triple extraction by a language model: one JSON call per chunk."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from retrieval.services.extractors.base import BaseTripleExtractor, ExtractedTriple
from retrieval.services.llms.answers import unit_interval
from retrieval.services.llms.base import check_llm_alias
from retrieval.services.registry import llms

#: The schema bounds the answer (triples and string lengths), and the call asks for as
#: many tokens as the longest valid answer needs at a token per character (SmolLM2 pays
#: that for strings like "1.0.3.4.1"), so a server that constrains output to the schema
#: (llama.cpp) always closes the JSON: 5 triples need 989 tokens, which with a chunk of
#: 256 tokens still fit a 2,048-token context.
MAX_TRIPLES = 5
ENTITY_CHARS = 40
PREDICATE_CHARS = 24
TEMPLATE = (
    "Extract at most {max_triples} facts stated in the text below as knowledge-graph "
    "triples. Subjects and objects are short noun phrases naming things (products, people, "
    "settings, places); predicates are short verb phrases. Give each triple a confidence "
    "from 0 to 1. Do not add facts the text does not state.\n\nText:\n{text}"
)


def triples_schema(max_triples: int = MAX_TRIPLES) -> dict[str, Any]:
    """Return the answer's schema: at most ``max_triples`` triples of bounded strings."""
    entity = {"type": "string", "minLength": 1, "maxLength": ENTITY_CHARS}
    triple = {
        "type": "object",
        "properties": {
            "subject": entity,
            "predicate": {"type": "string", "minLength": 1, "maxLength": PREDICATE_CHARS},
            "object": entity,
            # no bounds: llama.cpp's grammar cannot enforce them; clamped instead
            "confidence": {"type": "number"},
        },
        "required": ["subject", "predicate", "object", "confidence"],
    }
    return {
        "type": "object",
        "properties": {"triples": {"type": "array", "items": triple, "maxItems": max_triples}},
        "required": ["triples"],
    }


class LLMTripleExtractor(BaseTripleExtractor):
    """Ask the LLM ``llm`` for at most ``max_triples`` triples of each text (``template``
    has ``{text}``, and may have ``{max_triples}``).

    The answer is validated against a JSON schema (one repair, then the chunk fails
    with the reason, and the extraction run records it); the call's ``max_tokens``
    follows from the schema's bounds; confidences are clamped to [0, 1].
    """

    batch_size = 1  # one call per chunk

    def __init__(
        self,
        *,
        llm: str = "default",
        template: str = TEMPLATE,
        version: str = "1",
        max_triples: int = MAX_TRIPLES,
    ) -> None:
        if "{text}" not in template:
            raise ValueError("template must contain {text}.")
        if not isinstance(max_triples, int) or not 1 <= max_triples <= 20:
            raise ValueError(f"max_triples must be an integer from 1 to 20, not {max_triples!r}.")
        self.llm = llm
        self.template = template
        self.max_triples = max_triples
        self.schema = triples_schema(max_triples)
        self.version = f"llm:{llm}:{version}"

    def check(self) -> list:
        return check_llm_alias(f"Extractor {self.alias!r}", self.llm)

    def extract(self, texts: Sequence[str]) -> list[list[ExtractedTriple]]:
        found = []
        for text in texts:
            prompt = self.template.format(text=text, max_triples=self.max_triples)
            data = llms[self.llm].complete_json(
                [{"role": "user", "content": prompt}], schema=self.schema, purpose="extract"
            )
            found.append(
                [
                    ExtractedTriple(
                        " ".join(t["subject"].split()),
                        " ".join(t["predicate"].split()),
                        " ".join(t["object"].split()),
                        unit_interval(t["confidence"]),
                    )
                    for t in data["triples"]
                    if t["subject"].strip() and t["predicate"].strip() and t["object"].strip()
                ]
            )
        return found
