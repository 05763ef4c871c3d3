"""Facets: the values of chosen document metadata keys, each with its number of documents.

The keys are ``SEARCH_PAGE_FACETS``; a value is a string, or a string in a list
(``{"tags": ["a", "b"]}`` counts under both). Counts are of the indexed documents of the
collection the reader may see, under the values chosen for the other keys, so no count
tells of a hidden document.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db import connections
from django.db.models import Q, QuerySet

from retrieval.conf import retrieval_settings
from retrieval.models import Collection, Document
from retrieval.services.access import Scope

#: The most values listed per key, most frequent first.
FACET_VALUES = 10


@dataclass(frozen=True)
class FacetValue:
    value: str
    count: int
    selected: bool = False


@dataclass(frozen=True)
class Facet:
    """A metadata key's values; ``selected`` is the reader's choice (counted or not) and
    ``in_lists`` tells whether the documents hold the key's values in lists."""

    key: str
    values: tuple[FacetValue, ...]
    selected: str | None = None
    in_lists: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "selected": self.selected,
            "values": [{"value": v.value, "count": v.count} for v in self.values],
        }


def facet_keys() -> list[str]:
    """Return ``SEARCH_PAGE_FACETS``: the metadata keys offered as facets."""
    return [key for key in retrieval_settings.SEARCH_PAGE_FACETS or () if isinstance(key, str)]


def facet_counts(
    collection: Collection, *, scope: Scope, selected: Mapping[str, str]
) -> tuple[Facet, ...]:
    """Return the facets of ``collection`` as ``scope`` sees it, with ``selected`` values
    (key -> value) marked; a key that is not a facet raises ``ValueError``."""
    keys = facet_keys()
    unknown = sorted(set(selected) - set(keys))
    if unknown:
        raise ValueError(f"No facet {unknown[0]!r}; facets: {', '.join(keys) or '(none)'}.")
    documents = scope.restrict(
        Document.objects.filter(collection=collection, status=Document.Status.INDEXED),
        document="pk",
    )
    facets = []
    for key in keys:
        others = documents
        for other, value in selected.items():
            if other != key:
                others = others.filter(_has(other, value))
        counts = _counts(others, key)
        choice = selected.get(key)
        facets.append(
            Facet(
                key=key,
                values=tuple(FacetValue(v, n, v == choice) for v, n in counts),
                selected=choice,
                in_lists=choice is not None
                and documents.filter(metadata__contains={key: [choice]}).exists(),
            )
        )
    return tuple(facets)


def facet_filter(facets: tuple[Facet, ...]) -> dict[str, Any]:
    """Return the metadata filter (``Filters.metadata``) the chosen values make: a value
    in a list for keys whose documents hold lists, else the value itself."""
    return {
        facet.key: [facet.selected] if facet.in_lists else facet.selected
        for facet in facets
        if facet.selected is not None
    }


def _has(key: str, value: str) -> Q:
    return Q(metadata__contains={key: value}) | Q(metadata__contains={key: [value]})


def _counts(documents: QuerySet[Document], key: str) -> list[tuple[str, int]]:
    """Return ``key``'s string values among ``documents`` with their document counts."""
    inner, params = documents.order_by().values("pk").query.sql_with_params()
    table = Document._meta.db_table
    sql = f"""
        SELECT v.value #>> '{{}}' AS value, count(DISTINCT d.id) AS n
        FROM {table} d
        CROSS JOIN LATERAL jsonb_array_elements(
            CASE jsonb_typeof(d.metadata -> %s)
                WHEN 'array' THEN d.metadata -> %s
                ELSE jsonb_build_array(d.metadata -> %s)
            END
        ) AS v(value)
        WHERE jsonb_typeof(v.value) = 'string' AND d.id IN ({inner})
        GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT %s
    """  # noqa: S608 - the table is the model's, the subquery Django's with its parameters
    with connections[documents.db].cursor() as cursor:
        cursor.execute(sql, [key, key, key, *params, FACET_VALUES])
        return [(value, count) for value, count in cursor.fetchall()]
