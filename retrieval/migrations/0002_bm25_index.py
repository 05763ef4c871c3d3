"""The BM25 index: postings, per-term document frequencies and per-collection statistics.

Plain tables rather than models: they are an index over ``retrieval_chunk``, written
with COPY by the ingestion service and read by the BM25 retriever. Statement-level
triggers keep them exact however chunks go (ORM, admin, raw SQL, a collection
deleted), in the deleting transaction. No foreign keys point at the app's tables,
so Django's ``flush`` (TRUNCATE, used by TransactionTestCase) still works; a
TRUNCATE of the chunk table empties the index too.
"""

from django.db import migrations

CREATE = """
CREATE TABLE retrieval_bm25_posting (
    collection_id bigint NOT NULL,
    term text NOT NULL,
    chunk_id bigint NOT NULL,
    tf integer NOT NULL,
    dl integer NOT NULL,
    PRIMARY KEY (collection_id, term, chunk_id) INCLUDE (tf, dl)
);
CREATE INDEX retrieval_bm25_posting_chunk ON retrieval_bm25_posting (chunk_id);

CREATE TABLE retrieval_bm25_term (
    collection_id bigint NOT NULL,
    term text NOT NULL,
    df integer NOT NULL,
    PRIMARY KEY (collection_id, term)
);

CREATE TABLE retrieval_bm25_stats (
    collection_id bigint PRIMARY KEY,
    chunk_count bigint NOT NULL,
    total_length bigint NOT NULL
);

CREATE FUNCTION retrieval_bm25_postings_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Sorted, so concurrent writers lock shared term rows in one order (no deadlock).
    INSERT INTO retrieval_bm25_term AS t (collection_id, term, df)
        SELECT collection_id, term, count(*) FROM added GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT (collection_id, term) DO UPDATE SET df = t.df + EXCLUDED.df;
    INSERT INTO retrieval_bm25_stats AS s (collection_id, chunk_count, total_length)
        SELECT collection_id, count(*), sum(dl)
        FROM (SELECT DISTINCT collection_id, chunk_id, dl FROM added) AS chunks GROUP BY 1 ORDER BY 1
        ON CONFLICT (collection_id) DO UPDATE
        SET chunk_count = s.chunk_count + EXCLUDED.chunk_count,
            total_length = s.total_length + EXCLUDED.total_length;
    RETURN NULL;
END $$;

CREATE FUNCTION retrieval_bm25_postings_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH gone AS (SELECT collection_id, term, count(*) AS n FROM removed GROUP BY 1, 2 ORDER BY 1, 2)
    UPDATE retrieval_bm25_term AS t SET df = t.df - gone.n
        FROM gone WHERE t.collection_id = gone.collection_id AND t.term = gone.term;
    DELETE FROM retrieval_bm25_term AS t USING (SELECT DISTINCT collection_id, term FROM removed) AS r
        WHERE t.collection_id = r.collection_id AND t.term = r.term AND t.df <= 0;
    WITH chunks AS (
        SELECT collection_id, count(*) AS n, sum(dl) AS length
        FROM (SELECT DISTINCT collection_id, chunk_id, dl FROM removed) AS c GROUP BY 1 ORDER BY 1
    )
    UPDATE retrieval_bm25_stats AS s
        SET chunk_count = s.chunk_count - chunks.n, total_length = s.total_length - chunks.length
        FROM chunks WHERE s.collection_id = chunks.collection_id;
    DELETE FROM retrieval_bm25_stats WHERE chunk_count <= 0;
    RETURN NULL;
END $$;

CREATE FUNCTION retrieval_bm25_chunks_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM retrieval_bm25_posting AS p USING deleted WHERE p.chunk_id = deleted.id;
    RETURN NULL;
END $$;

CREATE FUNCTION retrieval_bm25_chunks_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE retrieval_bm25_posting, retrieval_bm25_term, retrieval_bm25_stats;
    RETURN NULL;
END $$;

CREATE TRIGGER retrieval_bm25_postings_added AFTER INSERT ON retrieval_bm25_posting
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION retrieval_bm25_postings_added();
CREATE TRIGGER retrieval_bm25_postings_removed AFTER DELETE ON retrieval_bm25_posting
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION retrieval_bm25_postings_removed();
CREATE TRIGGER retrieval_bm25_chunks_deleted AFTER DELETE ON retrieval_chunk
    REFERENCING OLD TABLE AS deleted FOR EACH STATEMENT EXECUTE FUNCTION retrieval_bm25_chunks_deleted();
CREATE TRIGGER retrieval_bm25_chunks_truncated AFTER TRUNCATE ON retrieval_chunk
    FOR EACH STATEMENT EXECUTE FUNCTION retrieval_bm25_chunks_truncated();
"""

DROP = """
DROP TRIGGER IF EXISTS retrieval_bm25_chunks_deleted ON retrieval_chunk;
DROP TRIGGER IF EXISTS retrieval_bm25_chunks_truncated ON retrieval_chunk;
DROP TABLE IF EXISTS retrieval_bm25_posting, retrieval_bm25_term, retrieval_bm25_stats;
DROP FUNCTION IF EXISTS retrieval_bm25_postings_added(), retrieval_bm25_postings_removed(),
    retrieval_bm25_chunks_deleted(), retrieval_bm25_chunks_truncated();
"""


def index_existing_chunks(apps, schema_editor):
    """Give chunks written before this migration their postings (default analyzer)."""
    from retrieval.services.sparse.analyzer import Analyzer
    from retrieval.services.sparse.index import rebuild_postings

    Collection = apps.get_model("retrieval", "Collection")
    using = schema_editor.connection.alias
    for collection_id in Collection.objects.using(using).values_list("pk", flat=True):
        rebuild_postings(collection_id, Analyzer(), using=using)


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0001_initial")]

    operations = [
        migrations.RunSQL(CREATE, reverse_sql=DROP),
        migrations.RunPython(index_existing_chunks, migrations.RunPython.noop),
    ]
