"""Loading the chunks of a search's results, with their documents, in one statement each."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from django.db import connections

if TYPE_CHECKING:
    from django.db.models import Field, Model

    from retrieval.models import Chunk

#: What a result does not show, left unloaded (deferred): parsing the vectors' floats and
#: the documents' full text would cost more than the ranking itself.
UNLOADED = {"chunk": frozenset({"embedding", "embedding_next"}), "document": frozenset({"content"})}


def load_chunks(
    chunk_ids: Sequence[int], *, using: str, conditions: Sequence[str] = (), params: Sequence = ()
) -> dict[int, Chunk]:
    """Return the chunks of ``chunk_ids`` by id, each with its document loaded.

    One statement, built once per database, in place of the ORM's ``select_related``
    query (whose compiling took about half of the time); the instances are the ORM's
    own, from ``Model.from_db`` with each field's database converters, and the fields
    in :data:`UNLOADED` deferred. ``conditions`` on the chunk table (aliased ``c``),
    with their ``params``, restrict what is loaded (an access scope); a missing id is
    left out.
    """
    chunk_columns, document_columns = _columns(using)
    connection = connections[using]
    sql = (
        f"SELECT {chunk_columns.select('c')}, {document_columns.select('d')} "
        f"FROM {chunk_columns.table} c JOIN {document_columns.table} d ON d.id = c.document_id "
        f"WHERE {' AND '.join(['c.id = ANY(%s)', *conditions])}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [list(chunk_ids), *params])
        rows = cursor.fetchall()
    split = len(chunk_columns.names)
    chunks = {}
    for row in rows:
        chunk = chunk_columns.instance(row[:split], using, connection)
        chunk.document = document_columns.instance(row[split:], using, connection)
        chunks[chunk.pk] = chunk
    return chunks


def chunk_documents(chunk_ids: Sequence[int], *, using: str) -> dict[int, int]:
    """Return each chunk's document id, by chunk id (a missing id left out), in one
    statement without the ORM's compiling (a third of the time for a search's candidates)."""
    from retrieval.models import Chunk

    meta = Chunk._meta
    sql = (
        f'SELECT "{meta.pk.column}", "{meta.get_field("document").column}" '
        f'FROM {meta.db_table} WHERE "{meta.pk.column}" = ANY(%s)'
    )
    with connections[using].cursor() as cursor:
        cursor.execute(sql, [list(chunk_ids)])
        return dict(cursor.fetchall())


@dataclass(frozen=True)
class _Columns:
    """A model's loaded columns, their attribute names and their values' converters."""

    model: type[Model]
    fields: tuple[Field, ...]
    names: tuple[str, ...]
    converters: tuple[tuple[int, Any, tuple[Callable, ...]], ...]  # (position, column, ...)

    @classmethod
    def of(cls, model: type[Model], unloaded: frozenset[str], using: str) -> _Columns:
        connection = connections[using]
        fields = tuple(f for f in model._meta.concrete_fields if f.name not in unloaded)
        converters = []
        for position, field in enumerate(fields):
            column = field.get_col(model._meta.db_table)
            found = connection.ops.get_db_converters(column) + column.get_db_converters(connection)
            if found:
                converters.append((position, column, tuple(found)))
        return cls(model, fields, tuple(f.attname for f in fields), tuple(converters))

    @property
    def table(self) -> str:
        return self.model._meta.db_table

    def select(self, alias: str) -> str:
        return ", ".join(f'{alias}."{field.column}"' for field in self.fields)

    def instance(self, values: Sequence, using: str, connection: Any) -> Model:
        values = list(values)
        for position, column, converters in self.converters:
            for converter in converters:
                values[position] = converter(values[position], column, connection)
        return self.model.from_db(using, self.names, values)


@cache
def _columns(using: str) -> tuple[_Columns, _Columns]:
    from retrieval.models import Chunk, Document

    return (
        _Columns.of(Chunk, UNLOADED["chunk"], using),
        _Columns.of(Document, UNLOADED["document"], using),
    )
