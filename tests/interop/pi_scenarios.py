"""Sessions that Pi's own ``SessionManager`` writes (ops for
``interop/pi_server.mjs``'s ``write``): every entry type, branches and
summaries, compactions whose cut Pi's ``prepareCompaction`` chooses,
context edits, system messages, null contents, unicode, forks."""

from __future__ import annotations

from typing import Any

from .messages import assistant, bash, image, system, text, tool_result, user

Op = dict[str, Any]

UNICODE = "naïve café — 日本語のテキスト 👩‍💻🚀 ∑ \u00e9\u0301"


def msg(message: dict[str, Any], ref: str | None = None) -> Op:
    op: Op = {"op": "message", "message": message}
    if ref:
        op["ref"] = ref
    return op


def turn(question: str, answer: str, tokens: int, ref: str | None = None) -> list[Op]:
    return [msg(user(question), f"{ref}u" if ref else None), msg(assistant(answer, tokens=tokens), ref)]


def tools_turn(index: int, big: int = 0) -> list[Op]:
    call = assistant(
        f"Looking at module {index}",
        tools=[
            ("read", {"path": f"src/m{index}.py"}),
            ("edit", {"path": f"src/m{index}.py", "oldText": "a", "newText": "b"}),
        ],
        thinking=f"I should read m{index} first",
        tokens=2000 + 300 * index,
    )
    output = f"line of output {index}\n" * (big or 20)
    return [
        msg(user(f"Please fix module {index}")),
        msg(call),
        msg(tool_result(call, output)),
        msg(tool_result(call, "edited", index=1)),
        msg(assistant(f"Fixed module {index}.", tokens=2600 + 300 * index)),
    ]


def every_entry_type() -> list[Op]:
    ops: list[Op] = [
        {"op": "thinking", "level": "high"},
        {"op": "model", "provider": "anthropic", "modelId": "claude-opus-4-5"},
        msg(user("Start the work"), "u1"),
        msg(assistant("Sure.", tokens=900), "a1"),
        {"op": "label", "target": "$u1", "label": "start"},
        {"op": "label", "target": "$a1", "label": "answer"},
        {"op": "label", "target": "$a1", "label": None},
        {"op": "name", "name": "  First\nname  "},
        {"op": "custom", "customType": "ext-state", "data": {"count": 1, "nested": [1, {"k": None}]}},
        {"op": "custom_message", "customType": "note", "content": "A note for the model", "display": True},
        {
            "op": "custom_message",
            "customType": "note",
            "content": [text("block note"), image()],
            "display": False,
            "details": {"d": 1},
        },
        {
            "op": "usage",
            "kind": "cache_warm",
            "provider": "anthropic",
            "model": "claude-opus-4-5",
            "usage": {"input": 0, "output": 0, "cacheRead": 500, "cacheWrite": 0, "totalTokens": 500},
            "note": "warm",
        },
        *tools_turn(1),
        {"op": "thinking", "level": "low"},
        *tools_turn(2, big=400),
        {"op": "label", "target": "$u1", "label": "start again"},
        {"op": "name", "name": ""},
        msg(bash("make test", "all green", exit_code=0)),
        msg(bash("secret", "hidden", exclude=True)),
        msg(
            {
                "role": "custom",
                "customType": "legacy-hook",
                "content": "from a v2 hook",
                "display": True,
                "timestamp": 5,
            }
        ),
        *turn("And now?", "Done.", 4000),
        {"op": "name", "name": "Final name"},
    ]
    return ops


def branches() -> list[Op]:
    return [
        *turn("Plan the feature", "Here is a plan.", 1200, "p"),
        *turn("Try approach A", "A works partly.", 1500, "a"),
        msg(assistant("Reading", tools=[("read", {"path": "a.txt"})], tokens=1600), "ra"),
        {"op": "branch", "to": "$p"},
        *turn("Try approach B", "B is better.", 1400, "b"),
        {
            "op": "branch_with_summary",
            "to": "$a",
            "summary": "Explored B; it was better.",
            "details": {"readFiles": ["b.txt"], "modifiedFiles": ["c.txt"]},
        },
        *turn("Back on A", "Continuing A.", 1700, "a2"),
        {"op": "label", "target": "$pu", "label": "root question"},
        {"op": "reset"},
        *turn("A second root", "Fresh start.", 300, "r2"),
        {"op": "branch_with_summary", "to": None, "summary": "Abandoned the second root."},
        *turn("Third root after summary", "ok", 200),
        {"op": "branch", "to": "$a2"},
        {"op": "branch_with_summary", "to": "$b", "summary": ""},
        *turn("After an empty summary", "fine", 1800),
    ]


