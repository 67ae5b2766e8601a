"""The names of audited operations: one constant each, shared by the audit
record, the REST API's audit filter and the admin's audit list.

Every name is ``<verb>_<object>`` in snake case. Plug-ins (the roleplay
layer) add their own with ``register_operations`` when their app is ready;
``audit.record`` refuses a name nobody registered, so a typo is an error at
the first write, never a silent new operation in the audit trail.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import StrEnum


class Operation(StrEnum):
    # sessions
    CREATE_SESSION = "create_session"
    UPDATE_SESSION = "update_session"
    ARCHIVE_SESSION = "archive_session"
    RESTORE_SESSION = "restore_session"
    DELETE_SESSION = "delete_session"
    HARD_DELETE_SESSION = "hard_delete_session"
    IMPORT_SESSION = "import_session"
    REGISTER_FILE = "register_file"
    REFRESH_SESSION = "refresh_session"
    REPAIR_SESSION = "repair_session"
    EXPORT_SESSION = "export_session"
    # entries
    APPEND_ENTRY = "append_entry"
    APPEND_ENTRIES = "append_entries"
    IMPORT_ENTRIES = "import_entries"
    BEGIN_IN_FLIGHT = "begin_in_flight"
    UPDATE_IN_FLIGHT = "update_in_flight"
    COMPLETE_IN_FLIGHT = "complete_in_flight"
    ABORT_IN_FLIGHT = "abort_in_flight"
    # the tree
    SWITCH_LEAF = "switch_leaf"
    RESET_LEAF = "reset_leaf"
    SET_LABEL = "set_label"
    CLEAR_LABEL = "clear_label"
    NAVIGATE_TREE = "navigate_tree"
    FORK_SESSION = "fork_session"
    COMPACT_SESSION = "compact_session"
    # moderation
    FLAG_ENTRY = "flag_entry"
    RESOLVE_FLAG = "resolve_flag"
    HIDE_ENTRY = "hide_entry"
    UNHIDE_ENTRY = "unhide_entry"
    ERASE_ENTRY = "erase_entry"
    # data protection
    PLACE_HOLD = "place_hold"
    RELEASE_HOLD = "release_hold"
    ERASE_USER_DATA = "erase_user_data"


# Names written by earlier releases, and what they are called now
# (migration 0009 renames stored records).
RENAMED: dict[str, str] = {
    "navigate": Operation.NAVIGATE_TREE,
    "fork": Operation.FORK_SESSION,
    "compact": Operation.COMPACT_SESSION,
    "export": Operation.EXPORT_SESSION,
}

_NAME = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)+$")
_registered: set[str] = {operation.value for operation in Operation}


def register_operations(names: Iterable[str]) -> None:
    """Make ``names`` (a plug-in's operations) known to the audit."""
    for name in names:
        if not isinstance(name, str) or not _NAME.match(name) or len(name) > 64:
            raise ValueError(f"Operation name {name!r} must be <verb>_<object> in snake case (64 characters at most)")
        _registered.add(name)


def known_operations() -> list[str]:
    """Every operation name the audit accepts, sorted."""
    return sorted(_registered)


def check_operation(name: object) -> str:
    if not isinstance(name, str) or name not in _registered:
        raise ValueError(f"Unknown audit operation {name!r}; register it with register_operations()")
    return name
