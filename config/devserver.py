"""The port `make run` serves on: the one asked for, or the next free one.

    python -m config.devserver --host 127.0.0.1 --port 8000 [--explicit]

Prints the port to use on stdout and a line about it on stderr. A port given
explicitly (``make run PORT=8001``) that is busy is an error (exit 1, one
line), since the operator chose it; the default port, when busy, moves to the
next free one and says so. Either way this is decided before the login is
printed, so the login's address is the one served.
"""

from __future__ import annotations

import argparse
import errno
import socket
import sys

SEARCH = 50  # ports tried after a busy default


def is_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def choose(host: str, port: int, *, explicit: bool) -> int:
    """The port to serve on; ``SystemExit`` with one line when there is none."""
    if is_free(host, port):
        return port
    if explicit:
        raise SystemExit(
            f"make run: port {port} on {host} is in use (another server is running there): "
            f"stop it, or choose another port, e.g. make run PORT={port + 1}"
        )
    for candidate in range(port + 1, port + 1 + SEARCH):
        if is_free(host, candidate):
            print(f"make run: port {port} is in use; serving on {candidate} instead (make run PORT=… chooses)",
                  file=sys.stderr)  # fmt: skip
            return candidate
    raise SystemExit(
        f"make run: ports {port} to {port + SEARCH} on {host} are all in use: choose one with make run PORT=…"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Choose the port make run serves on.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--explicit", action="store_true", help="The port was asked for: busy is an error.")
    args = parser.parse_args(argv)
    if not 0 < args.port < 65536:
        raise SystemExit(f"make run: PORT={args.port} is not a TCP port (1 to 65535)")
    print(choose(args.host, args.port, explicit=args.explicit))


if __name__ == "__main__":
    main()