def compactions() -> list[Op]:
    ops: list[Op] = []
    for index in range(1, 5):
        ops += tools_turn(index)
    ops.append({"op": "compact", "keepRecentTokens": 400, "summary": "First summary."})
    for index in range(5, 8):
        ops += tools_turn(index)
    ops.append({"op": "compact", "keepRecentTokens": 150, "summary": "Second summary."})
    ops += turn("After two compactions", "Still here.", 9000, "k")
    ops.append({"op": "context_edit", "target": "$k", "replacement": {"content": "edited answer"}})
    ops.append(
        {
            "op": "compact_none",
            "summary": "Retain-none summary.",
            "tokensBefore": 12345,
            "usage": {"input": 10, "output": 2},
        }
    )
    ops += turn("After a retain-none compaction", "Fresh context.", 700)
    ops += tools_turn(9)
    ops.append({"op": "compact", "keepRecentTokens": 1, "summary": "Tiny budget."})
    ops += turn("Last", "End.", 300)
    return ops


def context_edits() -> list[Op]:
    call = assistant("Running", tools=[("bash", {"command": "ls"})], tokens=3000)
    return [
        *turn("First question", "First answer", 1000, "q1"),
        msg(call, "call"),
        msg(tool_result(call, "a.txt b.txt " * 50), "result"),
        {"op": "custom_message", "customType": "note", "content": "original note", "display": True, "ref": "note"},
        *turn("Second question", "Second answer", 5000, "q2"),
        {"op": "context_edit", "target": "$q1u", "replacement": {"content": "edited question"}},
        {"op": "context_edit", "target": "$q1", "replacement": {"content": "edited answer"}},
        {"op": "context_edit", "target": "$result", "replacement": {"content": [text("short listing")]}},
        {"op": "context_edit", "target": "$note", "replacement": {"content": [text("edited note")]}},
        {"op": "context_edit", "target": "$q1u", "replacement": None},
        *turn("Third question", "Third answer", 6000, "q3"),
        {"op": "context_edit", "target": "$q2u", "replacement": {"content": "latest wins: first"}},
        {"op": "context_edit", "target": "$q2u", "replacement": {"content": "latest wins: second"}},
        # A failed attempt, hidden by an omission edit: Pi's recovery rule moves the cut.
        msg(user("Do the risky thing " * 40), "risky"),
        msg(assistant("partial" * 200, stop="error", tokens=7000), "failed"),
        {"op": "context_edit", "target": "$failed", "replacement": None},
        {"op": "branch", "to": "$q2"},
        *turn("On a branch before the later edits", "Original view again", 6500),
    ]


def system_messages() -> list[Op]:
    return [
        msg(
            system(
                "", sections={"preamble": "You are a coding assistant.", "cwd": "/srv/project"}, added=["read", "bash"]
            )
        ),
        *turn("Hello", "Hi!", 2000, "h"),
        msg(system("", sections={"skills": "<skills>none</skills>", "cwd": None}, removed=["bash"], added=["write"])),
        *tools_turn(1),
        *tools_turn(2),
        {"op": "compact", "keepRecentTokens": 300, "summary": "Summary with a system checkpoint."},
        msg(system("Extra instructions.", sections={"mode": "careful"})),
        *tools_turn(3),
        {"op": "compact", "keepRecentTokens": 100, "summary": "Second checkpoint."},
        *turn("Done?", "Yes.", 800),
    ]


