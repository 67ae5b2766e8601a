"""The entries of a branched session (Pi's ``createBranchedSession``), done right.

The copy holds the root→leaf path without label entries, then one fresh label
entry per label that currently applies to an entry of the path. A label entry
sits *on* the path (it was appended as a child of the leaf, and the next entry
became its child); dropping it would orphan that child, so every copied entry
is chained to the entry copied before it (Pi does the same since 0.79.2). The
fork's context therefore equals the source's context at the fork point.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .ids import new_entry_id
from .pi_session_file import now_iso
from .types import Entry, LabelInfo


def build_branched_entries(path: Sequence[Entry], labels: Mapping[str, LabelInfo]) -> list[Entry]:
    """Entries for a new session from a root-first ``path`` and the source's
    current ``labels`` (target id → label), as Pi's ``createBranchedSession``
    writes them: the path without its label entries, each entry chained to
    the one kept before it (the first becomes the root), then one label entry
    per current label on a copied entry, in the order the labels were set,
    each keeping the time it was set. Input entries are not modified."""
    copied: list[Entry] = []
    # A compaction keeping entries "from" a dropped label keeps from the next
    # copied entry instead; otherwise the fork would lose the kept messages.
    next_kept: dict[str, str] = {}
    labels_awaiting_next: list[str] = []
    parent_id: str | None = None
    for entry in path:
        if entry.get("type") == "label":
            labels_awaiting_next.append(entry["id"])
            continue
        for label_id in labels_awaiting_next:
            next_kept[label_id] = entry["id"]
        labels_awaiting_next.clear()
        changes: Entry = {}
        if parent_id != entry.get("parentId"):
            changes["parentId"] = parent_id
        first_kept = entry.get("firstKeptEntryId")
        if entry.get("type") == "compaction" and first_kept != entry["id"] and first_kept in next_kept:
            changes["firstKeptEntryId"] = next_kept[first_kept]
        copied.append({**entry, **changes} if changes else entry)
        parent_id = entry["id"]

    used_ids = {e["id"] for e in copied}
    copied_ids = set(used_ids)
    for target_id, info in labels.items():
        if target_id not in copied_ids:
            continue
        label_id = new_entry_id(used_ids)
        used_ids.add(label_id)
        copied.append(
            {
                "type": "label",
                "id": label_id,
                "parentId": parent_id,
                "timestamp": info.get("timestamp") or now_iso(),
                "targetId": target_id,
                "label": info["label"],
            }
        )
        parent_id = label_id
    return copied
