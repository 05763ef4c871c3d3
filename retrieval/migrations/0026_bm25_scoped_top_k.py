"""BM25 top-k under a scope: the scope ANDed into the top-k function's index look-ups.

At 1M chunks a scope of 10% (100,000 chunks) over-fetched the collection's ranking at
1.47-1.76x the open search (bench/results/scoped-1m-run3..5.txt): too wide for the scope
marks (0025) to score its matches, too narrow for a short over-fetch. The top-k function
now takes the scope as marks (``p_scope``): every GIN look-up is ANDed with it, and a
term's postings are read as the look-up of its lexeme and the scope, so its pruning
bound θ comes from the scope's own chunks.

That is exact only when the marks are the scope, so array elements are now marked as
such (``tags[]="x"``, no longer ``tags="x"``, which ``{"tags": "x"}`` shares): a filter
of objects and arrays of scalars then matches by marks exactly the metadata that
contains it. The chunks whose metadata holds an array are marked again, with the
index dropped and built again as in 0025.
"""

from pathlib import Path

from django.db import migrations

FROZEN = Path(__file__).parent / "frozen"

MARKED_AGAIN = """
DROP INDEX retrieval_bm25_chunk_lexemes;
UPDATE retrieval_bm25_chunk AS d
    SET lexemes = ts_delete(d.lexemes, ARRAY(SELECT u.lexeme FROM unnest(d.lexemes) AS u
                                             WHERE u.lexeme LIKE '%#%'))
                  || array_to_tsvector(
                      retrieval_bm25_marks(c.collection_id, c.document_id, c.access, c.metadata))
    FROM retrieval_chunk c
    WHERE c.id = d.chunk_id AND jsonb_path_exists(c.metadata, 'strict $.** ? (@.type() == "array")');
CREATE INDEX retrieval_bm25_chunk_lexemes ON retrieval_bm25_chunk USING gin (lexemes)
    WITH (fastupdate = off);
"""


def leaves_0025() -> str:
    """The metadata leaves function as 0025 froze it."""
    text = (FROZEN / "0025_bm25_scope_marks.sql").read_text()
    start = text.index("CREATE OR REPLACE FUNCTION retrieval_bm25_metadata_leaves(")
    return text[start : text.index("CREATE OR REPLACE FUNCTION retrieval_bm25_marks(")]


FORWARD = (
    "DROP FUNCTION retrieval_bm25_top_k(bigint, text[], float8, float8, integer);\n"
    + (FROZEN / "0026_bm25_top_k.sql").read_text()
    + (FROZEN / "0026_bm25_metadata_leaves.sql").read_text()
    + MARKED_AGAIN
)

REVERSE = (
    "DROP FUNCTION retrieval_bm25_top_k(bigint, text[], float8, float8, integer, tsquery);\n"
    + (FROZEN / "0017_bm25_top_k.sql").read_text()
    + leaves_0025()
    + MARKED_AGAIN
)


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0025_bm25_scope_marks")]

    operations = [migrations.RunSQL(FORWARD, reverse_sql=REVERSE)]
