"""Per-term score bounds for BM25 top-k pruning: each term's largest tf and shortest dl.

A term's BM25 contribution ``w · tf / (tf + k1 · (1 - b + b · dl / avgdl))`` grows with
tf and shrinks with dl, so ``max_tf`` and ``min_dl`` over its postings bound it from
above whatever N, df and avgdl are at query time (they change with every write, so
the bound itself is computed per query). The insert trigger keeps them with
``greatest`` / ``least``; deletes leave them as they are, which keeps them valid
upper bounds (only looser) until the term's last posting goes and its row with it.
"""

from django.db import migrations

CREATE = """
ALTER TABLE retrieval_bm25_term
    ADD COLUMN max_tf integer NOT NULL DEFAULT 2147483647,
    ADD COLUMN min_dl integer NOT NULL DEFAULT 0;

UPDATE retrieval_bm25_term AS t SET max_tf = b.max_tf, min_dl = b.min_dl
    FROM (SELECT collection_id, term, max(tf) AS max_tf, min(dl) AS min_dl
          FROM retrieval_bm25_posting GROUP BY 1, 2) AS b
    WHERE t.collection_id = b.collection_id AND t.term = b.term;
"""

# The insert trigger of 0002 that also keeps the bounds (0011 replaces it; its reverse
# restores this one).
POSTINGS_ADDED = """
CREATE OR REPLACE FUNCTION retrieval_bm25_postings_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Sorted, so concurrent writers lock shared term rows in one order (no deadlock).
    INSERT INTO retrieval_bm25_term AS t (collection_id, term, df, max_tf, min_dl)
        SELECT collection_id, term, count(*), max(tf), min(dl) FROM added GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT (collection_id, term) DO UPDATE
        SET df = t.df + EXCLUDED.df,
            max_tf = greatest(t.max_tf, EXCLUDED.max_tf),
            min_dl = least(t.min_dl, EXCLUDED.min_dl);
    INSERT INTO retrieval_bm25_stats AS s (collection_id, chunk_count, total_length)
        SELECT collection_id, count(*), sum(dl)
        FROM (SELECT DISTINCT collection_id, chunk_id, dl FROM added) AS chunks GROUP BY 1 ORDER BY 1
        ON CONFLICT (collection_id) DO UPDATE
        SET chunk_count = s.chunk_count + EXCLUDED.chunk_count,
            total_length = s.total_length + EXCLUDED.total_length;
    RETURN NULL;
END $$;
"""

# The defaults bound nothing (any tf, any dl): rows written before this migration, or
# by the old trigger after a rollback of it, are still ranked exactly.
DROP = """
CREATE OR REPLACE FUNCTION retrieval_bm25_postings_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
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

ALTER TABLE retrieval_bm25_term DROP COLUMN max_tf, DROP COLUMN min_dl;
"""


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0009_traces_and_evaluation")]

    operations = [migrations.RunSQL(CREATE + POSTINGS_ADDED, reverse_sql=DROP)]
