"""System checks: a misconfigured site gets a message naming the fix, not a traceback.

- ``retrieval.E001``: a database is not PostgreSQL.
- ``retrieval.E002``: the pgvector extension is not available in a database.
- ``retrieval.E003``: a component's BACKEND cannot be imported or built.
- ``retrieval.E004``: a DEFAULT_* setting names an unknown component.
- ``retrieval.E005``: a collection's embedder is unknown or its dimension differs.
- ``retrieval.E006``: a hybrid or agentic retriever names an unknown retriever or rewriter.
- ``retrieval.E007``: a rewriter or reranker names an LLM that is not configured.
- ``retrieval.E008``: a pipeline is malformed or names an unknown component.
- ``retrieval.E010``: the local embedder's model, tokenizer or runtime is missing.
- ``retrieval.E011``: the OpenAI embedder has no API key and no ``base_url``.
- ``retrieval.E012``: an OpenAI LLM has no API key and no ``base_url``.
- ``retrieval.E013``: a cross-encoder reranker's model folder lacks its files.
- ``retrieval.E014``: an access hook (``COLLECTION_ACCESS``, ``COLLECTION_WRITE_ACCESS``,
  ``DOCUMENT_ACCESS``) is blank or does not import to a
  function, or ``COLLECTION_ACCESS_KEYS`` is not a list of keys.
- ``retrieval.E015``: ``TASKS_SYNC`` is False but django-q2 is not installed.
- ``retrieval.E017``: the Tasks framework queue is configured without a Tasks framework.
- ``retrieval.E018``: ``RETRIEVAL`` holds a key the app does not read (with a "did you mean").
- ``retrieval.E016``: a collection's index is not configured, or changed between
  PostgreSQL and an external engine since the collection was created.
- ``retrieval.E020`` / ``E021``: the Chroma / Milvus index's client library is missing.
- ``retrieval.W020`` / ``W021``: the Chroma / Milvus server does not answer, and
  ``retrieval.E022``: the Milvus server's version is not supported (both with
  ``--database``, as they ask the server).
- ``retrieval.W022``: a collection holds documents of host models no longer registered
  into it (with ``--database``): nothing updates or hides them; a reindex removes them.
- ``retrieval.W001``: ``SEARCH_PAGE_PUBLIC`` opens the search page to anonymous visitors.
- ``retrieval.W002``: a host model with a ``live`` flag is registered with no condition.
- ``retrieval.W003``: a collection's HNSW graphs were built with other ``m`` /
  ``ef_construction`` than its pgvector index's OPTIONS (rebuild them).
- ``retrieval.E030``: ``SEARCH_DATABASE`` names no ``DATABASES`` alias.
- ``retrieval.E031``: ``SEARCH_DEADLINE`` is neither a positive number of seconds nor None.
"""

from __future__ import annotations

import difflib
from typing import Any

from django.core import checks
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections

from .exceptions import InvalidComponentError, MissingDependencyError

DEFAULT_KEYS = {
    "DEFAULT_CHUNKER": "CHUNKERS",
    "DEFAULT_EMBEDDER": "EMBEDDERS",
    "DEFAULT_RETRIEVER": "RETRIEVERS",
    "DEFAULT_PIPELINE": "PIPELINES",
    "DEFAULT_EXTRACTOR": "EXTRACTORS",
}


def _app_databases(databases: Any) -> list[str]:
    from django.db import router

    from .models import Chunk

    aliases = databases if databases is not None else list(connections)
    return [alias for alias in aliases if router.allow_migrate_model(alias, Chunk)]


def _postgresql_databases(databases: Any) -> list[str]:
    """The app's databases a command asked checks of that are PostgreSQL (E001 says of others)."""
    aliases = _app_databases(databases or [])
    return [alias for alias in aliases if connections[alias].vendor == "postgresql"]


