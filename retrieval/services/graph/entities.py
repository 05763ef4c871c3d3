"""Entity keys: one normalised key per way of writing a name, and alias merging.

``entity_key("The  Recursive Chunkers.")`` and ``entity_key("recursive chunker")``
are both ``"recursive chunker"``: case folded, punctuation and leading articles
dropped, whitespace collapsed, and the last word's simple plural made singular.
"""

from __future__ import annotations

import re
import unicodedata

from django.db import connection, transaction

from retrieval.exceptions import RetrievalError
from retrieval.models import Collection, Entity, Triple

_PUNCTUATION = re.compile(r"[^\w\s]+")
_SPACES = re.compile(r"\s+")
_ARTICLES = ("the ", "a ", "an ")
# Words whose final "s" is not a plural ending.
_NOT_PLURAL = ("ss", "us", "is", "os", "as", "ys")


def singular(word: str) -> str:
    """Return ``word`` without a simple English plural ending."""
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "shes", "ches", "xes", "zes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(_NOT_PLURAL):
        return word[:-1]
    return word


def entity_key(text: str) -> str:
    """Return the normalised key of an entity's display text ('' if nothing is left)."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = _SPACES.sub(" ", _PUNCTUATION.sub(" ", text.replace("_", " "))).strip()
    for article in _ARTICLES:
        if text.startswith(article):
            text = text[len(article) :]
            break
    if text in ("the", "a", "an"):
        return ""
    words = text.split(" ")
    words[-1] = singular(words[-1])
    return " ".join(words).strip()


def display_text(text: str) -> str:
    """Return an entity's text for display: whitespace collapsed, edge punctuation off."""
    return _SPACES.sub(" ", text).strip(" \t\n.,;:!?\"'()[]{}")


def alias_map(collection: Collection) -> dict[str, str]:
    """Return alias key -> canonical key for the collection's merged entities."""
    mapping: dict[str, str] = {}
    for key, aliases in (
        Entity.objects.filter(collection=collection)
        .exclude(aliases=[])
        .values_list("key", "aliases")
    ):
        for alias in aliases:
            mapping[alias] = key
    return mapping


def merge_entities(collection: Collection, alias: str, into: str) -> Entity:
    """Merge the entity written ``alias`` into ``into``: its triples move, its key
    becomes an alias that later extractions resolve to ``into``."""
    alias_key, target_key = entity_key(alias), entity_key(into)
    if not alias_key or not target_key:
        raise RetrievalError("Both entities must have a non-empty name.")
    if alias_key == target_key:
        raise RetrievalError(f"{alias!r} and {into!r} are already the same entity.")
    with transaction.atomic():
        target, _ = Entity.objects.select_for_update().get_or_create(
            collection=collection, key=target_key, defaults={"display": display_text(into)}
        )
        merged = Entity.objects.filter(collection=collection, key=alias_key).first()
        aliases = set(target.aliases) | {alias_key}
        if merged is not None:
            aliases |= set(merged.aliases)
            merged.delete()
        # Entities that were aliases of the merged one now point at the target too.
        target.aliases = sorted(aliases - {target_key})
        target.save(update_fields=["aliases"])
        Triple.objects.filter(collection=collection, subject_key=alias_key).update(
            subject_key=target_key
        )
        Triple.objects.filter(collection=collection, object_key=alias_key).update(
            object_key=target_key
        )
    return target


def prune_entities(collection: Collection) -> int:
    """Delete the collection's entities that no triple mentions; return how many."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            DELETE FROM retrieval_entity e
            WHERE e.collection_id = %(c)s AND e.aliases = '[]'::jsonb
              AND NOT EXISTS (SELECT 1 FROM retrieval_triple t
                              WHERE t.collection_id = %(c)s AND t.subject_key = e.key)
              AND NOT EXISTS (SELECT 1 FROM retrieval_triple t
                              WHERE t.collection_id = %(c)s AND t.object_key = e.key)
            """,
            {"c": collection.pk},
        )
        return cursor.rowcount
