"""Conditional requests: ``If-Match`` on writes, ``If-None-Match`` on reads (RFC 9110, 13.1).

The tags themselves are the operations layer's (``sessiontree.services.versions``);
this module only reads the headers. A header that is not a list of entity
tags (or ``*``) is a 400 naming it.
"""

from __future__ import annotations

import re

from rest_framework.exceptions import ValidationError
from rest_framework.request import Request

from sessiontree.services.versions import ExpectedTags

# entity-tag = [ "W/" ] DQUOTE *etagc DQUOTE, etagc = %x21 / %x23-7E (obs-text left out: tags are ASCII here).
ENTITY_TAG = r'(?:W/)?"[\x21\x23-\x7e]*"'
TAG_LIST = re.compile(rf"[ \t]*(\*|{ENTITY_TAG}(?:[ \t]*,[ \t]*{ENTITY_TAG})*)[ \t]*")
# The same rule for the schema (ECMA-262): what the header parameters declare.
TAG_LIST_PATTERN = r'^[ \t]*(\*|(W/)?"[!#-~]*"([ \t]*,[ \t]*(W/)?"[!#-~]*")*)[ \t]*$'
_ONE_TAG = re.compile(ENTITY_TAG)


def _tags(request: Request, header: str) -> tuple[list[str], bool] | None:
    """(tags as sent, ``*`` given) of ``header``, ``None`` when it is absent."""
    raw = request.headers.get(header)
    if raw is None:
        return None
    found = TAG_LIST.fullmatch(raw)
    if found is None:
        raise ValidationError({header: ['Expected "*" or a comma-separated list of entity tags ("…" or W/"…").']})
    if found.group(1) == "*":
        return [], True
    return _ONE_TAG.findall(found.group(1)), False


def if_match(request: Request) -> ExpectedTags | None:
    """What ``If-Match`` expects (strong comparison: weak tags match nothing), ``None`` without it."""
    parsed = _tags(request, "If-Match")
    if parsed is None:
        return None
    tags, any_version = parsed
    return ExpectedTags(tags=tuple(tag for tag in tags if not tag.startswith("W/")), any_version=any_version)


def none_match(request: Request, current: str) -> bool:
    """Whether ``If-None-Match`` names ``current`` (weak comparison), i.e. a GET may answer 304."""
    parsed = _tags(request, "If-None-Match")
    if parsed is None:
        return False
    tags, any_version = parsed
    return any_version or current.removeprefix("W/") in {tag.removeprefix("W/") for tag in tags}
