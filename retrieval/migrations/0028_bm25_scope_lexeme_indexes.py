"""BM25 under a declared scope reads the scope's own GIN index.

A declared scope (``retrieval_scope_index``, migration 0027) now also has a partial GIN
index of its chunks' lexemes, its marks the predicate (built when it is declared: no
rows change here). The top-k function takes those marks (``p_indexed``): each look-up
holds them, and under them the function's statements are planned per call, with the
marks as a constant that the planner matches to that index's predicate. At 1M chunks a
10% scope's look-ups then read an index a tenth the size of the collection's and no
longer intersect each term with the scope's 100,000 marked chunks.
"""

from pathlib import Path

from django.db import migrations

FROZEN = Path(__file__).parent / "frozen"

FORWARD = (
    "DROP FUNCTION retrieval_bm25_top_k(bigint, text[], float8, float8, integer, tsquery);\n"
    + (FROZEN / "0028_bm25_top_k.sql").read_text()
)

REVERSE = (
    "DROP FUNCTION retrieval_bm25_top_k(bigint, text[], float8, float8, integer, tsquery, "
    "tsquery);\n" + (FROZEN / "0026_bm25_top_k.sql").read_text()
)


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0027_collection_scope_indexes")]

    operations = [migrations.RunSQL(FORWARD, reverse_sql=REVERSE)]
