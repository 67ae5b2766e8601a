"""Token estimates equal Pi 1.6.0's, numbers in tool-call arguments included.

Pi counts a tool call's arguments as ``JSON.stringify(arguments).length``;
JavaScript writes numbers differently from Python (``1e-7`` not ``1e-07``,
``1e+21``, ``100`` not ``100.0``), and a one-character difference changes an
estimate by one token when it crosses a multiple of four.
"""

from __future__ import annotations

import math

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from sessiontree.core.compaction import estimate_tokens, js_json_stringify, js_number

# Numbers whose JSON differs between Python's json/orjson and JavaScript.
AWKWARD = [1e-07, 1e21, 1e-05, 100.0, 1e20, -0.0, 5e-324, 1.7976931348623157e308, 2**53 + 1, 2**63 - 1, 0.1, 12.5]


def tool_call(arguments):
    return {
        "role": "assistant",
        "content": [{"type": "toolCall", "id": "call-1", "name": "measure", "arguments": arguments}],
        "provider": "p",
        "model": "m",
    }


def test_estimates_of_tool_calls_with_awkward_numbers_equal_pis(pi):
    # Each padded so that one character more or less crosses a multiple of four.
    messages = [tool_call({"value": value, "pad": "x" * pad}) for value in AWKWARD for pad in range(4)]
    assert [estimate_tokens(message) for message in messages] == pi.estimate(messages)


def test_js_json_stringify_equals_javascripts_for_awkward_numbers(pi):
    values = [*AWKWARD, {"nested": [1.5, {"deep": 1e-7}], "n": 3}, [1e21, 2.0]]
    assert [js_json_stringify(value) for value in values] == pi.stringify(values)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=40))
def test_every_double_is_written_as_javascript_writes_it(pi, values):
    assert [js_number(value) for value in values] == pi.stringify(values)


def test_non_finite_numbers_are_null_as_in_javascript():
    # Not sendable to Pi as JSON; JSON.stringify writes null for each.
    assert [js_number(value) for value in (math.nan, math.inf, -math.inf)] == ["null"] * 3
    assert orjson.loads(js_json_stringify({"a": [1e-7, 2.0]})) == {"a": [1e-7, 2.0]}
