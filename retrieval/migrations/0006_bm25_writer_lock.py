"""Writers of one collection's BM25 index take turns: no deadlocks on shared term rows.

Two transactions replacing different documents of one collection update the same
term and statistics rows, one statement deleting old postings and another adding
new ones; each statement locks its rows in order, but the two statements together
do not, so two writers could each hold a row the other needs (PostgreSQL then
aborts one of them). These triggers fire before the index's own (triggers run in
name order) and take a transaction-scoped advisory lock per collection, in
collection order, so a collection's writers queue up instead. Ingestion holds it
only for the few statements that write a group's chunks; readers never take it.
"""

from django.db import migrations

# pg_advisory_xact_lock(key, collection id): the key is this app's own namespace
# (the bytes of "rbm2"), so it does not collide with a host's advisory locks.
LOCK_NAMESPACE = 0x72626D32

CREATE = f"""
CREATE FUNCTION retrieval_bm25_lock_collections() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock({LOCK_NAMESPACE}, (id % 2147483647)::int)
        FROM (SELECT DISTINCT collection_id FROM changed ORDER BY 1) AS c(id);
    RETURN NULL;
END $$;

CREATE TRIGGER retrieval_bm25_lock_on_add AFTER INSERT ON retrieval_bm25_posting
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT
    EXECUTE FUNCTION retrieval_bm25_lock_collections();
CREATE TRIGGER retrieval_bm25_lock_on_remove AFTER DELETE ON retrieval_bm25_posting
    REFERENCING OLD TABLE AS changed FOR EACH STATEMENT
    EXECUTE FUNCTION retrieval_bm25_lock_collections();
"""

DROP = """
DROP TRIGGER IF EXISTS retrieval_bm25_lock_on_add ON retrieval_bm25_posting;
DROP TRIGGER IF EXISTS retrieval_bm25_lock_on_remove ON retrieval_bm25_posting;
DROP FUNCTION IF EXISTS retrieval_bm25_lock_collections();
"""


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0005_collection_default_pipeline")]

    operations = [migrations.RunSQL(CREATE, reverse_sql=DROP)]
