"""Knowledge-graph extraction: chunk texts -> triples, recorded in an IndexRun.

Reindexing a document replaces its chunks: the triples of an old chunk move to
the new chunk of the same text (:mod:`retrieval.services.ingestion.triples`), those
of a changed text go with its chunk (``Triple.chunk`` cascades). What an extractor
found in a text is kept by the text's SHA-256 (:class:`GraphExtraction`), so a
``changed_only`` run (queued after a reindex of a collection with a graph) calls the
extractor only for texts it has never seen, and gives a chunk of a text extracted
before its triples back from that record.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from retrieval.conf import retrieval_settings
from retrieval.exceptions import MissingDependencyError
from retrieval.models import Chunk, Collection, Entity, GraphExtraction, IndexRun, Triple
from retrieval.services.extractors.base import BaseTripleExtractor, ExtractedTriple
from retrieval.services.graph.entities import alias_map, display_text, entity_key, prune_entities
from retrieval.services.ingestion.runs import finish_run, save_progress
from retrieval.services.llms.answers import excerpt
from retrieval.services.registry import extractors

logger = logging.getLogger(__name__)

PROGRESS_INTERVAL = 1.0  # seconds between progress saves

# Chunks whose text has no extraction record yet, or has one with triples that
# this chunk does not carry (a replaced chunk with unchanged text).
_CHANGED_CHUNKS = """
SELECT c.id FROM retrieval_chunk c
LEFT JOIN retrieval_graphextraction e
  ON e.collection_id = c.collection_id AND e.extractor = %(extractor)s
 AND e.content_hash = encode(sha256(convert_to(c.content, 'UTF8')), 'hex')
WHERE c.collection_id = %(collection)s
  AND (e.id IS NULL OR (jsonb_array_length(e.triples) > 0
       AND NOT EXISTS (SELECT 1 FROM retrieval_triple t WHERE t.chunk_id = c.id)))
