"""The roleplay layer's errors, each with the category every face answers by.

The category table is ``sessiontree.core.errors.CATEGORIES`` (HTTP status of
the REST API, exit code of the commands). How the roleplay errors map:

| error | code | category | HTTP | exit |
|---|---|---|---|---|
| ``RoleplayValidationError`` | ``invalid_roleplay_entry`` | bad input | 400 | 2 |
| ``ReviewNotFound`` | ``review_not_found`` | not found | 404 | 3 |
| ``ReviewAlreadyDecided`` | ``review_already_decided`` | conflict | 409 | 4 |
| ``NoRoleplayCharacter`` | ``no_roleplay_character`` | conflict | 409 | 4 |
| ``CharacterArchived`` | ``character_archived`` | conflict | 409 | 4 |

The rule behind it: an id that names a resource (a session, an entry, a
review: the parts of a REST path) and does not exist is *not found*; input
that is malformed, or refers from inside a JSON body to something that is not
on the branch (``correctsCommitId``, a repair's ``turnId``), or whose ops do
not apply to the state, is *bad input*; a well-formed request that the
branch's current state refuses, and that a different state would allow
(a review decided already, a branch without a character, an archived
character), is a *conflict*. Pure Python: no Django here.
"""

from __future__ import annotations

from sessiontree.core.errors import CONFLICT, NOT_FOUND, SessionTreeError

from .schema import RoleplayValidationError

__all__ = [
    "CharacterArchived",
    "NoRoleplayCharacter",
    "ReviewAlreadyDecided",
    "ReviewNotFound",
    "RoleplayValidationError",
]


class ReviewNotFound(SessionTreeError, LookupError):
    """No review with this id was proposed on the branch (the path to the leaf that was read)."""

    code = "review_not_found"
    category = NOT_FOUND


class ReviewAlreadyDecided(SessionTreeError):
    """The review was accepted or rejected earlier on this branch; a decision is final.

    A conflict rather than bad input: the request is well-formed and names an
    existing review, and on another branch (before the decision) the same
    request succeeds.
    """

    code = "review_already_decided"
    category = CONFLICT


class NoRoleplayCharacter(SessionTreeError):
    """The branch has no character identity, so there is nothing to write state for.

    A conflict with the branch's state, not malformed input: on a branch that
    has a character the same request succeeds.
    """

    code = "no_roleplay_character"
    category = CONFLICT


class CharacterArchived(SessionTreeError):
    """The character is archived on this branch: its state is read-only."""

    code = "character_archived"
    category = CONFLICT
