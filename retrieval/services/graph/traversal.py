"""Graph walks in PostgreSQL: beam-search expansion and an entity's neighbourhood.

Both are one recursive CTE over ``retrieval_triple``. At each hop every frontier
entity follows its ``beam_width`` most confident triples, in either direction
(the subject-key and object-key indexes each serve one direction), never
returning to an entity already on its path.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db import connection

from retrieval.models import Chunk, Collection
from retrieval.services.core.filters import Filters
from retrieval.services.graph.entities import entity_key

if TYPE_CHECKING:
    from retrieval.services.access import Scope

# The walk's step: ``{beam}``, ``{predicates}`` are filled in by the callers.
_STEP = """
  SELECT w.seed_chunk, w.seed_score, w.source_entity, n.other::text, w.hop + 1, n.id,
         n.chunk_id, w.path || n.other::text
  FROM walk w CROSS JOIN LATERAL (
    SELECT * FROM (
      SELECT t.id, t.chunk_id, t.object_key AS other, t.confidence FROM retrieval_triple t
      WHERE t.collection_id = %s AND t.subject_key = w.entity AND t.confidence >= %s {predicates}
      UNION ALL
      SELECT t.id, t.chunk_id, t.subject_key AS other, t.confidence FROM retrieval_triple t
      WHERE t.collection_id = %s AND t.object_key = w.entity AND t.confidence >= %s {predicates}
    ) both_ways
    WHERE NOT both_ways.other = ANY(w.path)
    ORDER BY both_ways.confidence DESC, both_ways.id
    LIMIT %s
  ) n
  WHERE w.hop < %s
