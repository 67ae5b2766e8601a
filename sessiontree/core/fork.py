"""The entries of a branched session (Pi's ``createBranchedSession``), done right.

The copy holds the root→leaf path without label entries, then one fresh label
entry per label that currently applies to an entry of the path. A label entry
sits *on* the path (it was appended as a child of the leaf, and the next entry
became its child); dropping it would orphan that child, so the child is
re-attached to the nearest kept ancestor. The fork's context therefore equals
the source's context at the fork point.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .ids import new_entry_id
from .pi_session_file import now_iso
from .types import Entry, LabelInfo


def build_branched_entries(path: Sequence[Entry], labels: Mapping[str, LabelInfo]) -> list[Entry]:
    """Entries for a new session from a root-first ``path`` and the source's
    current ``labels`` (target id → label). Input entries are not modified."""
    copied: list[Entry] = []
    # label entry id → the id its children must hang from instead
    replacement_parent: dict[str, str | None] = {}
    # A compaction keeping entries "from" a dropped label keeps from the next
    # copied entry instead; otherwise the fork would lose the kept messages.
    next_kept: dict[str, str] = {}
    labels_awaiting_next: list[str] = []
    for entry in path:
        parent_id = entry.get("parentId")
        while parent_id is not None and parent_id in replacement_parent:
            parent_id = replacement_parent[parent_id]
        if entry.get("type") == "label":
            replacement_parent[entry["id"]] = parent_id
            labels_awaiting_next.append(entry["id"])
            continue
        for label_id in labels_awaiting_next:
            next_kept[label_id] = entry["id"]
        labels_awaiting_next.clear()
        changes: Entry = {}
        if parent_id != entry.get("parentId"):
            changes["parentId"] = parent_id
        if entry.get("type") == "compaction" and entry.get("firstKeptEntryId") in next_kept:
            changes["firstKeptEntryId"] = next_kept[entry["firstKeptEntryId"]]
        if changes:
            entry = {**entry, **changes}
        copied.append(entry)

    kept_ids = {e["id"] for e in copied}
    used_ids = set(kept_ids)
    parent_id = copied[-1]["id"] if copied else None
    for entry in list(copied):
        info = labels.get(entry["id"])
        if info is None:
            continue
        label_id = new_entry_id(used_ids)
        used_ids.add(label_id)
        copied.append(
            {
                "type": "label",
                "id": label_id,
                "parentId": parent_id,
                "timestamp": now_iso(),
                "targetId": entry["id"],
                "label": info["label"],
            }
        )
        parent_id = label_id
    return copied
