"""Triple extraction by a language model: one JSON call per chunk."""

from __future__ import annotations

from collections.abc import Sequence

from retrieval.services.extractors.base import BaseTripleExtractor, ExtractedTriple
from retrieval.services.llms.base import check_llm_alias
from retrieval.services.registry import llms

#: The schema bounds the answer (triples and string lengths), so a server that constrains
#: output to it (llama.cpp) must close the JSON within ``EXTRACT_TOKENS``: without bounds a
#: small model repeats triples until it is cut at ``max_tokens`` and the chunk fails.
MAX_TRIPLES = 8
EXTRACT_TOKENS = 640
TEMPLATE = (
    f"Extract at most {MAX_TRIPLES} facts stated in the text below as knowledge-graph "
    "triples. Subjects and "
    "objects are short noun phrases naming things (products, people, settings, places); "
    "predicates are short verb phrases. Give each triple a confidence from 0 to 1. Do not "
    "add facts the text does not state.\n\nText:\n{text}"
)
SCHEMA = {
    "type": "object",
    "properties": {
        "triples": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "subject": {"type": "string", "minLength": 1, "maxLength": 60},
                    "predicate": {"type": "string", "minLength": 1, "maxLength": 30},
                    "object": {"type": "string", "minLength": 1, "maxLength": 60},
                    # no bounds: llama.cpp's grammar cannot enforce them; clamped instead
                    "confidence": {"type": "number"},
                },
                "required": ["subject", "predicate", "object", "confidence"],
            },
            "maxItems": MAX_TRIPLES,
        }
    },
    "required": ["triples"],
}


class LLMTripleExtractor(BaseTripleExtractor):
    """Ask the LLM ``llm`` for the triples of each text (``template`` has ``{text}``).

    The answer is validated against a JSON schema (one repair, then the chunk fails
    with the reason, and the extraction run records it); confidences are clamped to [0, 1].
    """

    batch_size = 1  # one call per chunk

    def __init__(self, *, llm: str = "default", template: str = TEMPLATE, version: str = "1"):
        if "{text}" not in template:
            raise ValueError("template must contain {text}.")
        self.llm = llm
        self.template = template
        self.version = f"llm:{llm}:{version}"

    def check(self) -> list:
        return check_llm_alias(f"Extractor {self.alias!r}", self.llm)

    def extract(self, texts: Sequence[str]) -> list[list[ExtractedTriple]]:
        found = []
        for text in texts:
            prompt = self.template.format(text=text)
            data = llms[self.llm].complete_json(
                [{"role": "user", "content": prompt}],
                schema=SCHEMA,
                purpose="extract",
                max_tokens=EXTRACT_TOKENS,
            )
            found.append(
                [
                    ExtractedTriple(
                        " ".join(t["subject"].split()),
                        " ".join(t["predicate"].split()),
                        " ".join(t["object"].split()),
                        min(1.0, max(0.0, float(t["confidence"]))),
                    )
                    for t in data["triples"]
                    if t["subject"].strip() and t["predicate"].strip() and t["object"].strip()
                ]
            )
        return found
