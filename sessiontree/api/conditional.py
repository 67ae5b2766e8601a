"""Conditional requests: ``If-Match`` on writes, ``If-None-Match`` on reads (RFC 9110, 13.1).

The tags themselves are the operations layer's (``sessiontree.services.versions``);
this module only reads the headers. A value that names no entity tag
matches no version (``If-Match``: 412; ``If-None-Match``: the full answer).
"""

from __future__ import annotations

import re

from rest_framework.request import Request

from sessiontree.services.versions import ExpectedTags

# entity-tag = [ "W/" ] DQUOTE *etagc DQUOTE, etagc = %x21 / %x23-7E.
_ONE_TAG = re.compile(r'(?:W/)?"[\x21\x23-\x7e]*"')


def _tags(request: Request, header: str) -> tuple[list[str], bool] | None:
    """(the entity tags in ``header``, whether it is ``*``), ``None`` when it
    is absent. Whatever else a value holds names no version: it matches
    nothing (a write is refused, a read is answered in full), never an error."""
    raw = request.headers.get(header)
    if raw is None:
        return None
    if raw.strip(" \t") == "*":
        return [], True
    return _ONE_TAG.findall(raw), False


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
