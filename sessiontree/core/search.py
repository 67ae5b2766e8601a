"""Search across sessions, the pure part: what a query asks for, and the
highlighted snippet of a hit.

A query is plain words, never the full-text engine's own syntax: it is cut
at white space into *terms*; double quotes are dropped (they cannot be
escaped in InnoDB's boolean mode) and a piece without a letter or digit
(``+``, ``-``, ``*``, ``()``) is left out, so no input is an operator. Every
term must occur in an entry's text; a term of several words (``bob@example.com``,
``4111-1111``) is a phrase: its words in that order. The engines' own
syntaxes are built from the terms by ``providers/search_index.py``.

``snippet_html`` cuts a window of an entry's text around the first term
found and returns it as HTML: the text escaped, each occurrence of a term's
words wrapped in ``<mark>``, elided ends as ``…``.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable

MAX_QUERY_LENGTH = 500
MAX_TERMS = 16
SNIPPET_BEFORE = 60
SNIPPET_AFTER = 140

_PIECE = re.compile(r'[^\s"]+')
_WORD = re.compile(r"\w+")


def query_terms(q: str) -> list[str]:
    """The terms of ``q`` (see the module docstring), at most ``MAX_TERMS``,
    repeated ones once, NUL characters dropped; ``[]`` when nothing searchable
    is left."""
    terms: list[str] = []
    for piece in _PIECE.findall(q.replace("\x00", " ")[:MAX_QUERY_LENGTH]):
        if _WORD.search(piece) and piece.casefold() not in (t.casefold() for t in terms):
            terms.append(piece)
        if len(terms) == MAX_TERMS:
            break
    return terms


def term_words(term: str) -> list[str]:
    """The words of a term, as the engines tokenize it (letters, digits and ``_``)."""
    return _WORD.findall(term)


def _term_pattern(terms: Iterable[str]) -> re.Pattern[str] | None:
    words = sorted({word.casefold() for term in terms for word in term_words(term)}, key=len, reverse=True)
    if not words:
        return None
    # A word at the start of a token (the engines match whole tokens; a
    # prefix match here only decides what is marked).
    return re.compile(r"(?<!\w)(?:" + "|".join(re.escape(word) for word in words) + r")", re.IGNORECASE)


def snippet_html(text: str, terms: Iterable[str], *, before: int = SNIPPET_BEFORE, after: int = SNIPPET_AFTER) -> str:
    """A window of ``text`` around the first occurrence of a term's word, as
    escaped HTML with the words in ``<mark>``; the text's beginning when no
    word is found (the engine matched what this simple scan does not, e.g. a
    folded accent)."""
    pattern = _term_pattern(terms)
    first = pattern.search(text) if pattern is not None else None
    anchor = first.start() if first is not None else 0
    start = max(0, anchor - before)
    end = min(len(text), anchor + after)
    # Whole words at the cut ends, where a space is near.
    if start > 0:
        space = text.find(" ", start, anchor)
        if 0 <= space < anchor:
            start = space + 1
    if end < len(text):
        space = text.rfind(" ", max(anchor, end - 20), end)
        if space > anchor:
            end = space
    window = " ".join(text[start:end].split())
    parts: list[str] = ["…" if start > 0 else ""]
    position = 0
    if pattern is not None:
        for match in pattern.finditer(window):
            parts.append(html.escape(window[position : match.start()], quote=False))
            parts.append("<mark>" + html.escape(match.group(0), quote=False) + "</mark>")
            position = match.end()
    parts.append(html.escape(window[position:], quote=False))
    parts.append("…" if end < len(text) else "")
    return "".join(parts)


__all__ = ["MAX_QUERY_LENGTH", "MAX_TERMS", "query_terms", "snippet_html", "term_words"]
