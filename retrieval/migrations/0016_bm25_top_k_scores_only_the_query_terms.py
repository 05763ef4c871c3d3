"""BM25 top-k, cheaper per chunk scored: a score sums as many term slots as the query has.

0015 scores a chunk's row with one expression of 16 term slots, whatever the query's
length; a query of four terms (the usual) evaluated twelve empty slots per chunk
scored. Each statement that scores rows now comes in three forms, of 4, 8 and 16
slots, and the first holding the query's terms runs (each keeps its own cached plan).
The scores are the same sums, so the ranking is 0015's. Measured with a scratch
harness, the two functions taking turns on the bench's 200 queries of four terms: at 1M
chunks, top 100 p50 5.12 -> 4.59 ms, top 10 3.03 -> 2.77; at 100k, top 10 1.07 -> 0.94.
"""

from importlib import import_module

from django.db import migrations

cheaper_scoring = import_module("retrieval.migrations.0015_bm25_top_k_cheaper_scoring")

# The slot counts, smallest first; the last is 0015's (``MAX_SCORED_TERMS``).
SLOTS = (4, 8, cheaper_scoring.MAX_SCORED_TERMS)


def by_query_length(statement: str) -> str:
    """``statement`` (scoring with 0015's SCORE) once per slot count, in an IF choosing
    the first that holds the query's terms (``v_count``)."""
    branches = [
        f"IF v_count <= {slots} THEN" if i == 0 else f"ELSIF v_count <= {slots} THEN"
        for i, slots in enumerate(SLOTS[:-1])
    ] + ["ELSE"]
    return (
        "\n".join(
            f"{branch}\n{statement.replace(cheaper_scoring.SCORE, cheaper_scoring.score(slots))}"
            for branch, slots in zip(branches, SLOTS, strict=True)
        )
        + "\nEND IF;"
    )


# The statements scoring rows in 0015's function: step 1's, and step 2's fetch.
STEP_1 = f"""        SELECT coalesce(array_agg(x.id), '{{}}'), coalesce(array_agg(x.s), '{{}}')
            INTO v_ids, v_scores
            FROM (SELECT d.chunk_id AS id, {cheaper_scoring.SCORE} AS s FROM retrieval_bm25_chunk d
                  WHERE d.lexemes @@ ANY(v_clauses)
                    AND d.collection_id = p_collection) AS x;"""
STEP_2 = cheaper_scoring.CHANGES[2][1]


def changed(function: str) -> str:
    for statement in (STEP_1, STEP_2):
        assert function.count(statement) == 1, statement
        function = function.replace(statement, by_query_length(statement))
    return function


TOP_K_FUNCTION = changed(cheaper_scoring.TOP_K_FUNCTION)


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0015_bm25_top_k_cheaper_scoring")]

    operations = [
        migrations.RunSQL(TOP_K_FUNCTION, reverse_sql=cheaper_scoring.TOP_K_FUNCTION)
    ]
