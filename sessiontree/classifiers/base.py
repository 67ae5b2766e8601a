"""The classifier protocol: texts in, findings out.

A classifier reads the text of entries (``sessiontree.core.text.entry_text``)
and says, for each, what it found: a moderation category and a short note
that names *what kind* of thing was found, never the thing itself (a note is
stored in a flag, and a flag must not become another copy of a card number).
It never writes anything; the ``moderate_sessions`` command opens the flags.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from sessiontree.core.errors import UPSTREAM, SessionTreeError


@dataclass(frozen=True)
class Finding:
    """One reason to flag an entry: ``category`` is a moderation category
    (``pii``, ``harassment`` …), ``note`` says what was found without quoting
    it, ``score`` in [0, 1] is how sure the classifier is."""

    category: str
    note: str
    score: float = 1.0


class ClassifierError(SessionTreeError):
    """A classifier back end failed (unreachable, an HTTP error, a reply it cannot read)."""

    code = "classifier_failed"
    category = UPSTREAM


@runtime_checkable
class Classifier(Protocol):
    """Finds reasons to flag texts. ``name`` becomes the flag's source ``classifier:<name>``."""

    name: str

    def classify(self, texts: Sequence[str]) -> list[list[Finding]]:
        """One list of findings per text, in order (empty: nothing found)."""
        ...