def null_contents() -> list[Op]:
    return [
        msg({"role": "user", "content": None, "timestamp": 1}, "nu"),
        msg(
            {"role": "assistant", "content": None, "provider": "p", "model": "m", "stopReason": "stop", "timestamp": 2}
        ),
        msg({"role": "user", "timestamp": 3}),
        msg({"role": "system", "content": None, "timestamp": 4}),
        msg(
            {
                "role": "toolResult",
                "toolCallId": "x",
                "toolName": "read",
                "content": None,
                "isError": False,
                "timestamp": 5,
            }
        ),
        {"op": "custom_message", "customType": "empty"},
        *turn("After nulls", "fine", 100),
        {"op": "compact", "keepRecentTokens": 1, "summary": "null-safe"},
        *turn("Last", "ok", 50),
    ]


def unicode_and_images() -> list[Op]:
    call = assistant(UNICODE, tools=[("read", {"path": "docs/日本.md"})], tokens=4000)
    cut_in_pair = "x" * 1999 + "😀" + "y" * 500  # the tool-result cut falls inside a surrogate pair
    return [
        msg(user([text(UNICODE), image()]), "uu"),
        msg(call),
        msg(tool_result(call, [text(cut_in_pair), image("ZGF0YQ==")])),
        msg(assistant("🚀 " * 300, tokens=6000)),
        {"op": "label", "target": "$uu", "label": "ラベル 🏷️"},
        {"op": "name", "name": "Ünïcödé 会话"},
        *turn("再来一次 " * 30, "好的 " * 30, 7000),
        {"op": "compact", "keepRecentTokens": 200, "summary": "Résumé 📝"},
        *turn("tail", "end", 100),
    ]


def trailing_tool_results() -> list[Op]:
    call = assistant("Running many tools", tools=[("bash", {"command": f"cmd {i}"}) for i in range(3)], tokens=5000)
    return [
        *turn("Question one", "Answer one", 1000),
        *turn("Question two", "Answer two", 1500),
        msg(user("Run everything"), "run"),
        msg(call, "call"),
        *[msg(tool_result(call, f"output {i} " * 600, index=i)) for i in range(3)],
    ]


def budget_rules() -> list[Op]:
    # Custom messages, bash executions and branch summaries count toward the
    # kept budget and open turns (#6326); a cut can land on each of them.
    return [
        *turn("Begin", "Begun", 800),
        {"op": "custom_message", "customType": "ctx", "content": "context " * 300, "display": False},
        msg(assistant("after custom", tokens=2000)),
        msg(bash("pytest", "passed " * 200)),
        msg(assistant("after bash", tokens=2500)),
        *turn("Branch point", "here", 2600, "bp"),
        *turn("Abandoned", "gone", 2700),
        {"op": "branch_with_summary", "to": "$bp", "summary": "summary text " * 100},
        msg(assistant("after summary", tokens=3000)),
        msg(call_with_nested := assistant("script", tools=[("codemode", {"script": "..."})], tokens=3100)),
        msg(
            tool_result(
                call_with_nested,
                "ran",
                nested=[
                    {"name": "write", "arguments": {"path": "out.txt"}},
                    {"name": "read", "arguments": {"path": "in.txt"}},
                ],
            )
        ),
        *turn("End", "ended", 3200),
    ]


def forks() -> list[Op]:
    return [
        *turn("Root question", "Root answer", 500, "r"),
        {"op": "label", "target": "$ru", "label": "first"},
        *turn("Second", "Second answer", 900, "s"),
        {"op": "label", "target": "$s", "label": "second"},
        *turn("Third", "Third answer", 1300, "t"),
        {"op": "compact", "keepRecentTokens": 10, "summary": "Compacted before the fork."},
        *turn("Fourth", "Fourth answer", 1500, "f"),
        {"op": "label", "target": "$ru", "label": None},
        {"op": "label", "target": "$f", "label": "fourth"},
        {"op": "fork", "at": "$f"},
        *turn("In the fork", "Forked answer", 1600),
    ]


SCENARIOS: dict[str, list[Op]] = {
    "every_entry_type": every_entry_type(),
    "branches": branches(),
    "compactions": compactions(),
    "context_edits": context_edits(),
    "system_messages": system_messages(),
    "null_contents": null_contents(),
    "unicode_and_images": unicode_and_images(),
    "trailing_tool_results": trailing_tool_results(),
    "budget_rules": budget_rules(),
    "forks": forks(),
}

KEEP_RECENT_TOKENS = [1, 64, 256, 1024, 4096, 20000]
