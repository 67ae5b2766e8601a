"""An ``EntryErasure`` for the port's tests: erase the entries named, with
lines kept beside them cleaned of a given text."""

from __future__ import annotations

from collections.abc import Mapping

from sessiontree.core.erasure import ErasedText, ErasureRule, signature
from sessiontree.core.redaction import erase_entry
from sessiontree.core.types import Entry


class EraseIds:
    """Selects ``ids`` (those the session holds) and erases them; other
    lines are cleaned of ``text`` and of copies of the entries selected."""

    def __init__(self, *ids: str, text: str = "") -> None:
        self.ids = ids
        self.text = ErasedText([text] if text else [])
        self.rule = ErasureRule({}, self.text)
        self.selections = 0

    def select(self, view) -> Mapping[str, Entry]:
        self.selections += 1
        chosen = {}
        for entry_id in self.ids:
            entry = view.get(entry_id)
            if entry is None:
                chosen[entry_id] = {"type": "message", "id": entry_id}  # unknown: the storage refuses it
                continue
            self.rule = ErasureRule({**self.rule.tainted, entry_id: signature(entry)}, self.text)
            if erase_entry(entry) != entry:
                chosen[entry_id] = erase_entry(entry)
        return chosen

    def erase_line(self, line: bytes) -> bytes | None:
        return self.rule.erase_line(line)
