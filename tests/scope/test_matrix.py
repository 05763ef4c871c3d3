"""Who sees what: every face x every retriever x every kind of user, and no leak.

Two collections, five documents, each document of one team; ``tests.scope.access``
grants collections and teams per user. Every document says "North is up" and links
the shared entity North Hub to its own marker word, so an unscoped leg (BM25,
dense, the graph walk, PRF feedback in agentic rounds, the trace) would show a
hidden document's marker or external id. For each face, leg, user and collection
the test finds which documents a response shows and compares them with what the
grants allow; a hidden collection must answer exactly like a missing one.

The face list is checked against the URL patterns of ``retrieval.urls``,
``retrieval.api.urls`` and the app's admin views, and the legs are the configured
retrievers: a new endpoint, tool or scoped function fails ``test_coverage.py``
until it joins.
"""

from __future__ import annotations

import pytest

from tests.scope.conftest import DOCS, MISSING, USERS, everything_visible, shown, visible
from tests.scope.faces import BROWSE_FACES, SEARCH_FACES, Answer, legs, search_face_params

pytestmark = pytest.mark.django_db


def check(face: str, leg: str, username: str, name: str, answer: Answer, missing: Answer) -> None:
    allowed = visible(username, name)
    where = f"{face} / {leg} / {username} / {name}"
    found = shown(answer.body)
    # The admin's changelists ignore a collection filter they do not offer (a hidden or
    # missing collection): they then list everything the user may see.
    wide = face in ("admin_browse", "admin_quality")
    may_see = everything_visible(username) if wide else (allowed or set())
    leaked = found - may_see
    assert not leaked, f"{where}: leaked {sorted(leaked)}"
    if allowed is None:
        # Hidden: exactly what a missing collection answers.
        assert answer.status == missing.status, where
        assert shown(answer.body) == shown(missing.body), where
        if face in SAME_BODY:
            assert answer.body.replace(name, MISSING) == missing.body, where
    elif answer.status == 200:
        assert found >= allowed and (wide or found == allowed), (
            f"{where}: showed {sorted(found)}, allowed {sorted(allowed)}"
        )
        hidden_names = [other for other in DOCS if visible(username, other) is None]
        for other in hidden_names:
            assert other.lower() not in answer.body.lower(), f"{where}: names {other}"
    else:
        # Refused as a whole: anonymous API calls, admin pages for non-staff.
        assert answer.status in (302, 401, 403), where
        assert (username, face) in REFUSED, where


#: Faces whose whole answer is compared with a missing collection's (the admin pages
#: carry per-request CSRF tokens and object ids; their status and content are checked).
SAME_BODY = {*SEARCH_FACES, "api_browse", "graph_explorer"}

#: Who is refused a face as a whole (login or staff required).
REFUSED = {
    *(("anonymous", face) for face in (*SEARCH_FACES, *BROWSE_FACES) if face != "python_facade"),
    *((user, face) for user in ("alice", "bob") for face in ("playground", "graph_explorer")),
    *(
        (user, face)
        for user in ("alice", "bob")
        for face in ("admin_browse", "admin_quality", "admin_dashboard")
    ),
}


@pytest.mark.parametrize("face", search_face_params())
def test_search_faces_show_each_user_only_what_they_may_see(world, face):
    run = SEARCH_FACES[face]
    assert set(legs()) >= {"bm25", "dense", "hybrid", "graph", "agentic"}
    for leg in legs():
        for username in USERS:
            user = world[username]
            for name in DOCS:
                allowed = visible(username, name)
                answer = run(user, name, leg)
                missing = run(user, MISSING, leg) if allowed is None else None
                check(face, leg, username, name, answer, missing)


@pytest.mark.parametrize("face", sorted(BROWSE_FACES))
def test_browse_faces_show_each_user_only_what_they_may_see(world, quality, face):
    run = BROWSE_FACES[face]
    for username in USERS:
        user = world[username]
        for name in DOCS:
            allowed = visible(username, name)
            answer = run(user, name)
            missing = run(user, MISSING) if allowed is None else None
            check(face, "-", username, name, answer, missing)
