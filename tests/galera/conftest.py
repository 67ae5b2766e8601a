"""The Galera leg: a 3-node MariaDB Galera cluster on loopback (``cluster.py``).

``make test-galera`` starts the cluster, runs the contract suite against node
1 and these multi-primary scenarios (writers on different nodes), then stops
it. Here the default database is node 1 (``DATABASE_URL``) and
``GALERA_DIR``/``GALERA_BASE_PORT`` name the running cluster; a worker thread
moves its own connection to another node with ``on_node``.

Outside that target these tests are skipped, saying how to run them;
``REQUIRE_GALERA=1`` (CI) turns a missing or broken cluster into a failure.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from django.db import connection, connections

from .cluster import DEFAULT_BASE_PORT, DEFAULT_DIR, GaleraCluster, Node

REQUIRE_GALERA = os.environ.get("REQUIRE_GALERA") == "1"
THREAD_TIMEOUT_SECONDS = 240


def _cluster_size() -> int:
    if connection.vendor != "mysql":
        return 0
    try:
        with connection.cursor() as cursor:
            cursor.execute("SHOW STATUS LIKE 'wsrep_cluster_size'")
            found = cursor.fetchone()
    except Exception:
        return 0
    return int(found[1]) if found and str(found[1]).isdigit() else 0


@pytest.fixture(scope="session")
def galera(django_db_setup, django_db_blocker) -> GaleraCluster:
    """The running cluster whose node 1 is the test database's server."""
    base = Path(os.environ.get("GALERA_DIR", str(DEFAULT_DIR)))
    port = int(os.environ.get("GALERA_BASE_PORT", str(DEFAULT_BASE_PORT)))
    with django_db_blocker.unblock():
        size = _cluster_size()
        configured = connection.settings_dict.get("PORT")
    reason = None
    if size < 3:
        reason = f"the test database is not a 3-node Galera cluster (wsrep_cluster_size {size})"
    elif str(configured) != str(port):
        reason = f"DATABASE_URL's port {configured} is not node 1's ({port})"
    if reason is None:
        try:
            return GaleraCluster(base, port).attach()
        except RuntimeError as exc:
            reason = str(exc)
    message = f"Galera scenarios need the cluster `make test-galera` starts: {reason}"
    if REQUIRE_GALERA:
        pytest.fail(f"REQUIRE_GALERA=1: {message}")
    pytest.skip(message)


def point_at(node: Node, **options: Any) -> dict[str, Any]:
    """From now on this thread's own database connection goes to ``node``
    (other threads keep theirs); ``options``: OPTIONS for it (e.g. another
    init_command). Returns the settings it had."""
    db = connections["default"]
    db.close()
    original: dict[str, Any] = db.settings_dict
    settings_dict = {**original, "PORT": str(node.sql_port), "HOST": "127.0.0.1"}
    if options:
        settings_dict["OPTIONS"] = {**settings_dict.get("OPTIONS", {}), **options}
    db.settings_dict = settings_dict
    return original


@contextmanager
def on_node(node: Node, **options: Any) -> Iterator[None]:
    """``point_at`` for a block; the thread's connection settings come back after it."""
    db = connections["default"]
    original = point_at(node, **options)
    try:
        yield
    finally:
        db.close()
        db.settings_dict = original


@dataclass
class Outcome:
    """What the writers saw: acknowledged results, typed refusals, anything else."""

    acknowledged: list[Any] = field(default_factory=list)
    typed: dict[str, int] = field(default_factory=dict)
    untyped: list[BaseException] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def ack(self, value: Any) -> None:
        with self.lock:
            self.acknowledged.append(value)

    def refused(self, exc: BaseException) -> None:
        from sessiontree.core.errors import SessionTreeError

        with self.lock:
            if isinstance(exc, SessionTreeError):
                self.typed[exc.code] = self.typed.get(exc.code, 0) + 1
            else:
                import traceback

                traceback.print_exception(exc)  # what escaped untyped, and from where
                self.untyped.append(exc)


def run_on_nodes(cluster: GaleraCluster, count: int, work: Callable[[int, Node], None]) -> list[BaseException]:
    """Run ``work(i, node)`` in ``count`` threads started together, thread ``i``
    connected to node ``i % 3``; the exceptions that escaped ``work``."""
    errors: list[BaseException] = []
    barrier = threading.Barrier(count)

    def body(i: int) -> None:
        node = cluster.nodes[i % len(cluster.nodes)]
        try:
            with on_node(node):
                barrier.wait()
                work(i, node)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections["default"].close()

    threads = [threading.Thread(target=body, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(THREAD_TIMEOUT_SECONDS)
    assert not any(t.is_alive() for t in threads), "a writer hung"
    return errors


def run_in_processes(
    cluster: GaleraCluster, count: int, work: Callable[[int, Node, Any], Any], *, timeout: float = 300
) -> list[Any]:
    """Run ``work(i, node, barrier)`` in ``count`` forked processes (two
    application servers, not threads of one: no shared interpreter lock
    between them), process ``i`` connected to node ``i % 3``; ``barrier`` is
    shared by all. What each returned, in order (an exception's repr for one
    that raised)."""
    import multiprocessing
    import traceback

    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(count)
    results = context.Queue()
    connections.close_all()  # never share a connection with a child

    def child(i: int) -> None:
        code = 0
        try:
            point_at(cluster.nodes[i % len(cluster.nodes)])
            results.put((i, work(i, cluster.nodes[i % len(cluster.nodes)], barrier)))
        except BaseException as exc:
            results.put((i, f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"))
            code = 1
        finally:
            connections["default"].close()
            results.close()
            results.join_thread()  # what was put is sent before the process ends
            os._exit(code)  # never return into the parent's pytest

    processes = [context.Process(target=child, args=(i,)) for i in range(count)]
    for process in processes:
        process.start()
    found: dict[int, Any] = {}
    deadline = time.monotonic() + timeout
    while len(found) < count and time.monotonic() < deadline:
        try:
            i, value = results.get(timeout=1)
            found[i] = value
        except Exception:
            if not any(p.is_alive() for p in processes) and results.empty():
                break
    for process in processes:
        process.join(10)
        if process.is_alive():
            process.kill()
    assert len(found) == count, f"only {len(found)} of {count} processes reported"
    return [found[i] for i in range(count)]
