"""A narrow scope's BM25 ranking through the scope marks, as a PL/pgSQL function.

``retrieval_bm25_marked_top_k`` (``retrieval/sql/bm25_marked_top_k.sql``) scores the
chunks holding a scope's marks and a query term, the statement the scoped search sent
before (``sparse/scoped.py``), now planned once per connection. At 1M chunks its
planning took longer than its run (0.6-0.75 ms against 0.12-0.16).
"""

from pathlib import Path

from django.db import migrations

FROZEN = Path(__file__).parent / "frozen"


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0028_bm25_scope_lexeme_indexes")]

    operations = [
        migrations.RunSQL(
            (FROZEN / "0029_bm25_marked_top_k.sql").read_text(),
            reverse_sql="DROP FUNCTION retrieval_bm25_marked_top_k(bigint, text[], float8, "
            "float8, integer, tsquery);",
        )
    ]
