"""Who may change what: every write face x every kind of user, and no unauthorized write.

Each face of :mod:`tests.scope.writes` tries one write on Atlas as each user, inside a
transaction that is undone; the database before and after says whether it changed
anything. Only the users the access policy allows may change anything; from a user
who may not see Atlas the answer must equal the answer for a missing target.
``test_write_coverage.py`` fails when a face that writes is added without joining.
"""

from __future__ import annotations

import pytest

from retrieval.models import Document
from tests.scope.writes import (
    HIDDEN,
    MAY_CHANGE,
    MAY_CHANGE_BY_FACE,
    MISSING,
    USERS,
    WRITE_FACES,
    Target,
    admin_add_document,
    api_add_document,
    api_index_tool,
    api_replace_document,
    atlas_target,
    attempt,
)

pytestmark = pytest.mark.django_db


def normalise(body: str, target: Target) -> str:
    return body.replace(target.slug, "<slug>").replace("Atlas", "<name>")


@pytest.mark.parametrize("face", sorted(WRITE_FACES))
def test_only_the_users_the_policy_allows_change_anything(write_world, face):
    run = WRITE_FACES[face]
    target = atlas_target()
    allowed = MAY_CHANGE_BY_FACE.get(face, MAY_CHANGE)
    for username in USERS:
        answer, changed = attempt(run, write_world[username], target)
        where = f"{face} / {username}: {answer.status} {answer.body[:300]}"
        assert answer.status < 500, where
        if username in allowed:
            assert changed, f"allowed, yet nothing changed: {where}"
        else:
            assert not changed, f"changed what they may not: {where}"
        if username in HIDDEN:
            missing, _ = attempt(run, write_world[username], MISSING)
            assert answer.status == missing.status, where
            assert normalise(answer.body, target) == normalise(missing.body, MISSING), where


def test_a_document_hidden_from_its_writer_answers_like_a_new_one(write_world):
    """Replacing a hidden document's id answers exactly as adding a fresh id does (before,
    the API said "A document you cannot replace has this id" and the tool "cannot be
    written"), and neither writes."""
    partial, target = write_world["partial"], atlas_target()
    hidden = Document.objects.get(external_id=target.hidden_external_id)
    fresh_target = Target(**{**target.__dict__, "hidden_external_id": "fresh-id"})
    for face in (api_replace_document, api_index_tool, admin_add_document):
        over_hidden, changed = attempt(face, partial, target)
        over_fresh, _ = attempt(face, partial, fresh_target)
        assert not changed
        assert over_hidden == over_fresh, face.__name__
    assert attempt(api_add_document, partial, target)[0].status == 403
    assert Document.objects.get(pk=hidden.pk).content_hash == hidden.content_hash