"""
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Expansion:
    """A chunk reached from a seed hit by following triples."""

    chunk_id: int
    score: float
    hop: int
    triple_id: int
    source_entity: str
    path: tuple[str, ...]
    seed_chunk_id: int
    confidence: float
    degree: int  # triples of the source entity: how specific it is
    role: int  # 0: the source entity is a subject of the seed's triples


def _step(
    collection_id: int,
    min_confidence: float,
    predicates: Sequence[str] | None,
    beam: int,
    max_hops: int,
    skip_chunks: Sequence[int] = (),
    scope: Filters | None = None,
) -> tuple[str, list]:
    conditions, extra = [], []
    scoped, scoped_params = (scope or Filters()).scope_only().sql("sc", collection_id=collection_id)
    if scoped:
        # A triple of a chunk outside the access scope is never followed: its ends,
        # predicate and path would show what the hidden chunk says.
        conditions.append(
            "AND EXISTS (SELECT 1 FROM retrieval_chunk sc WHERE sc.id = t.chunk_id AND "
            + " AND ".join(scoped)
            + ")"
        )
        extra.extend(scoped_params)
    if predicates:
        conditions.append("AND t.predicate_key = ANY(%s)")
        extra.append(list(predicates))
    if skip_chunks:
        # A triple of a chunk already in the results leads nowhere new.
        conditions.append("AND NOT (t.chunk_id = ANY(%s::bigint[]))")
        extra.append(list(skip_chunks))
    condition = " ".join(conditions)
    params = [collection_id, min_confidence, *extra, collection_id, min_confidence, *extra]
    return _STEP.format(predicates=condition), [*params, beam, max_hops]


def mentioned_keys(text: str, *, min_words: int = 2, max_words: int = 4) -> set[str]:
    """Return the entity keys of every run of ``min_words`` to ``max_words`` words in ``text``.

    Single words are left out: matched in free text, "model" or "token" would tie
    every chunk to the busiest hubs of the graph. A chunk's own triples still
    name its one-word entities.
    """
    words = _WORD.findall(text)
    keys = set()
    for n in range(min_words, max_words + 1):
        for i in range(len(words) - n + 1):
            key = entity_key(" ".join(words[i : i + n]))
            if key:
                keys.add(key)
    return keys


def expand(
    collection: Collection,
    seeds: Sequence[tuple[int, float]],
    *,
    beam_width: int,
    max_hops: int,
    hop_decay: float,
    max_seed_entities: int,
    min_confidence: float = 0.0,
    predicates: Sequence[str] | None = None,
    filters: Filters | None = None,
    exclude: Sequence[int] = (),
) -> list[Expansion]:
    """Return the chunks reached from ``seeds`` (chunk id, score), best first.

    A seed's entities are the subjects and objects of its chunk's triples and the
    graph entities its text mentions. An expansion scores its seed's score times
    ``hop_decay`` per hop; each chunk appears once (its best path), chunks in
    ``exclude`` (the base results) never.
    """
    if not seeds:
        return []
    ids = [chunk_id for chunk_id, _ in seeds]
    scores = [float(score) for _, score in seeds]
    texts = dict(Chunk.objects.filter(pk__in=ids).values_list("pk", "content"))
    m_ids, m_scores, m_keys = [], [], []
    for chunk_id, score in seeds:
        for key in mentioned_keys(texts.get(chunk_id, "")):
            m_ids.append(chunk_id)
            m_scores.append(float(score))
            m_keys.append(key)
    step, step_params = _step(
        collection.pk,
        min_confidence,
        predicates,
        beam_width,
        max_hops,
        skip_chunks=exclude,
        scope=filters,
    )
    filter_sql, filter_params = (filters or Filters()).sql("c", collection_id=collection.pk)
    where = "".join(f" AND {condition}" for condition in filter_sql)
    sql = f"""
    WITH RECURSIVE
    hits(chunk_id, score) AS (SELECT * FROM unnest(%s::bigint[], %s::float8[])),
    mentions(chunk_id, score, entity, role) AS (
      -- role 0: a subject of the hit's own triples, what the chunk is about.
      SELECT h.chunk_id, h.score, t.subject_key, 0 FROM hits h
        JOIN retrieval_triple t ON t.chunk_id = h.chunk_id
      UNION ALL
      SELECT h.chunk_id, h.score, t.object_key, 1 FROM hits h
        JOIN retrieval_triple t ON t.chunk_id = h.chunk_id
      UNION ALL
      SELECT m.chunk_id, m.score, e.key, 1
        FROM unnest(%s::bigint[], %s::float8[], %s::text[]) AS m(chunk_id, score, key)
        JOIN retrieval_entity e ON e.collection_id = %s AND e.key = m.key
    ),
    best_mention AS (
      SELECT DISTINCT ON (entity) entity, chunk_id, score, role FROM mentions
      ORDER BY entity, score DESC, role, chunk_id
    ),
    start AS (
      -- An entity with fewer triples is more specific to its seed: "all-MiniLM-L6-v2"
      -- says more about a chunk than "model" does. Counts stop at 1000.
      SELECT b.chunk_id::bigint AS chunk_id, b.score::float8 AS score, b.entity::text AS entity,
        b.role,
        (SELECT count(*) FROM (SELECT 1 FROM retrieval_triple t WHERE t.collection_id = %s
                               AND t.subject_key = b.entity LIMIT 1000) AS s)
        + (SELECT count(*) FROM (SELECT 1 FROM retrieval_triple t WHERE t.collection_id = %s
                                 AND t.object_key = b.entity LIMIT 1000) AS o) AS degree
      FROM best_mention b ORDER BY score DESC, role, degree, entity LIMIT %s
    ),
    walk(seed_chunk, seed_score, source_entity, entity, hop, triple_id, chunk_id, path) AS (
      SELECT chunk_id, score, entity, entity, 0, NULL::bigint, NULL::bigint, ARRAY[entity]
      FROM start
      UNION ALL {step}
    )
    SELECT DISTINCT ON (w.chunk_id) w.chunk_id, w.seed_score * power(%s, w.hop) AS score,
           w.hop, w.triple_id, w.source_entity, w.path, w.seed_chunk, t.confidence, s.degree,
           s.role
    FROM walk w JOIN retrieval_chunk c ON c.id = w.chunk_id
    JOIN retrieval_triple t ON t.id = w.triple_id
    JOIN start s ON s.entity = w.source_entity
    WHERE w.hop > 0 AND NOT (w.chunk_id = ANY(%s::bigint[])) {where}
    ORDER BY w.chunk_id, score DESC, s.role, s.degree, t.confidence DESC, w.hop, w.triple_id
    """
    params = [
        ids, scores, m_ids, m_scores, m_keys, collection.pk, collection.pk, collection.pk,
        max_seed_entities,
        *step_params, hop_decay, list(exclude), *filter_params,
    ]  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    found = [
        Expansion(
            chunk_id=row[0],
            score=float(row[1]),
            hop=row[2],
            triple_id=row[3],
            source_entity=row[4],
            path=tuple(row[5]),
            seed_chunk_id=row[6],
            confidence=row[7],
            degree=row[8],
            role=row[9],
        )
        for row in rows
    ]
    # Among equal scores (one seed, one hop): what the seed is about (the subjects
    # of its triples), the most specific entity, then the most confident triple.
    return sorted(
        found, key=lambda e: (-e.score, e.role, e.degree, -e.confidence, e.hop, e.chunk_id)
    )


def neighbourhood(
    collection: Collection,
    entity: str,
    *,
    hops: int = 1,
    predicates: Sequence[str] | None = None,
    min_confidence: float = 0.0,
    beam_width: int = 25,
    scope: Scope | None = None,
    user: Any = None,
) -> dict:
    """Return the graph around ``entity`` as ``{"entity", "nodes", "edges"}``.

    Only triples of chunks in the access scope (``user=`` or ``scope=``, required)
    are followed or shown.

    Nodes are ``{"id": key, "label": display, "hop": n}``; edges are triples
    ``{"id", "source", "target", "predicate", "confidence", "subject", "object",
    "chunk_id", "document"}``, each with its source chunk. ``beam_width`` caps the
    triples followed from each entity per hop (most confident first).
    """
    from retrieval.models import Entity, Triple
    from retrieval.services.access import resolve_scope

    allowed = resolve_scope(scope, user, caller="neighbourhood")
    collection = allowed.collection(collection)
    key = entity_key(entity)
    alias_of = (
        Entity.objects.filter(collection=collection, aliases__contains=[key])
        .values_list("key", flat=True)
        .first()
    )
    key = alias_of or key
    step, step_params = _step(
        collection.pk, min_confidence, predicates, beam_width, hops, scope=allowed.filters()
    )
    sql = f"""
    WITH RECURSIVE walk(seed_chunk, seed_score, source_entity, entity, hop, triple_id,
                        chunk_id, path) AS (
      SELECT NULL::bigint, 1.0::float8, %s::text, %s::text, 0, NULL::bigint, NULL::bigint,
             ARRAY[%s::text]
      UNION ALL {step}
    )
    SELECT entity, min(hop), array_remove(array_agg(triple_id), NULL) FROM walk GROUP BY entity
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, [key, key, key, *step_params])
        rows = cursor.fetchall()
    hop_of = {row[0]: row[1] for row in rows}
    triple_ids = {t for row in rows for t in row[2]}
    triples = list(
        Triple.objects.filter(pk__in=triple_ids)
        .select_related("chunk__document")
        .only(
            "id",
            "subject",
            "predicate",
            "object",
            "subject_key",
            "object_key",
            "predicate_key",
            "confidence",
            "chunk_id",
            "chunk__document__external_id",
        )  # fmt: skip
        .order_by("-confidence", "id")
    )
    labels = dict(
        Entity.objects.filter(collection=collection, key__in=hop_of).values_list("key", "display")
    )
    for triple in triples:
        labels.setdefault(triple.subject_key, triple.subject)
        labels.setdefault(triple.object_key, triple.object)
    if not triples:
        hop_of = {}  # unknown, or no triple mentions it any more
    nodes = [
        {"id": node, "label": labels.get(node, node), "hop": hop}
        for node, hop in sorted(hop_of.items(), key=lambda item: (item[1], item[0]))
    ]
    edges = [
        {
            "id": triple.pk,
            "source": triple.subject_key,
            "target": triple.object_key,
            "subject": triple.subject,
            "predicate": triple.predicate,
            "object": triple.object,
            "confidence": triple.confidence,
            "chunk_id": triple.chunk_id,
            "document": triple.chunk.document.external_id if triple.chunk else None,
        }
        for triple in triples
    ]
    return {
        "entity": key if nodes else None,
        "nodes": nodes,
        "edges": edges,
        "chunk_ids": sorted({e["chunk_id"] for e in edges if e["chunk_id"] is not None}),
    }