@checks.register(checks.Tags.compatibility)
def check_database_vendor(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list:
    """The app's tables need PostgreSQL; say so before any query fails."""
    errors = []
    for alias in _app_databases(None):
        vendor = connections[alias].vendor
        if vendor != "postgresql":
            errors.append(
                checks.Error(
                    f"Database {alias!r} uses {vendor}; the retrieval app needs PostgreSQL "
                    "with the pgvector extension.",
                    hint="Point DATABASES[...]['ENGINE'] at django.db.backends.postgresql.",
                    id="retrieval.E001",
                )
            )
    return errors


#: The oldest pgvector the app runs on: 0.8.0 brought the iterative index scans
#: (``hnsw.iterative_scan``) filtered and scoped dense searches set.
PGVECTOR_MINIMUM = (0, 8, 0)


def too_old(version: str) -> bool:
    """Whether pgvector ``version`` ("0.7.4") is older than :data:`PGVECTOR_MINIMUM`."""
    parts = tuple(int(part) for part in version.split("-")[0].split(".") if part.isdigit())
    return parts < PGVECTOR_MINIMUM


@checks.register(checks.Tags.database)
def check_pgvector(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list:
    """pgvector must be installed in the PostgreSQL server (checked when a command asks)."""
    errors = []
    for alias in _app_databases(databases or []):
        connection = connections[alias]
        if connection.vendor != "postgresql":
            continue  # E001 already says it
        try:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT coalesce(installed_version, default_version) "
                    "FROM pg_available_extensions WHERE name = 'vector'"
                )
                row = cursor.fetchone()
        except DatabaseError as e:
            errors.append(
                checks.Error(
                    f"Cannot ask database {alias!r} for the pgvector extension: {e}",
                    id="retrieval.E002",
                )
            )
            continue
        if row is not None and too_old(row[0]):
            errors.append(
                checks.Error(
                    f"The PostgreSQL server of database {alias!r} has pgvector {row[0]}; the app "
                    f"needs {'.'.join(map(str, PGVECTOR_MINIMUM))} or later (its filtered and "
                    "scoped searches use iterative index scans).",
                    hint="Upgrade pgvector on the server, then ALTER EXTENSION vector UPDATE.",
                    id="retrieval.E002",
                )
            )
        if row is None:
            errors.append(
                checks.Error(
                    f"The pgvector extension is not installed in the PostgreSQL server of "
                    f"database {alias!r}.",
                    hint="Install pgvector (https://github.com/pgvector/pgvector#installation) "
                    "on the server; the app's migration then runs CREATE EXTENSION vector.",
                    id="retrieval.E002",
                )
            )
    return errors


@checks.register()
def check_components(app_configs: Any = None, **kwargs: Any) -> list:
    """Every configured component must import and build from its OPTIONS."""
    from .conf import retrieval_settings
    from .services.query.pipelines import check_pipelines
    from .services.registry import HANDLERS

    errors: list = []
    for handler in HANDLERS:
        for alias in handler.aliases():
            try:
                component = handler.create(alias)
            except (InvalidComponentError, MissingDependencyError) as e:
                errors.append(checks.Error(str(e), id="retrieval.E003"))
                continue
            check = getattr(component, "check", None)
            if callable(check):
                errors.extend(check())
    errors += check_pipelines()
    for key, kind in DEFAULT_KEYS.items():
        alias = getattr(retrieval_settings, key)
        if alias not in getattr(retrieval_settings, kind):
            errors.append(
                checks.Error(
                    f"RETRIEVAL[{key!r}] is {alias!r}, which is not in RETRIEVAL[{kind!r}].",
                    hint=f"Use one of: {', '.join(sorted(getattr(retrieval_settings, kind)))}.",
                    id="retrieval.E004",
                )
            )
    return errors


@checks.register(checks.Tags.database)
def check_collection_embedders(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list:
    """Each collection's embedder must exist and match the collection's dimensions."""
    from .models import Collection
    from .services.registry import embedders

    errors = []
    for alias in _postgresql_databases(databases):
        try:
            collections = list(Collection.objects.using(alias).all())
        except DatabaseError:
            continue  # not migrated yet
        for collection in collections:
            errors += _check_collection_index(collection, alias)
            if collection.embedder not in embedders:
                errors.append(
                    checks.Error(
                        f"Collection {collection.name!r} uses embedder {collection.embedder!r}, "
                        "which is not in RETRIEVAL['EMBEDDERS'].",
                        hint=f"Configure it, or use one of: {', '.join(embedders.aliases())}.",
                        obj=collection,
                        id="retrieval.E005",
                    )
                )
                continue
            try:
                # Never a network call from a check: an embedder that would have to ask
                # its server for the dimension is checked at ingestion and query time.
                dimension = embedders[collection.embedder].known_dimension
            except Exception:  # reported by check_components
                continue
            if dimension is not None and dimension != collection.dimensions:
                errors.append(
                    checks.Error(
                        f"Collection {collection.name!r} holds {collection.dimensions}-dimensional "
                        f"vectors, but embedder {collection.embedder!r} makes {dimension}.",
                        hint="Restore the embedder's configuration, or re-embed the collection.",
                        obj=collection,
                        id="retrieval.E005",
                    )
                )
    return errors


@checks.register(checks.Tags.database)
def check_index_servers(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list:
    """Each external index's server answers and runs a supported version.

    A network call, so only when a command asks for database checks (``manage.py check
    --database default``, ``migrate``), like the pgvector check.
    """
    from .services.registry import indexes

    if not databases:
        return []
    messages: list = []
    for alias in indexes.aliases():
        try:
            index = indexes[alias]
        except Exception:  # reported by check_components
            continue
        messages += index.check_server()
    return messages


def _check_collection_index(collection: Any, alias: str) -> list:
    """The collection's index is configured, of the kind it was created on, and (in the
    database the index writes to) holds the collection's space as configured."""
    from .services.registry import indexes

    if collection.index not in indexes:
        return [
            checks.Error(
                f"Collection {collection.name!r} uses index {collection.index!r}, "
                "which is not in RETRIEVAL['INDEXES'].",
                hint=f"Configure it, or use one of: {', '.join(indexes.aliases())}.",
                obj=collection,
                id="retrieval.E016",
            )
        ]
    try:
        index = indexes[collection.index]
    except Exception:  # reported by check_components
        return []
    external = not index.features.transactional
    if external != collection.external_index:
        where = "an external engine" if external else "PostgreSQL"
        return [
            checks.Error(
                f"Index {collection.index!r} of collection {collection.name!r} is now in "
                f"{where}, but the collection was created on the other kind of index.",
                hint="Restore the index's BACKEND, or move the collection's documents to a "
                "new collection on the index you want.",
                obj=collection,
                id="retrieval.E016",
            )
        ]
    return index.check_collection(collection) if alias == DEFAULT_DB_ALIAS else []


@checks.register()
def check_collection_access(app_configs: Any = None, **kwargs: Any) -> list:
    """The access hooks must import: a typo or a blank value would fail every search, or
    worse, open what it should close."""
    from .services.access import HOOKS, access_keys, hook

    errors = []
    for key, returns in HOOKS.items():
        try:
            hook(key)
        except InvalidComponentError as e:
            errors.append(
                checks.Error(
                    str(e),
                    hint=f"Set it to the dotted path of a function (user) -> {returns}, or None.",
                    id="retrieval.E014",
                )
            )
    try:
        access_keys()
    except InvalidComponentError as e:
        errors.append(checks.Error(str(e), id="retrieval.E014"))
    return errors


@checks.register(checks.Tags.security)
def check_search_page_public(app_configs: Any = None, **kwargs: Any) -> list:
    """Say so when the search page answers visitors who have not signed in."""
    from .conf import retrieval_settings

    if retrieval_settings.SEARCH_PAGE_PUBLIC:
        return [
            checks.Warning(
                'RETRIEVAL["SEARCH_PAGE_PUBLIC"] is True: anonymous visitors can use the search '
                "page, and see every collection and document the access hooks give them.",
                hint="Leave it False to require login, or make sure COLLECTION_ACCESS and "
                "DOCUMENT_ACCESS hide what anonymous users must not read.",
                id="retrieval.W001",
            )
        ]
    return []


@checks.register()
def check_setting_names(app_configs: Any = None, **kwargs: Any) -> list:
    """Every key of ``RETRIEVAL`` is one the app reads: a typo would be silently ignored."""
    from django.conf import settings

    from .conf import DEFAULTS

    errors = []
    for key in getattr(settings, "RETRIEVAL", None) or {}:
        if key not in DEFAULTS:
            close = difflib.get_close_matches(str(key), DEFAULTS, n=1)
            errors.append(
                checks.Error(
                    f"RETRIEVAL[{key!r}] is not a setting of the retrieval app.",
                    hint=f"Did you mean {close[0]!r}?"
                    if close
                    else "Remove it; the settings are listed in retrieval.conf.DEFAULTS.",
                    id="retrieval.E018",
                )
            )
    return errors


@checks.register()
def check_search_deadline(app_configs: Any = None, **kwargs: Any) -> list:
    """Searches run under a deadline that is a positive number of seconds, or none."""
    from .services.core.tracing import search_deadline_setting

    try:
        search_deadline_setting()
    except ValueError as e:
        return [
            checks.Error(
                str(e), hint="Seconds, e.g. 30; None for no deadline.", id="retrieval.E031"
            )
        ]
    return []


@checks.register()
def check_search_database(app_configs: Any = None, **kwargs: Any) -> list:
    """Searches read from a DATABASES alias that exists."""
    from django.conf import settings

    from .conf import retrieval_settings

    alias = retrieval_settings.SEARCH_DATABASE
    if alias and alias not in settings.DATABASES:
        return [
            checks.Error(
                f'RETRIEVAL["SEARCH_DATABASE"] is {alias!r}, which is not in DATABASES.',
                hint=f"Add the replica as DATABASES[{alias!r}] or set SEARCH_DATABASE to None "
                f"(have: {', '.join(settings.DATABASES)}).",
                id="retrieval.E030",
            )
        ]
    return []


@checks.register(checks.Tags.security)
def check_host_models(app_configs: Any = None, **kwargs: Any) -> list:
    """A registered model with a publishing flag but no condition indexes its drafts."""
    from .services.ingestion.host_registry import registrations

    warnings = []
    for entry in registrations():
        names = {field.name for field in entry.model._meta.get_fields()}
        if entry.condition is None and "live" in names:
            warnings.append(
                checks.Warning(
                    f"{entry.model.__name__} is indexed into {entry.collection!r} with no "
                    "condition: its objects that are not live (drafts, unpublished pages) are "
                    "found in search.",
                    hint="Pass condition=Q(live=True) to host_models.register; for Wagtail "
                    'pages, add "retrieval.contrib.wagtail" to INSTALLED_APPS instead.',
                    obj=entry.label,
                    id="retrieval.W002",
                )
            )
    return warnings


@checks.register(checks.Tags.database, checks.Tags.security)
def check_unregistered_host_documents(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list:
    """Documents of host models no longer registered stay found as they were: report them."""
    from django.db.models import Count

    from .services.ingestion.host_registry import unregistered_documents

    warnings = []
    for alias in _postgresql_databases(databases):
        documents = unregistered_documents().using(alias)
        rows = documents.values_list("collection__name", "metadata__object__model")
        try:
            counted = list(rows.annotate(Count("pk")).order_by("collection__name"))
        except DatabaseError:
            continue  # not migrated yet
        stale: dict[str, dict[str, int]] = {}
        for name, model, count in counted:
            stale.setdefault(name, {})[model] = count
        for name, models in stale.items():
            warnings.append(
                checks.Warning(
                    f"Collection {name!r} holds {sum(models.values())} documents of models "
                    f"no longer indexed into it ({', '.join(sorted(models))}): no save updates "
                    "or hides them any more (an unpublished page stays found).",
                    hint=f"Run `manage.py retrieval_reindex --collection {name}` to remove them, "
                    "or register the models again (host_models.register, "
                    'RETRIEVAL["WAGTAIL_PAGE_MODELS"]).',
                    id="retrieval.W022",
                )
            )
    return warnings
