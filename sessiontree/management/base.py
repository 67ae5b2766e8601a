"""What every management command of this project shares.

- Failures end as ``CommandError`` with a one-line reason that starts with
  the error's code, and the exit code of its category (the one table in
  ``sessiontree.core.errors``): 2 bad input, 3 not found, 4 conflict,
  5 corrupt stored data, 6 storage unavailable, 7 summarizer failed,
  1 anything unexpected. Never a traceback for a known failure.
- Writes are made as ``cli:<os user>`` on the ``cli`` channel (``actor`` and
  ``channel`` attributes), through the operations layer.
- A long run shows a progress bar on a terminal (``progress_bars``), never
  with ``--json`` or when stderr is not a terminal (cron, pipes).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, InterfaceError, OperationalError, connection

from sessiontree.core.errors import CATEGORIES, UNAVAILABLE, SessionTreeError
from sessiontree.providers import db_errors
from sessiontree.services.audit import Actor, cli_actor

EXIT_BAD_INPUT = CATEGORIES["bad_input"].exit_code
EXIT_NOT_FOUND = CATEGORIES["not_found"].exit_code
EXIT_CONFLICT = CATEGORIES["conflict"].exit_code
EXIT_CORRUPT = CATEGORIES["corrupt"].exit_code
EXIT_UNAVAILABLE = CATEGORIES[UNAVAILABLE].exit_code


def one_line(text: Any) -> str:
    return " ".join(str(text).split())


def command_error(exc: BaseException) -> CommandError:
    """The ``CommandError`` a known failure ends a command with."""
    if isinstance(exc, OperationalError | InterfaceError) and not isinstance(exc, SessionTreeError):
        exc = db_errors.typed(exc, connection.vendor)  # a conflict exits 4, the rest 6
    if isinstance(exc, SessionTreeError):
        return CommandError(f"{exc.code}: {one_line(exc)}", returncode=exc.exit_code)
    if isinstance(exc, ImproperlyConfigured):
        return CommandError(f"improperly_configured: {one_line(exc)}", returncode=EXIT_BAD_INPUT)
    if isinstance(exc, DatabaseError | InterfaceError):
        return CommandError(f"storage_unavailable: {one_line(exc)}", returncode=EXIT_UNAVAILABLE)
    if isinstance(exc, OSError):
        return CommandError(f"storage_unavailable: {one_line(exc)}", returncode=EXIT_UNAVAILABLE)
    raise exc


class SessionTreeCommand(BaseCommand):
    """A command whose known failures become one-line reasons with category exit codes."""

    channel = "cli"

    @property
    def actor(self) -> Actor:
        return cli_actor()

    @contextmanager
    def progress_bars(
        self, *, unit: str, enabled: bool = True, empty: bool = False
    ) -> Iterator[Callable[..., Callable[[int], Any] | None]]:
        """``progress(total, desc=None)`` for a service that says how much it
        has to do: a tqdm bar on stderr (closed when the block ends) whose
        ``update`` the service calls, or ``None`` (no bar) when ``enabled``
        is false (``--json``), stderr is not a terminal, or there is nothing
        to do (unless ``empty``)."""
        bars: list[Any] = []

        def progress(total: int, desc: str | None = None) -> Callable[[int], Any] | None:
            if not enabled or not self.stderr.isatty() or not (total or empty):
                return None
            from tqdm import tqdm

            bar = tqdm(total=total, unit=unit, desc=desc, file=self.stderr)
            bars.append(bar)
            return bar.update

        try:
            yield progress
        finally:
            for bar in bars:
                bar.close()

    def execute(self, *args: Any, **options: Any) -> Any:
        try:
            return super().execute(*args, **options)
        except CommandError:
            raise
        except (SessionTreeError, ImproperlyConfigured, DatabaseError, InterfaceError, OSError) as exc:
            raise command_error(exc) from None
