"""The API's entry schema is checked by compiled code first
(``entry_schema._fast_check``, fastjsonschema) and walked by jsonschema only
when that refuses a value (to name the problem). So the compiled check must
never accept what jsonschema refuses: drawn values built from the schema's
own property names, discriminators and enum values, for every component."""

from __future__ import annotations

from functools import cache
from typing import Any

import fastjsonschema
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from jsonschema.exceptions import best_match

from sessiontree.api import entry_schema
from sessiontree.api.entry_schema import (
    COMPONENTS,
    _by_tag,
    _fast_check,
    _json_schema,
    _validator,
    compiled_check,
    schema_problem,
)
from tests.core.test_properties import session_trees


def _vocabulary() -> tuple[list[str], list[Any]]:
    names: set[str] = set()
    values: set[Any] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "properties":
                    names.update(value)
                    for child in value.values():
                        walk(child)
                elif key == "enum":
                    values.update(item for item in value if isinstance(item, (str, int, float)))
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(_json_schema(COMPONENTS))
    return sorted(names), sorted(values, key=repr)


NAMES, ENUMS = _vocabulary()
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.sampled_from(ENUMS),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(NAMES), st.text(max_size=6)), inner, max_size=6),
    ),
    max_leaves=25,
)


def fast_accepts(value: Any, name: str) -> bool:
    try:
        _fast_check(name)(value)
    except fastjsonschema.JsonSchemaException:
        return False
    return True


def jsonschema_accepts(value: Any, name: str) -> bool:
    return best_match(_validator(name).iter_errors(value)) is None


@settings(max_examples=400, deadline=None)
@given(name=st.sampled_from(sorted(COMPONENTS)), value=values)
def test_the_compiled_check_never_accepts_what_jsonschema_refuses(name, value):
    accepted = fast_accepts(value, name)
    event(f"compiled check: {'accepts' if accepted else 'refuses'}")
    if accepted:
        assert jsonschema_accepts(value, name), (name, value)


def _mutated(draw: Any, value: Any) -> Any:
    """``value`` with one place changed: a leaf replaced, a key added or removed."""
    if isinstance(value, dict) and value and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(value)))
        changed = dict(value)
        choice = draw(st.integers(0, 2))
        if choice == 0:
            del changed[key]
        elif choice == 1:
            changed[draw(st.one_of(st.sampled_from(NAMES), st.text(max_size=6)))] = draw(scalars)
        else:
            changed[key] = _mutated(draw, value[key])
        return changed
    if isinstance(value, list) and value and draw(st.booleans()):
        index = draw(st.integers(0, len(value) - 1))
        return [*value[:index], _mutated(draw, value[index]), *value[index + 1 :]]
    return draw(scalars)


def _pieces(entry: dict[str, Any]) -> list[Any]:
    """An entry and what it holds: its message, the message's content blocks."""
    pieces: list[Any] = [entry]
    message = entry.get("message")
    if isinstance(message, dict):
        pieces.append(message)
        if isinstance(message.get("content"), list):
            pieces += message["content"]
    return pieces


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), entries=session_trees(max_entries=12))
def test_real_entries_and_one_change_never_split_the_two(data, entries):
    """Entries as the kernel's property tests draw them (every type), their
    messages and content blocks, as they are and with one place changed,
    against every component: the compiled check accepts exactly when
    jsonschema does, or refuses more, never the other way."""
    for entry in entries:
        for piece in _pieces(entry):
            for value in (piece, _mutated(data.draw, piece)):
                for name in COMPONENTS:
                    accepted = fast_accepts(value, name)
                    event(f"compiled check: {'accepts' if accepted else 'refuses'}")
                    if accepted:
                        assert jsonschema_accepts(value, name), (name, value)


def test_valid_entries_take_the_compiled_path_and_bad_ones_are_named(monkeypatch):
    valid = {"type": "message", "message": {"role": "user", "content": [{"type": "text", "text": "hi"}]}}
    assert fast_accepts(valid, "NewEntry")
    assert schema_problem(valid, "NewEntry") is None
    # A valid value never reaches jsonschema.
    monkeypatch.setattr(entry_schema, "best_match", lambda errors: (_ for _ in ()).throw(AssertionError("walked")))
    assert schema_problem(valid, "NewEntry") is None
    monkeypatch.undo()
    bad = {"type": "compaction", "summary": "s", "firstKeptEntryId": "a", "tokensBefore": "many"}
    assert not fast_accepts(bad, "NewEntry")
    assert "tokensBefore" in (schema_problem(bad, "NewEntry") or "")


# --- unions dispatched on their tag (entry_schema._by_tag) ---------------------------------

UNIONS = sorted(name for name, schema in COMPONENTS.items() if "discriminator" in schema)


@cache
def _with_one_of(name: str) -> Any:
    return compiled_check(name, by_tag=False)


def one_of_accepts(value: Any, name: str) -> bool:
    try:
        _with_one_of(name)(value)
    except fastjsonschema.JsonSchemaException:
        return False
    return True


def test_every_union_is_dispatched_on_its_tag():
    assert UNIONS == ["ContentBlock", "Entry", "Message", "NewEntry"]
    for name in UNIONS:
        dispatched = _by_tag(COMPONENTS[name], COMPONENTS)
        assert "oneOf" not in dispatched and "if" in dispatched["allOf"][0], name


def test_a_union_whose_variants_do_not_pin_the_tag_stays_as_it_is():
    loose = {"type": "object", "properties": {"kind": {"type": "string"}}, "required": ["kind"]}
    pinned = {"type": "object", "properties": {"kind": {"type": "string", "enum": ["a"]}}, "required": ["kind"]}
    components = {"A": pinned, "B": loose}
    union = {
        "oneOf": [{"$ref": "#/components/schemas/A"}, {"$ref": "#/components/schemas/B"}],
        "discriminator": {
            "propertyName": "kind",
            "mapping": {"a": "#/components/schemas/A", "b": "#/components/schemas/B"},
        },
    }
    assert _by_tag(union, components) is union
    unpinned_other = {**union, "oneOf": [{"$ref": "#/components/schemas/A"}, {"$ref": "#/components/schemas/C"}]}
    unpinned_other["discriminator"] = {"propertyName": "kind", "mapping": {"a": "#/components/schemas/A"}}
    assert _by_tag(unpinned_other, {**components, "C": loose}) is unpinned_other


@settings(max_examples=400, deadline=None)
@given(name=st.sampled_from(sorted(COMPONENTS)), value=values)
def test_dispatching_on_the_tag_accepts_exactly_what_one_of_accepts(name, value):
    accepted = fast_accepts(value, name)
    event(f"compiled check: {'accepts' if accepted else 'refuses'}")
    assert accepted == one_of_accepts(value, name), (name, value)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), entries=session_trees(max_entries=12))
def test_dispatching_on_the_tag_agrees_on_real_entries_and_one_change(data, entries):
    for entry in entries:
        for piece in _pieces(entry):
            for value in (piece, _mutated(data.draw, piece), {**piece, "type": data.draw(scalars)}):
                for name in UNIONS:
                    assert fast_accepts(value, name) == one_of_accepts(value, name), (name, value)
