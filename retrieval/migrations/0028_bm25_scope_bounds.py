"""BM25 term bounds of each declared scope (``retrieval/sql/bm25_scope_bounds.sql``). DRAFT.

Under a 10% scope of 1M chunks the top-k function took 1.80x the open search with the
collection's term bounds and 1.41x with the scope's own (a scratch copy of the function,
200 queries taking turns; README, scoped searches): within a scope a term's largest tf
is lower and its smallest ``dl / tf`` higher, so fewer term sets and posting lists can
reach the k-th score. The scopes a site declares (``Collection.scope_indexes``, 0027)
now keep such bounds, and the function takes them (``p_bounds``).
"""

from pathlib import Path

from django.db import migrations

FROZEN = Path(__file__).parent / "frozen"

TABLES = """
CREATE TABLE retrieval_bm25_scope (
    collection_id bigint NOT NULL,
    scope text NOT NULL,
    marks text NOT NULL,
    PRIMARY KEY (collection_id, scope)
);
CREATE TABLE retrieval_bm25_scope_term (
    collection_id bigint NOT NULL,
    scope text NOT NULL,
    term text NOT NULL,
    df bigint NOT NULL,
    max_tf integer NOT NULL,
    min_dl_per_tf float8 NOT NULL,
    min_dl_at_tf1 integer NOT NULL,
    PRIMARY KEY (collection_id, scope, term)
);
"""

FORWARD = (
    TABLES
    + (FROZEN / "0028_bm25_scope_bounds.sql").read_text()
    + "DROP FUNCTION retrieval_bm25_top_k(bigint, text[], float8, float8, integer, tsquery);\n"
    + (FROZEN / "0028_bm25_top_k.sql").read_text()
)

REVERSE = (
    "DROP FUNCTION retrieval_bm25_top_k(bigint, text[], float8, float8, integer, tsquery, text);\n"
    + (FROZEN / "0026_bm25_top_k.sql").read_text()
    + """
DROP TRIGGER retrieval_bm25_scope_terms_added ON retrieval_bm25_posting;
DROP TRIGGER retrieval_bm25_scope_marks_changed ON retrieval_chunk;
DROP TRIGGER retrieval_bm25_scope_terms_truncated ON retrieval_chunk;
DROP FUNCTION retrieval_bm25_scope_terms_added();
DROP FUNCTION retrieval_bm25_scope_marks_changed();
DROP FUNCTION retrieval_bm25_scope_terms_truncated();
DROP FUNCTION retrieval_bm25_scope_bounds_fill(bigint, text);
DROP TABLE retrieval_bm25_scope_term;
DROP TABLE retrieval_bm25_scope;
"""
)


def declare_existing(apps, schema_editor) -> None:
    """Give the scopes declared before this migration their bounds."""
    from retrieval.services.sparse.scope_bounds import declare_bounds

    Collection = apps.get_model("retrieval", "Collection")
    for collection in Collection.objects.using(schema_editor.connection.alias).exclude(
        scope_indexes=[]
    ):
        for declared in collection.scope_indexes:
            declare_bounds(collection.pk, declared, using=schema_editor.connection.alias)


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0027_collection_scope_indexes")]

    operations = [
        migrations.RunSQL(FORWARD, reverse_sql=REVERSE),
        migrations.RunPython(declare_existing, migrations.RunPython.noop),
    ]