ORDER BY c.document_id, c.index
"""


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def extract_graph(
    collection: Collection,
    *,
    changed_only: bool = False,
    extractor: str | None = None,
    run: IndexRun | None = None,
    created_by: Any = None,
    on_progress: Callable[[IndexRun], None] | None = None,
) -> IndexRun:
    """Extract the collection's triples and return the finished IndexRun.

    ``changed_only`` extracts only chunks whose text has not been extracted
    before; otherwise every chunk is extracted again. ``run`` is an IndexRun made
    by the caller (e.g. queued by a task); one is created when it is ``None``.
    The run counts chunks in ``documents_*`` (``indexed``: extracted,
    ``skipped``: restored from an earlier extraction) and triples in
    ``chunks_written``. ``on_progress(run)`` is called after each batch.
    """
    alias = extractor or retrieval_settings.DEFAULT_EXTRACTOR
    component = extractors[alias]  # an unknown alias raises before any run is recorded
    options = {"collection": collection.name, "extractor": alias, "changed_only": changed_only}
    if run is None:
        run = IndexRun(collection=collection, task="graph", created_by=created_by)
    run.task = run.task or "graph"
    run.options = {**run.options, **options}
    run.status = IndexRun.Status.RUNNING
    run.started_at = run.heartbeat_at = timezone.now()
    run.save()
    try:
        _GraphExtractor(collection, component, run, on_progress).run(changed_only=changed_only)
    except Exception as e:
        logger.warning("Graph extraction of %r failed: %s", collection.name, e, exc_info=True)
        _finish(run, failure=f"{e.__class__.__name__}: {e}")
        return run
    except BaseException as e:
        _finish(run, failure=f"Interrupted: {e.__class__.__name__}")
        raise
    _finish(run)
    return run


def _finish(run: IndexRun, *, failure: str = "") -> None:
    counts = (
        f"{run.documents_indexed} chunks extracted, {run.documents_skipped} restored, "
        f"{run.documents_failed} failed, {run.chunks_written} triples written"
    )
    finish_run(run, failure=failure, counts=counts)


class _GraphExtractor:
    def __init__(
        self,
        collection: Collection,
        extractor: BaseTripleExtractor,
        run: IndexRun,
        on_progress: Callable[[IndexRun], None] | None = None,
    ) -> None:
        self.on_progress = on_progress
        self.collection = collection
        self.extractor = extractor
        self.key = extractor.cache_key
        self.run_record = run
        self.aliases = alias_map(collection)
        self.last_save = 0.0

    def run(self, *, changed_only: bool) -> None:
        if changed_only:
            with connection.cursor() as cursor:
                cursor.execute(
                    _CHANGED_CHUNKS, {"extractor": self.key, "collection": self.collection.pk}
                )
                ids = [row[0] for row in cursor.fetchall()]
        else:
            GraphExtraction.objects.filter(collection=self.collection, extractor=self.key).delete()
            ids = list(
                Chunk.objects.filter(collection=self.collection)
                .order_by("document_id", "index")
                .values_list("id", flat=True)
            )
        self.run_record.documents_total = len(ids)
        self._save_progress(force=True)
        size = max(1, self.extractor.batch_size)
        for start in range(0, len(ids), size):
            self._batch(ids[start : start + size])
            self._save_progress()
            if self.on_progress is not None:
                self.on_progress(self.run_record)
        prune_entities(self.collection)
        self._prune_records()
        self._save_progress(force=True)

    def _batch(self, ids: Sequence[int]) -> None:
        chunks = list(
            Chunk.objects.filter(id__in=ids)
            .select_related("document")
            .only("id", "index", "content", "document__external_id")
            .order_by("document_id", "index")
        )
        hashes = {chunk.pk: content_hash(chunk.content) for chunk in chunks}
        known = dict(
            GraphExtraction.objects.filter(
                collection=self.collection, extractor=self.key, content_hash__in=hashes.values()
            ).values_list("content_hash", "triples")
        )
        missing = [chunk for chunk in chunks if hashes[chunk.pk] not in known]
        found: dict[str, list[dict[str, Any]]] = {}
        if missing:
            try:
                found = self._extract(missing, hashes)
            except Exception as e:
                if isinstance(e, MissingDependencyError):
                    raise  # every batch would fail the same way: fail the run once
                # one line per failing batch; the run records each chunk's reason
                logger.warning(
                    "Triple extraction failed (%d chunks): %s", len(missing), excerpt(str(e))
                )
                # Retry one text at a time, so only the culprit fails.
                for chunk in missing if len(missing) > 1 else []:
                    try:
                        found.update(self._extract([chunk], hashes))
                    except Exception as single:
                        self._fail([chunk], f"{single.__class__.__name__}: {single}")
                if len(missing) == 1:
                    self._fail(missing, f"{e.__class__.__name__}: {e}")
                chunks = [c for c in chunks if hashes[c.pk] in known or hashes[c.pk] in found]
        try:
            self._store(chunks, hashes, {**known, **found}, found)
        except DatabaseError as e:
            self._fail(chunks, f"{e.__class__.__name__}: {e}")
            return
        record = self.run_record
        record.documents_done += len(chunks)
        record.documents_indexed += sum(1 for chunk in chunks if hashes[chunk.pk] in found)
        record.documents_skipped += sum(1 for chunk in chunks if hashes[chunk.pk] not in found)

    def _extract(
        self, chunks: Sequence[Chunk], hashes: dict[int, str]
    ) -> dict[str, list[dict[str, Any]]]:
        extracted = self.extractor.extract([chunk.content for chunk in chunks])
        if len(extracted) != len(chunks):
            raise ValueError(f"extractor returned {len(extracted)} lists for {len(chunks)} texts")
        return {
            hashes[chunk.pk]: [_as_dict(t) for t in triples]
            for chunk, triples in zip(chunks, extracted, strict=True)
        }

    def _store(
        self,
        chunks: Sequence[Chunk],
        hashes: dict[int, str],
        triples_by_hash: dict[str, list[dict[str, Any]]],
        new: dict[str, list[dict[str, Any]]],
    ) -> None:
        rows: list[Triple] = []
        entities: dict[str, str] = {}
        accepted: dict[str, list[dict[str, Any]]] = {}
        for chunk in chunks:
            digest = hashes[chunk.pk]
            first = digest not in accepted  # chunks with the same text keep the same triples
            kept = accepted.setdefault(digest, [])
            for triple in triples_by_hash[digest]:
                row = self._row(chunk, triple)
                if row is not None:
                    rows.append(row)
                    entities.setdefault(row.subject_key, row.subject)
                    entities.setdefault(row.object_key, row.object)
                    if first:
                        kept.append(triple)
        # Record what was kept: a text whose triples were all rejected is marked done
        # (an empty record), so a changed-only run does not select its chunks again.
        records = {
            digest: accepted[digest]
            for digest in {hashes[chunk.pk] for chunk in chunks}
            if digest in new or accepted[digest] != triples_by_hash[digest]
        }
        with transaction.atomic():
            GraphExtraction.objects.bulk_create(
                [
                    GraphExtraction(
                        collection=self.collection,
                        extractor=self.key,
                        content_hash=digest,
                        triples=triples,
                    )
                    for digest, triples in records.items()
                ],
                update_conflicts=True,
                unique_fields=["collection", "extractor", "content_hash"],
                update_fields=["triples"],
            )
            Triple.objects.filter(chunk_id__in=[chunk.pk for chunk in chunks]).delete()
            Triple.objects.bulk_create(rows, batch_size=500)
            Entity.objects.bulk_create(
                [
                    Entity(collection=self.collection, key=key, display=display[:500])
                    for key, display in entities.items()
                ],
                ignore_conflicts=True,
            )
        self.run_record.chunks_written += len(rows)

    def _row(self, chunk: Chunk, triple: dict[str, Any]) -> Triple | None:
        subject, obj = display_text(triple["subject"]), display_text(triple["object"])
        predicate = " ".join(str(triple["predicate"]).split()).lower()
        subject_key, object_key = entity_key(subject), entity_key(obj)
        subject_key = self.aliases.get(subject_key, subject_key)
        object_key = self.aliases.get(object_key, object_key)
        if not subject_key or not object_key or not predicate or subject_key == object_key:
            return None
        return Triple(
            collection=self.collection,
            chunk=chunk,
            subject=subject[:500],
            predicate=predicate[:200],
            object=obj[:500],
            subject_key=subject_key[:500],
            predicate_key=predicate[:200],
            object_key=object_key[:500],
            confidence=min(1.0, max(0.0, float(triple.get("confidence", 1.0)))),
        )

    def _fail(self, chunks: Sequence[Chunk], reason: str) -> None:
        record = self.run_record
        record.documents_done += len(chunks)
        record.documents_failed += len(chunks)
        reason = excerpt(reason)  # an exception may quote a model's whole answer
        for chunk in chunks:
            record.errors.append(
                {"document": chunk.document.external_id, "chunk": chunk.index, "error": reason}
            )
        self._save_progress(force=True)

    def _prune_records(self) -> None:
        """Forget extractions of texts no chunk of the collection has any more."""
        with connection.cursor() as cursor:
            cursor.execute(
                """
                DELETE FROM retrieval_graphextraction e
                WHERE e.collection_id = %(c)s AND e.content_hash NOT IN (
                  SELECT encode(sha256(convert_to(c.content, 'UTF8')), 'hex')
                  FROM retrieval_chunk c WHERE c.collection_id = %(c)s)
                """,
                {"c": self.collection.pk},
            )

    def _save_progress(self, *, force: bool = False) -> None:
        if not force and time.monotonic() - self.last_save < PROGRESS_INTERVAL:
            return
        self.last_save = time.monotonic()
        save_progress(self.run_record)  # also the heartbeat the stale-run sweep reads


def _as_dict(triple: ExtractedTriple | dict[str, Any]) -> dict[str, Any]:
    if isinstance(triple, ExtractedTriple):
        return triple.to_dict()
    return {
        "subject": str(triple["subject"]),
        "predicate": str(triple["predicate"]),
        "object": str(triple["object"]),
        "confidence": float(triple.get("confidence", 1.0)),
    }
