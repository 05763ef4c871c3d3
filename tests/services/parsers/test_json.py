"""JsonParser: one ``path: value`` line per leaf, JSON Lines, precise error locations."""

from __future__ import annotations

import pytest

from retrieval.exceptions import ParseError
from retrieval.services.parsers.json import JsonParser
from retrieval.services.types import ParsedDocument
from retrieval.testing.parsers import assert_well_formed


def parse(source: str | bytes, filename: str | None = "data.json") -> ParsedDocument:
    data = source.encode() if isinstance(source, str) else source
    return JsonParser().parse(data, filename=filename)


def test_nested_objects_and_arrays_flatten_in_document_order() -> None:
    source = """{
      "user": {"name": "Alice", "age": 30},
      "items": [{"id": 3}, {"id": 4, "tags": ["a", "b"]}],
      "flags": {"active": true, "deleted": false},
      "note": null,
      "zeta": 1, "alpha": 2
    }"""

    assert parse(source).text.split("\n") == [
        "user.name: Alice",
        "user.age: 30",
        "items[0].id: 3",
        "items[1].id: 4",
        "items[1].tags[0]: a",
        "items[1].tags[1]: b",
        "flags.active: true",
        "flags.deleted: false",
        "note: null",
        "zeta: 1",
        "alpha: 2",
    ]


def test_keys_that_are_not_identifiers_are_quoted_in_brackets() -> None:
    source = '{"labels": {"app.kubernetes.io/name": "web", "a b": 1, "": 2, "say \\"hi\\"": 3}}'

    assert parse(source).text.split("\n") == [
        'labels["app.kubernetes.io/name"]: web',
        'labels["a b"]: 1',
        'labels[""]: 2',
        'labels["say \\"hi\\""]: 3',
    ]


def test_empty_containers_strings_and_numbers_print_exactly() -> None:
    source = '{"o": {}, "a": [], "s": "", "n": 1.50, "big": 12345678901234567890, "e": 1E5}'

    assert parse(source).text.split("\n") == [
        "o: {}",
        "a: []",
        's: ""',
        "n: 1.50",
        "big: 12345678901234567890",
        "e: 1E5",
    ]


def test_newlines_inside_strings_become_one_space() -> None:
    assert parse('{"text": "line one\\n\\n  line two\\r\\nthree"}').text == (
        "text: line one line two three"
    )


def test_unicode_keys_and_values_are_kept() -> None:
    source = '{"名前": "太郎", "café": "naïve ✓", "emoji 🙂": "\\u00e9"}'

    assert parse(source).text.split("\n") == [
        "名前: 太郎",
        "café: naïve ✓",
        '["emoji 🙂"]: é',
    ]


@pytest.mark.parametrize(
    ("source", "text"),
    [("42", "42"), ('"hello"', "hello"), ("[]", "[]"), ("{}", "{}"), ('" "', '" "')],
)
def test_top_level_scalar_or_empty_container_prints_just_the_value(source: str, text: str) -> None:
    assert parse(source).text == text


def test_top_level_array_paths_start_with_the_index() -> None:
    assert parse('[{"id": 1}, [true]]').text == "[0].id: 1\n[1][0]: true"


def test_one_section_per_top_level_key() -> None:
    document = parse('{"meta": {"a": 1, "b": 2}, "odd key": [], "c": "x"}')
    texts = [document.text[s.start : s.end] for s in document.sections]

    assert [s.heading_path for s in document.sections] == [("meta",), ("odd key",), ("c",)]
    assert texts == ["meta.a: 1\nmeta.b: 2", '["odd key"]: []', "c: x"]
    assert_well_formed(document)


def test_title_comes_from_title_then_name_then_filename() -> None:
    assert parse('{"name": "Widget", "title": "The widget"}').title == "The widget"
    assert parse('{"name": "Widget", "title": ""}').title == "Widget"
    assert parse('{"title": 5}', filename="dir/config.json").title == "config"
    assert parse('[{"title": "nested"}]', filename="list.json").title == "list"


def test_malformed_json_names_line_and_column() -> None:
    with pytest.raises(ParseError, match=r"'data.json'.*line 3, column 8: Expecting value"):
        parse('{\n  "a": 1,\n  "b": ,\n}')


def test_truncated_json_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match=r"line 1, column \d+"):
        parse('{"a": [1, 2')


def test_json_lines_prefix_each_record_and_skip_blank_lines() -> None:
    document = parse('{"id": 1, "ok": true}\n\n[2, 3]\r\n"text"\n', filename="log.jsonl")

    assert document.text.split("\n") == [
        "[0].id: 1",
        "[0].ok: true",
        "[1][0]: 2",
        "[1][1]: 3",
        "[2]: text",
    ]
    assert [s.heading_path for s in document.sections] == [("[0]",), ("[1]",), ("[2]",)]
    assert document.metadata == {"format": "jsonl", "records": 3}
    assert document.title == "log"
    assert_well_formed(document)


def test_json_lines_error_names_the_line_of_the_file() -> None:
    with pytest.raises(ParseError, match=r"'events.ndjson': line 4 is not valid JSON \(column 9"):
        parse('{"a": 1}\n{"a": 2}\n\n{"a": 3,}\n', filename="events.ndjson")


def test_json_lines_in_a_json_file_are_read_as_records() -> None:
    assert parse('{"a": 1}\n{"a": 2}\n').text == "[0].a: 1\n[1].a: 2"


def test_invalid_utf8_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="not valid utf-8"):
        parse(b'{"a": "caf\xe9"}')


def test_utf16_json_is_decoded() -> None:
    assert parse('{"a": "é"}'.encode("utf-16")).text == "a: é"


def test_excessive_nesting_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="nested too deeply"):
        parse("[" * 100_000 + "]" * 100_000)
