"""One normal form of a query's text, as SQL expressions: what search analytics group
queries by and what promotions match.

Lower case, every run of whitespace one space, no space at either end. PostgreSQL
computes it (stored generated columns of :class:`~retrieval.models.QueryTrace` and
:class:`~retrieval.models.Promotion`, and the query a promotion is matched against),
so the two sides are normalised by the same functions.
"""

from __future__ import annotations

import re

from django.db.models import BooleanField, Expression, F, Func, TextField, Value
from django.db.models.functions import Left, Lower, Replace, Trim

__all__ = [
    "QUERY_KEY_LENGTH",
    "key_of",
    "like_pattern",
    "matches",
    "normalized",
    "query_key",
]

#: Characters of a normalised query that analytics group by (longer ones are cut).
QUERY_KEY_LENGTH = 200


def normalized(expression: Expression | str) -> Func:
    """Return ``expression`` (a field name or an expression) in normal form."""
    source = F(expression) if isinstance(expression, str) else expression
    spaced = Func(
        source,
        Value(r"\s+"),
        Value(" "),
        Value("g"),
        function="regexp_replace",
        output_field=TextField(),
    )
    return Trim(Lower(spaced, output_field=TextField()), output_field=TextField())


def query_key(field: str) -> Func:
    """Return the key analytics group a query by: its normal form, cut to 200 characters."""
    return Left(normalized(field), QUERY_KEY_LENGTH, output_field=TextField())


def key_of(query: str) -> str:
    """Return the key of ``query`` as :func:`query_key` computes it in SQL, in Python (for
    a link to one query's traces); a key is its own key."""
    return re.sub(r"\s+", " ", query.lower()).strip()[:QUERY_KEY_LENGTH]


def like_pattern(field: str) -> Func:
    """Return a promotion's pattern as a ``LIKE`` pattern: normalised, ``%``, ``_`` and
    ``\\`` taken literally, and ``*`` standing for any text."""
    escaped = normalized(field)
    for special in ("\\", "%", "_"):
        escaped = Replace(escaped, Value(special), Value(f"\\{special}"), output_field=TextField())
    return Replace(escaped, Value("*"), Value("%"), output_field=TextField())


def matches(query: str | Expression, pattern_field: str = "pattern") -> Func:
    """Return the condition that ``query``, normalised, matches the ``LIKE`` pattern in
    ``pattern_field``; an expression (a normal form already, e.g. ``query_key``) is
    matched as it is."""
    text = normalized(Value(query)) if isinstance(query, str) else query
    return Func(
        text,
        F(pattern_field),
        template="%(expressions)s",
        arg_joiner=" LIKE ",
        output_field=BooleanField(),
    )
