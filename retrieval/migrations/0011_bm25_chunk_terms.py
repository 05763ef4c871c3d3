"""BM25 top-k without reading whole posting lists: each chunk's terms, and a ranking function.

``retrieval_bm25_chunk`` holds one row per indexed chunk: its length, its term
frequencies (``tfs``, a jsonb object, so a chunk is scored from its own row) and its
terms as a GIN-indexed ``tsvector`` (``lexemes``, each term prefixed with the
collection id so collections never see each other's chunks, and marked ``+`` again
when the chunk holds it more than once). Triggers on the postings keep it exact in
the writing transaction, as the other BM25 tables.

``retrieval_bm25_top_k`` ranks with it: GIN finds the chunks holding several of the
query's terms (a ``tsquery`` of term sets) without reading the posting lists one row
at a time, and each is scored from its own row; a chunk holding a set of terms
scores at most their bounds (``retrieval_bm25_term``: ``max_tf`` and
``min_dl_per_tf`` for any posting, ``min_dl_at_tf1`` for those of tf 1), so only
the sets whose bounds reach the k-th best score so far (θ) are fetched, and only
the single terms whose bound reaches it have their posting lists read. The steps
and why the result is the exhaustive ranking's: ``retrieval/services/sparse/ranking.py``.
"""

from importlib import import_module
from pathlib import Path

from django.db import migrations

term_bounds = import_module("retrieval.migrations.0010_bm25_term_bounds")

# The ranking function as this migration created it (retrieval/sql/bm25_top_k.sql holds
# the current one).
TOP_K_FUNCTION = (Path(__file__).parent / "frozen" / "0011_bm25_top_k.sql").read_text()

# Terms longer than this are left out of the lexemes (tsvector's limit is 2 KB); a
# query holding one is ranked exhaustively.
MAX_LEXEME_BYTES = 1000

# A chunk's lexemes, aggregated from its postings: ``<collection>:<term>`` for each
# term, and ``<collection>+:<term>`` for each term it holds more than once.
LEXEMES = f"""array_to_tsvector(
        coalesce(array_agg(collection_id || ':' || term)
                     FILTER (WHERE octet_length(term) <= {MAX_LEXEME_BYTES}), '{{}}')
        || coalesce(array_agg(collection_id || '+:' || term)
                        FILTER (WHERE tf > 1 AND octet_length(term) <= {MAX_LEXEME_BYTES}), '{{}}'))"""

CREATE = f"""
CREATE TABLE retrieval_bm25_chunk (
    chunk_id bigint PRIMARY KEY,
    collection_id bigint NOT NULL,
    dl integer NOT NULL,
    tfs jsonb NOT NULL,
    lexemes tsvector NOT NULL
);
CREATE INDEX retrieval_bm25_chunk_lexemes ON retrieval_bm25_chunk USING gin (lexemes);
-- A long chunk's row outgrows a page's share: its lexemes (read through the index
-- only) move out of line first, so ``tfs`` stays inline and uncompressed, read as is.
ALTER TABLE retrieval_bm25_chunk ALTER COLUMN tfs SET STORAGE MAIN,
                                 ALTER COLUMN lexemes SET STORAGE EXTERNAL;

CREATE FUNCTION retrieval_bm25_chunk_terms_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO retrieval_bm25_chunk AS c (chunk_id, collection_id, dl, tfs, lexemes)
        SELECT chunk_id, collection_id, max(dl), jsonb_object_agg(term, tf), {LEXEMES}
        FROM added GROUP BY chunk_id, collection_id ORDER BY chunk_id
        ON CONFLICT (chunk_id) DO UPDATE
        SET dl = EXCLUDED.dl, tfs = c.tfs || EXCLUDED.tfs, lexemes = c.lexemes || EXCLUDED.lexemes;
    RETURN NULL;
END $$;

CREATE FUNCTION retrieval_bm25_chunk_terms_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Chunks that lost every term go; the others (a partial rewrite) lose those terms.
    DELETE FROM retrieval_bm25_chunk AS c
        USING (SELECT chunk_id, count(*) AS n FROM removed GROUP BY chunk_id) AS g
        WHERE c.chunk_id = g.chunk_id AND g.n >= (SELECT count(*) FROM jsonb_object_keys(c.tfs));
    UPDATE retrieval_bm25_chunk AS c
        SET tfs = c.tfs - g.terms, lexemes = ts_delete(c.lexemes, g.lexemes)
        FROM (SELECT chunk_id, array_agg(term) AS terms,
                     array_agg(collection_id || ':' || term)
                         || array_agg(collection_id || '+:' || term) AS lexemes
              FROM removed GROUP BY chunk_id) AS g
        WHERE c.chunk_id = g.chunk_id;
    RETURN NULL;
END $$;

CREATE TRIGGER retrieval_bm25_chunk_terms_added AFTER INSERT ON retrieval_bm25_posting
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT
    EXECUTE FUNCTION retrieval_bm25_chunk_terms_added();
CREATE TRIGGER retrieval_bm25_chunk_terms_removed AFTER DELETE ON retrieval_bm25_posting
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT
    EXECUTE FUNCTION retrieval_bm25_chunk_terms_removed();

CREATE OR REPLACE FUNCTION retrieval_bm25_chunks_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE retrieval_bm25_posting, retrieval_bm25_term, retrieval_bm25_stats, retrieval_bm25_chunk;
    RETURN NULL;
END $$;

INSERT INTO retrieval_bm25_chunk (chunk_id, collection_id, dl, tfs, lexemes)
    SELECT chunk_id, collection_id, max(dl), jsonb_object_agg(term, tf), {LEXEMES}
    FROM retrieval_bm25_posting GROUP BY chunk_id, collection_id;
"""

