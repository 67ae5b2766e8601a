"""Keys of entries that carry an id of their own, so that a read finds them by key.

Some entries name something a later write refers to by that name: a
roleplay commit carries its ``commitId``, and a correction names the commit
it corrects. Finding such an entry by reading the path back costs the
distance to it; the storages instead keep each entry's *key* as they store
it and answer ``entries_with_key`` (``providers/keyed_reads.py``) by that key
(issue 23: reads cost what they return).

An app registers a rule (``register_entry_key``): its name, the entries it
looks at (``custom`` entries of some ``customType``s, ``message`` entries
whose message names some ``toolName``, which the storages already tell
apart cheaply) and a function that gives such an entry's value, or ``None``.
An entry's key is ``"<rule name>:<value>"`` (``key_of``), at most
``MAX_KEY_LENGTH`` characters; an entry has at most one key. The storages
compute it from the entry alone, whoever wrote it (a Pi extension writing
the file included), so the rule's function must be pure, cheap and never
raise: it sees every entry of its custom types and tool names, however
malformed.

A key is a hint, never a fact a reader trusts blindly: ``entries_with_key``
may miss an entry stored before its rule existed (a ``mysql`` row written
by a process without the rule), and a storage may match more rows than the
key (a case-insensitive collation), so readers check what they get and
fall back to their reading by path where nothing is found, unless the
storage says it knows every entry's key (``keyed_reads.keys_complete``).

Pure Python: no Django (the kernel's rule); the registry lives for the
process, filled by apps when they start (``AppConfig.ready``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from .types import Entry

# The longest key a storage keeps (its column's length on ``mysql``); an
# entry whose key would be longer has none (its readers fall back).
MAX_KEY_LENGTH = 128
SEPARATOR = ":"

KeyFunction = Callable[[Entry], Any]


@dataclass(frozen=True)
class KeyRule:
    name: str
    custom_types: frozenset[str]
    tool_names: frozenset[str]
    key: KeyFunction
    version: int


_lock = threading.Lock()
_rules: dict[str, KeyRule] = {}
_by_custom_type: dict[str, KeyRule] = {}
_by_tool_name: dict[str, KeyRule] = {}


def register_entry_key(
    name: str,
    *,
    key: KeyFunction,
    custom_types: Collection[str] = (),
    tool_names: Collection[str] = (),
    version: int = 1,
) -> None:
    """Register (or replace, under the same ``name``) the rule that keys the
    ``custom`` entries of ``custom_types`` and the ``message`` entries naming
    one of ``tool_names``: ``key(entry)`` gives the value (a non-empty
    string) or ``None``. ``version``: raise it when ``key`` comes to give
    other values (what was persisted under the old one is then rebuilt
    where the storage can tell, the ``file`` storage's sidecar). ``ValueError`` for a name that is empty or holds
    ``SEPARATOR``, a rule that looks at nothing, or one that would look at
    entries another rule already keys (an entry has one key)."""
    if not isinstance(name, str) or not name or SEPARATOR in name:
        raise ValueError(f"an entry key rule's name is a non-empty string without {SEPARATOR!r}: {name!r}")
    customs, tools = frozenset(custom_types), frozenset(tool_names)
    if not customs and not tools:
        raise ValueError(f"entry key rule {name!r} names no custom type and no tool name")
    if not all(isinstance(value, str) and value for value in (*customs, *tools)):
        raise ValueError(f"entry key rule {name!r}: custom types and tool names are non-empty strings")
    with _lock:
        for table, wanted, what in ((_by_custom_type, customs, "custom type"), (_by_tool_name, tools, "tool name")):
            taken = sorted(value for value in wanted if value in table and table[value].name != name)
            if taken:
                raise ValueError(f"entry key rule {name!r}: {what} {taken[0]!r} is keyed by {table[taken[0]].name!r}")
        _drop(name)
        rule = KeyRule(name, customs, tools, key, version)
        _rules[name] = rule
        _by_custom_type.update(dict.fromkeys(customs, rule))
        _by_tool_name.update(dict.fromkeys(tools, rule))


def unregister_entry_key(name: str) -> None:
    """Drop the rule ``name`` (tests; nothing when there is none)."""
    with _lock:
        _drop(name)


def _drop(name: str) -> None:
    old = _rules.pop(name, None)
    if old is not None:
        for value in old.custom_types:
            _by_custom_type.pop(value, None)
        for value in old.tool_names:
            _by_tool_name.pop(value, None)


def key_of(name: str, value: Any) -> str | None:
    """The key a rule ``name`` gives an entry whose value is ``value`` (what
    a reader asks for), or ``None`` when no storage could keep it."""
    if not isinstance(value, str) or not value:
        return None
    key = f"{name}{SEPARATOR}{value}"
    return key if len(key) <= MAX_KEY_LENGTH else None


def _rule_of(entry: Entry) -> KeyRule | None:
    entry_type = entry.get("type")
    if entry_type == "custom":
        custom_type = entry.get("customType")
        return _by_custom_type.get(custom_type) if isinstance(custom_type, str) else None
    if entry_type == "message":
        message = entry.get("message")
        tool = message.get("toolName") if isinstance(message, dict) else None
        return _by_tool_name.get(tool) if isinstance(tool, str) else None
    return None


def entry_key(entry: Entry) -> str | None:
    """``entry``'s key under the registered rules, or ``None``."""
    rule = _rule_of(entry)
    return key_of(rule.name, rule.key(entry)) if rule is not None else None


def keyed_custom_types() -> frozenset[str]:
    """The custom types some rule keys (a storage asks ``entry_key`` only of those)."""
    return frozenset(_by_custom_type)


def keyed_tool_names() -> frozenset[str]:
    """The tool names some rule keys."""
    return frozenset(_by_tool_name)


def signature() -> str:
    """The registered rules' names and what each looks at, in a stable order:
    what a persisted index of keys was built with (the ``file`` storage's
    sidecar is read only under the same rules)."""
    return ";".join(
        f"{rule.name}@{rule.version}({','.join(sorted(rule.custom_types))}|{','.join(sorted(rule.tool_names))})"
        for rule in sorted(_rules.values(), key=lambda rule: rule.name)
    )
