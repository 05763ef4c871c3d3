"""The offline spaCy extractor on sentences whose triples can be read by hand."""

from __future__ import annotations

import pytest

from retrieval.exceptions import MissingDependencyError
from retrieval.services.extractors.base import ExtractedTriple
from retrieval.services.extractors.syntactic import SpacyTripleExtractor

pytestmark = pytest.mark.slow  # loads the spaCy pipeline (a few seconds, once per process)


@pytest.fixture(scope="module")
def extractor() -> SpacyTripleExtractor:
    return SpacyTripleExtractor()


def _facts(triples: list[ExtractedTriple]) -> set[tuple[str, str, str]]:
    return {(t.subject, t.predicate, t.object) for t in triples}


def test_one_list_per_text_in_order(extractor):
    results = extractor.extract(["The PDF parser uses pymupdf.", "", "Hello."])
    assert len(results) == 3
    assert ("PDF parser", "use", "pymupdf") in _facts(results[0])
    assert results[1] == [] and results[2] == []


def test_verbs_copulas_prepositions_and_relative_clauses(extractor):
    [triples] = extractor.extract(
        [
            "The recursive chunker is the default chunker. Documents are stored in PostgreSQL. "
            "The default embedder is the local embedder, which runs all-MiniLM-L6-v2 on the CPU."
        ]
    )
    facts = _facts(triples)
    assert ("recursive chunker", "is", "default chunker") in facts
    assert ("Documents", "is stored in", "PostgreSQL") in facts
    assert ("local embedder", "run", "all-MiniLM-L6-v2") in facts  # "which" resolved
    assert all(0.0 <= t.confidence <= 1.0 for t in triples)


def test_pronouns_code_and_table_cells_name_no_entity(extractor):
    [triples] = extractor.extract(["It uses them. size=1000 | int sets chunk | size."])
    assert triples == []


def test_confidence_ranks_direct_objects_above_prepositional_ones(extractor):
    [triples] = extractor.extract(["The PDF parser keeps page numbers in the metadata."])
    by_predicate = {t.predicate: t.confidence for t in triples}
    assert by_predicate["keep"] > by_predicate["keep in"]


def test_a_missing_model_names_the_extra_to_install():
    with pytest.raises(MissingDependencyError, match=r"django-retrieval\[graph\]"):
        SpacyTripleExtractor(model="no_such_spacy_model").extract(["Text."])


@pytest.mark.parametrize("options", [{"direct": 1.5}, {"batch_size": 0}])
def test_bad_options_are_refused(options):
    with pytest.raises(ValueError):
        SpacyTripleExtractor(**options)


def test_without_spacy_the_app_imports_and_the_error_names_the_extra(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "spacy", None)  # what `import spacy` sees when absent
    extractor = SpacyTripleExtractor(model="not_loaded_yet")  # building needs no spaCy
    with pytest.raises(MissingDependencyError, match=r"spaCy is not installed.*\[graph\]"):
        extractor.extract(["Text."])
