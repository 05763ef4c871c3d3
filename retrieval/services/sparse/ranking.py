"""Exact BM25 top-k that reads a fraction of the postings (migrations 0010 and 0011).

``retrieval_bm25_top_k``, a PL/pgSQL function (its plans are cached per connection),
ranks a whole collection:

1. the query's terms are ordered by their bound, the most a term can add to any
   chunk's score (``w / (1 + a / max_tf + b' · min(dl / tf))``: its largest tf, its
   smallest length per occurrence);
2. GIN finds the chunks holding all of the (up to) four highest-bound terms, and each
   is scored exactly from its own row (``retrieval_bm25_chunk.tfs``); while fewer than
   k are found, the chunks holding all but one of them, down to two. The k-th best
   score, θ, is a lower bound of the final k-th score;
3. a chunk holding several query terms scores at most the sum of their bounds. A
   search over term sets, by decreasing bound, finds the sets a chunk must hold to
   reach θ, and GIN fetches their chunks (those step 2 has not scored) to be scored;
4. a chunk holding one query term scores that term's contribution: only terms whose
   bound reaches θ have their posting list read, and only postings reaching θ count.

Everything else provably scores below θ, so the result is the exhaustive ranking's
(same scores; chunks of equal score may swap). A query of more than four terms
whose first four give fewer than k chunks to bound the rest reads every posting, as
a filtered search does (``BM25Retriever.score``).
"""

from __future__ import annotations

TOP_K_SQL = "SELECT chunk_id, score FROM retrieval_bm25_top_k(%s, %s::text[], %s, %s, %s)"