# A tighter bound than 0010's (largest tf, shortest chunk, maybe not the same posting):
# ``w · tf / (tf + a + b' · dl) = w / (1 + a / tf + b' · dl / tf)``, so a term's largest
# tf and smallest dl / tf bound it; and its shortest chunk holding it once bounds those
# postings (most of them). The defaults, 0, bound nothing about dl.
MIN_DL_AT_TF1 = "coalesce(min(dl) FILTER (WHERE tf = 1), 2147483647)"  # none: nothing to bound

TERM_BOUND = f"""
ALTER TABLE retrieval_bm25_term ADD COLUMN min_dl_per_tf float8 NOT NULL DEFAULT 0,
                                ADD COLUMN min_dl_at_tf1 integer NOT NULL DEFAULT 0;
UPDATE retrieval_bm25_term AS t
    SET min_dl_per_tf = b.min_dl_per_tf, min_dl_at_tf1 = b.min_dl_at_tf1
    FROM (SELECT collection_id, term, min(dl::float8 / tf) AS min_dl_per_tf,
                 {MIN_DL_AT_TF1} AS min_dl_at_tf1
          FROM retrieval_bm25_posting GROUP BY 1, 2) AS b
    WHERE t.collection_id = b.collection_id AND t.term = b.term;
ALTER TABLE retrieval_bm25_term DROP COLUMN min_dl;

CREATE OR REPLACE FUNCTION retrieval_bm25_postings_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Sorted, so concurrent writers lock shared term rows in one order (no deadlock).
    INSERT INTO retrieval_bm25_term AS t (collection_id, term, df, max_tf, min_dl_per_tf,
                                          min_dl_at_tf1)
        SELECT collection_id, term, count(*), max(tf), min(dl::float8 / tf), {MIN_DL_AT_TF1}
        FROM added GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT (collection_id, term) DO UPDATE
        SET df = t.df + EXCLUDED.df,
            max_tf = greatest(t.max_tf, EXCLUDED.max_tf),
            min_dl_per_tf = least(t.min_dl_per_tf, EXCLUDED.min_dl_per_tf),
            min_dl_at_tf1 = least(t.min_dl_at_tf1, EXCLUDED.min_dl_at_tf1);
    INSERT INTO retrieval_bm25_stats AS s (collection_id, chunk_count, total_length)
        SELECT collection_id, count(*), sum(dl)
        FROM (SELECT DISTINCT collection_id, chunk_id, dl FROM added) AS chunks GROUP BY 1 ORDER BY 1
        ON CONFLICT (collection_id) DO UPDATE
        SET chunk_count = s.chunk_count + EXCLUDED.chunk_count,
            total_length = s.total_length + EXCLUDED.total_length;
    RETURN NULL;
END $$;
"""

# Back to 0010's bounds: a min_dl of 0 bounds nothing about dl, so no backfill is needed.
TERM_BOUND_REVERSE = (
    "ALTER TABLE retrieval_bm25_term ADD COLUMN min_dl integer NOT NULL DEFAULT 0;"
    + term_bounds.POSTINGS_ADDED
    + "ALTER TABLE retrieval_bm25_term DROP COLUMN min_dl_per_tf, DROP COLUMN min_dl_at_tf1;"
)

DROP = """
DROP FUNCTION IF EXISTS retrieval_bm25_top_k(bigint, text[], float8, float8, integer);
DROP TRIGGER IF EXISTS retrieval_bm25_chunk_terms_added ON retrieval_bm25_posting;
DROP TRIGGER IF EXISTS retrieval_bm25_chunk_terms_removed ON retrieval_bm25_posting;
DROP FUNCTION IF EXISTS retrieval_bm25_chunk_terms_added(), retrieval_bm25_chunk_terms_removed();
CREATE OR REPLACE FUNCTION retrieval_bm25_chunks_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE retrieval_bm25_posting, retrieval_bm25_term, retrieval_bm25_stats;
    RETURN NULL;
END $$;
DROP TABLE IF EXISTS retrieval_bm25_chunk;
"""


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0010_bm25_term_bounds")]

    operations = [
        migrations.RunSQL(TERM_BOUND + CREATE + TOP_K_FUNCTION, reverse_sql=DROP + TERM_BOUND_REVERSE)
    ]
