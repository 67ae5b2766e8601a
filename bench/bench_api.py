"""The REST API served by gunicorn on 127.0.0.1, ``mysql`` provider on MariaDB.

Prints (medians; wall time seen by the client unless said otherwise):
- CPU time per append through the whole HTTP stack (gunicorn's own CPU over
  a run of appends less a run without them), next to the service and the
  provider called in process (process CPU time);
- HTTP append latency from one client, against the same append called in
  process through the bare provider (the issue's target: HTTP <= 2 x provider
  + 1 ms), through the operations layer (``services.entries.append_message``
  with the provider given, as the API calls it: the provider plus the audit
  record; issue 23: HTTP adds at most 1.5 ms to it) and through the WSGI
  application in this process (the same request through Django and DRF
  without gunicorn, the socket and the HTTP client), which splits what HTTP
  adds to the service between the two; the kinds take turns in each place;
- the same request with the service answered at once, in process and over
  HTTP (gunicorn serving ``bench/api_stub_wsgi.py``): the stack's own work;
- appends per second from 1 and from 4 concurrent clients on different
  sessions (target: 4 clients >= 1.6 x one), and from 4 clients on ONE
  session with ``expected_leaf_id`` (a 409 is retried after reading the leaf;
  the retries are counted);
- ``context`` and ``tree`` (default window) of a 10,000-entry session with 50
  branches over HTTP, against the in-process reads (target: context <= 60 ms).

Creates its own database (``sessiontree_bench_api``), migrates it, serves it
with gunicorn (``--workers``, sync workers, DEBUG off, persistent database
connections: ``DB_CONN_MAX_AGE=60`` unless set) and drops it at the end
(``--keep`` keeps it). The server comes from ``DATABASE_URL`` (default
``mysql://root@127.0.0.1:3306/test``; only host, port and credentials are
used). Run from the repository root:

    .venv/bin/python bench/bench_api.py [--appends 300] [--rounds 3] [--workers 4]

The machine has 2 cores shared with the database server, gunicorn's workers
and the clients, so concurrent figures are bounded by CPU; run it on a quiet
machine and read the spread over ``--rounds``.
"""

from __future__ import annotations

import argparse
import http.client
import io
import json
import os
import resource
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_mysql_provider import branched_entries, message, server_url  # noqa: E402
from machine import describe, median_ms  # noqa: E402

HOST = "127.0.0.1"


def production_env(url: str) -> dict[str, str]:
    """What the server and this process run with: DEBUG off, the bench database."""
    return {
        "DATABASE_URL": url,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "DJANGO_ALLOWED_HOSTS": HOST,
        "DJANGO_SECURE_COOKIES": "0",
        "SESSIONTREE_DEFAULT_PROVIDER": "mysql",
        # Persistent database connections, as a served deployment runs them
        # (the default 0 opens a new MySQL connection for every request).
        "DB_CONN_MAX_AGE": os.environ.get("DB_CONN_MAX_AGE", "60"),
        "LOG_LEVEL": "ERROR",
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


class Client:
    """One HTTP/1.1 connection per client thread (gunicorn's sync workers close
    it after each answer; it is reopened transparently)."""

    def __init__(self, port: int, token: str) -> None:
        self.port = port
        self.headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
        self.connection = http.client.HTTPConnection(HOST, port, timeout=60)

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
        payload = json.dumps(body).encode() if body is not None else None
        for attempt in range(2):
            try:
                self.connection.request(method, path, payload, self.headers)
                response = self.connection.getresponse()
                data = response.read()
                if response.getheader("Connection", "").lower() == "close":
                    self.connection.close()
                return response.status, data
            except (ConnectionError, http.client.HTTPException):
                self.connection.close()
                self.connection = http.client.HTTPConnection(HOST, self.port, timeout=60)
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def json(self, method: str, path: str, body: Any = None, expect: int = 200) -> Any:
        status, data = self.request(method, path, body)
        if status != expect:
            raise RuntimeError(f"{method} {path}: {status} {data[:300]!r}")
        return json.loads(data)


class InProcess:
    """The same append request through the WSGI application gunicorn serves
    (``config.wsgi.application``), called in this process: Django, DRF and the
    service, without gunicorn, the socket and the HTTP client. The body is
    encoded and the answer decoded as the client does."""

    def __init__(self, token: str) -> None:
        from config.wsgi import application

        self.application = application
        self.token = token

    def append(self, session_id: str, payload: Any) -> Any:
        body = json.dumps({"message": payload}).encode()
        environ = {
            "REQUEST_METHOD": "POST",
            "PATH_INFO": f"/api/sessions/{session_id}/entries/",
            "QUERY_STRING": "",
            "SCRIPT_NAME": "",
            "SERVER_NAME": HOST,
            "SERVER_PORT": "80",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "HTTP_HOST": HOST,
            "HTTP_ACCEPT_ENCODING": "identity",
            "HTTP_AUTHORIZATION": f"Token {self.token}",
            "CONTENT_TYPE": "application/json",
            "CONTENT_LENGTH": str(len(body)),
            "wsgi.input": io.BytesIO(body),
            "wsgi.errors": sys.stderr,
            "wsgi.url_scheme": "http",
            "wsgi.multithread": False,
            "wsgi.multiprocess": True,
            "wsgi.run_once": False,
        }
        status: list[str] = []
        answer = b"".join(self.application(environ, lambda line, headers, exc_info=None: status.append(line)))
        if not status[0].startswith("201"):
            raise RuntimeError(f"in-process append: {status[0]} {answer[:300]!r}")
        return json.loads(answer)


def wait_until_serving(port: int, server: subprocess.Popen[bytes], seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.poll() is not None:
            sys.exit(f"gunicorn exited with {server.returncode}")
        try:
            with socket.create_connection((HOST, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    sys.exit("gunicorn did not start listening in time")


def append_rate(port: int, token: str, session_ids: list[str], appends: int) -> float:
    """Appends per second with one client thread per session (``appends`` each)."""
    barrier = threading.Barrier(len(session_ids) + 1)
    errors: list[BaseException] = []

    def client(session_id: str) -> None:
        api = Client(port, token)
        barrier.wait()
        try:
            for i in range(appends):
                api.json("POST", f"/api/sessions/{session_id}/entries/", {"message": message(i)}, expect=201)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=client, args=(sid,)) for sid in session_ids]
    for thread in threads:
        thread.start()
    barrier.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    if errors:
        raise errors[0]
    return len(session_ids) * appends / elapsed


def contended_rate(port: int, token: str, session_id: str, clients: int, appends: int) -> tuple[float, int]:
    """Appends per second of ``clients`` threads on ONE session, each append
    conditional on the leaf the client last saw (409 → read the leaf, retry)."""
    barrier = threading.Barrier(clients + 1)
    retries = [0] * clients
    errors: list[BaseException] = []

    def client(index: int) -> None:
        api = Client(port, token)
        leaf = api.json("GET", f"/api/sessions/{session_id}/")["leaf_entry_id"]
        barrier.wait()
        try:
            done = 0
            while done < appends:
                body = {"message": message(done), "expected_leaf_id": leaf}
                status, data = api.request("POST", f"/api/sessions/{session_id}/entries/", body)
                if status == 201:
                    leaf = json.loads(data)["id"]
                    done += 1
                elif status == 409:
                    retries[index] += 1
                    leaf = api.json("GET", f"/api/sessions/{session_id}/")["leaf_entry_id"]
                else:
                    raise RuntimeError(f"append: {status} {data[:300]!r}")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    barrier.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    if errors:
        raise errors[0]
    return clients * appends / elapsed, sum(retries)


@contextmanager
def serve(
    args: argparse.Namespace, env: dict[str, str], *, workers: int, app: str = "config.wsgi:application"
) -> Iterator[int]:
    """gunicorn serving the project (``app``) on a free port of 127.0.0.1;
    stopped (and its processes reaped, so their CPU is counted) on exit."""
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "gunicorn",
        app,
        "--bind",
        f"{HOST}:{port}",
        "--workers",
        str(workers),
        "--worker-class",
        args.worker_class,
        "--threads",
        str(args.threads),
        "--log-level",
        "warning",
    ]
    server = subprocess.Popen(command, cwd=ROOT, env={**os.environ, **env}, start_new_session=True)
    try:
        wait_until_serving(port, server)
        yield port
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def http_stack_alone(args: argparse.Namespace, env: dict[str, str], token: str, session_id: str) -> list[float]:
    """Append latency (ms) over HTTP from one client, with every worker's
    service answering at once (``bench/api_stub_wsgi.py``): what the HTTP
    stack adds to a service call, measured by itself, without the write
    (whose commit waits on the disk) being subtracted from another noisy
    figure."""
    with serve(args, env, workers=args.workers, app="bench.api_stub_wsgi:application") as port:
        api = Client(port, token)
        path = f"/api/sessions/{session_id}/entries/"
        for i in range(20 * args.workers):  # every worker: its imports and its one real append
            api.json("POST", path, {"message": message(i)}, expect=201)
        samples = []
        for i in range(args.appends):
            start = time.perf_counter()
            api.json("POST", path, {"message": message(i)}, expect=201)
            samples.append((time.perf_counter() - start) * 1000)
        return samples


def run(args: argparse.Namespace, env: dict[str, str]) -> None:
    from django.contrib.auth.models import User
    from rest_framework.authtoken.models import Token

    from sessiontree import services
    from sessiontree.providers.mysql_provider import MySQLSessionTreeProvider
    from sessiontree.selectors.nested_tree import nested_tree

    user = User.objects.create_user("bench")
    token = Token.objects.create(user=user).key
    provider = MySQLSessionTreeProvider()

    def new_session(**fields: Any) -> str:
        session = services.sessions.create_session(actor=user, channel="api", kind="mysql", user_id="bench", **fields)
        return str(session["session_id"])

    # 0. CPU per append, which other work on the machine inflates less than wall time:
    # gunicorn's own CPU (read from the finished process tree) over N HTTP
    # appends, less a server that only started and answered the warm-up. The
    # warm-up appends too: the first append of a worker imports and compiles
    # what only writes use (the serializers, the entry schema check), a few
    # hundred milliseconds that would otherwise be spread over the N appends.
    def server_cpu(appends: int) -> float:
        sid, warm = new_session(), new_session()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        with serve(args, env, workers=1) as port:
            api = Client(port, token)
            for i in range(20):
                api.json("GET", "/api/sessions/")
                api.json("POST", f"/api/sessions/{warm}/entries/", {"message": message(i)}, expect=201)
            for i in range(appends):
                api.json("POST", f"/api/sessions/{sid}/entries/", {"message": message(i)}, expect=201)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)

    cpu_http = statistics.median(
        (server_cpu(args.appends) - server_cpu(0)) * 1000 / args.appends for _ in range(args.cpu_rounds)
    )
    cpu_sid, cpu_provider_sid = new_session(), new_session()
    started = time.process_time()
    for i in range(args.appends):
        services.entries.append_message(
            session_id=cpu_sid, provider=provider, message=message(i), actor=user, channel="api"
        )
    cpu_service = (time.process_time() - started) * 1000 / args.appends
    started = time.process_time()
    for i in range(args.appends):
        provider.append_message(cpu_provider_sid, message(i))
    cpu_provider = (time.process_time() - started) * 1000 / args.appends
    print(
        f"CPU per append (other work inflates it less than wall time; MariaDB's own CPU not counted): "
        f"HTTP stack {cpu_http:.2f} ms | service {cpu_service:.2f} ms | provider {cpu_provider:.2f} ms; "
        f"HTTP adds {cpu_http - cpu_service:.2f} ms of CPU to the service call"
    )

    with serve(args, env, workers=args.workers) as port:
        api = Client(port, token)
        api.json("GET", "/api/sessions/")  # every worker imports lazily: warm up
        print(
            f"gunicorn: {args.workers} {args.worker_class} workers x {args.threads} thread(s) on {HOST}:{port}, "
            "DEBUG off, mysql provider"
        )

        # 1. latency of one append: HTTP vs in process, interleaved so noise hits all alike
        http_sid, wsgi_sid, service_sid, provider_sid = new_session(), new_session(), new_session(), new_session()
        for sid in (http_sid, wsgi_sid, service_sid, provider_sid):  # warm: a few entries each
            for i in range(5):
                services.entries.append_message(session_id=sid, message=message(i), actor=user, channel="api")
        in_process = InProcess(token)
        for i in range(20):  # this process's first request imports what the API uses
            in_process.append(wsgi_sid, message(i))
        http_ms, wsgi_ms, service_ms, provider_ms = [], [], [], []
        calls: list[tuple[list[float], Any]] = [
            (http_ms, lambda p: api.json("POST", f"/api/sessions/{http_sid}/entries/", {"message": p}, expect=201)),
            (wsgi_ms, lambda p: in_process.append(wsgi_sid, p)),
            (
                service_ms,
                lambda p: services.entries.append_message(
                    session_id=service_sid, provider=provider, message=p, actor=user, channel="api"
                ),
            ),
            (provider_ms, lambda p: provider.append_message(provider_sid, p)),
        ]
        for i in range(args.appends):
            payload = message(i)
            # Each kind takes each place in turn: what runs right after an HTTP
            # request shares the cores with the worker finishing it and with
            # MariaDB's work after a commit.
            for samples, call in calls[i % 4 :] + calls[: i % 4]:
                start = time.perf_counter()
                call(payload)
                samples.append((time.perf_counter() - start) * 1000)
        http_m, wsgi_m, service_m, provider_m = (
            statistics.median(x) for x in (http_ms, wsgi_ms, service_ms, provider_ms)
        )
        print(
            f"append, median of {args.appends}: HTTP {http_m:.2f} ms | WSGI in process {wsgi_m:.2f} ms | "
            f"service {service_m:.2f} ms | provider {provider_m:.2f} ms "
            f"(p90 HTTP {statistics.quantiles(http_ms, n=10)[-1]:.2f} ms)"
        )
        added = http_m - service_m
        print(
            f"  HTTP - service = {added:.2f} ms (issue 23: <= 1.5 ms: {'met' if added <= 1.5 else 'NOT met'}) = "
            f"Django, DRF and the token/session query (WSGI in process - service) {wsgi_m - service_m:.2f} ms "
            f"+ gunicorn, the socket and the HTTP client (HTTP - WSGI in process) {http_m - wsgi_m:.2f} ms"
        )
        # The stack alone: the same in-process request with the service call
        # answered at once (its entry given back), so that neither MariaDB nor
        # the append weigh in: Django, DRF, the token/session query and the
        # answer, in wall and CPU time of this process.
        answered = services.entries.append_message(session_id=wsgi_sid, message=message(0), actor=user, channel="api")
        real_append = services.entries.append_message
        services.entries.append_message = lambda **_: answered
        try:
            stack_ms, cpu_started = [], time.process_time()
            for i in range(args.appends):
                start = time.perf_counter()
                in_process.append(wsgi_sid, message(i))
                stack_ms.append((time.perf_counter() - start) * 1000)
            stack_cpu = (time.process_time() - cpu_started) * 1000 / args.appends
        finally:
            services.entries.append_message = real_append
        print(
            f"  the API stack alone (in process, the service answered at once): {statistics.median(stack_ms):.2f} ms, "
            f"CPU {stack_cpu:.2f} ms"
        )
        stub_http = http_stack_alone(args, env, token, wsgi_sid)
        print(
            f"  the HTTP stack alone (gunicorn, {args.workers} {args.worker_class} workers, the service answered at "
            f"once: bench/api_stub_wsgi.py): {statistics.median(stub_http):.2f} ms "
            f"(p90 {statistics.quantiles(stub_http, n=10)[-1]:.2f} ms): the stack's own work, its code and data hot "
            f"in the caches; HTTP - service above less this is what it costs more beside a real write"
        )
        for name, direct in (("provider", provider_m), ("service", service_m)):
            budget = 2 * direct + 1
            print(
                f"  HTTP / {name} = {http_m / direct:.2f}x, HTTP - {name} = {http_m - direct:.2f} ms; "
                f"target HTTP <= 2 x {name} + 1 ms = {budget:.2f} ms: {'met' if http_m <= budget else 'NOT met'}"
            )

        # 2. throughput: 1 and 4 clients on different sessions, 4 on one session
        ones, fours, contended, retry_counts = [], [], [], []
        for _ in range(args.rounds):
            ones.append(append_rate(port, token, [new_session()], args.appends))
            fours.append(append_rate(port, token, [new_session() for _ in range(4)], args.appends))
            rate, retries = contended_rate(port, token, new_session(), 4, args.appends // 2)
            contended.append(rate)
            retry_counts.append(retries)
        one, four, shared = (statistics.median(x) for x in (ones, fours, contended))
        spread = lambda xs: f"[{', '.join(f'{x:.0f}' for x in xs)}]"  # noqa: E731
        print(f"appends/s, median of {args.rounds} rounds ({args.appends} appends a client):")
        print(f"  1 client:                      {one:.0f}/s {spread(ones)}")
        paired = statistics.median(f / o for f, o in zip(fours, ones, strict=True))
        print(
            f"  4 clients, different sessions: {four:.0f}/s {spread(fours)} = {four / one:.2f}x one client; "
            f"median of the per-round ratios {paired:.2f}x (target >= 1.6x)"
        )
        print(
            f"  4 clients, one session (expected_leaf_id, 409 retried): {shared:.0f}/s {spread(contended)} = "
            f"{shared / one:.2f}x one client; retries per round {retry_counts}"
        )

        # 3. reads of a 10,000-entry session with 50 branches
        entries, leaf = branched_entries(args.entries, args.branches)
        big = new_session(entries=entries)
        services.tree.switch_leaf(session_id=big, entry_id=leaf, actor=user, channel="api")
        status, body = api.request("GET", f"/api/sessions/{big}/context/")
        assert status == 200, body[:300]
        messages = len(json.loads(body)["messages"])
        http_context = median_ms(lambda: api.request("GET", f"/api/sessions/{big}/context/"), args.repeat)
        direct_context = median_ms(lambda: provider.build_context(big), args.repeat)
        http_tree = median_ms(lambda: api.request("GET", f"/api/sessions/{big}/tree/"), args.repeat)
        direct_tree = median_ms(lambda: nested_tree(provider, big), args.repeat)
        deep_root = entries[len(entries) // 4]["id"]
        http_window = median_ms(
            lambda: api.request("GET", f"/api/sessions/{big}/tree/?root={deep_root}&depth=100"), args.repeat
        )
        print(
            f"session of {len(entries)} entries, {args.branches} branches, context of {messages} messages "
            f"({len(body) / 1e6:.1f} MB of JSON), median of {args.repeat}:"
        )
        print(
            f"  context: HTTP {http_context:.1f} ms (target <= 60 ms: {'met' if http_context <= 60 else 'NOT met'}) | "
            f"in process {direct_context:.1f} ms | ratio {http_context / direct_context:.2f}"
        )
        print(
            f"  tree (default window, depth 50): HTTP {http_tree:.1f} ms | in process {direct_tree:.1f} ms | "
            f"ratio {http_tree / direct_tree:.2f}; a window of depth 100 deeper down: HTTP {http_window:.1f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--appends", type=int, default=300, help="appends per client (latency: timed appends)")
    parser.add_argument("--rounds", type=int, default=3, help="throughput rounds (medians and spread)")
    parser.add_argument("--cpu-rounds", type=int, default=3, help="rounds of the CPU-per-append measure")
    parser.add_argument("--workers", type=int, default=4, help="gunicorn workers")
    parser.add_argument("--worker-class", default="sync", choices=["sync", "gthread"], help="gunicorn worker class")
    parser.add_argument("--threads", type=int, default=1, help="threads per gthread worker")
    parser.add_argument("--entries", type=int, default=10_000, help="entries of the branched session")
    parser.add_argument("--branches", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=30, help="runs of each read")
    parser.add_argument("--database", default="sessiontree_bench_api")
    parser.add_argument("--keep", action="store_true", help="do not drop the database at the end")
    args = parser.parse_args()

    import MySQLdb

    url, connect = server_url(args.database)
    print(describe(connect))
    env = production_env(url)
    os.environ.update(env)
    admin = MySQLdb.connect(**connect)
    admin.cursor().execute(f"DROP DATABASE IF EXISTS `{args.database}`")
    admin.cursor().execute(f"CREATE DATABASE `{args.database}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
    try:
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        run(args, env)
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep:
            admin.cursor().execute(f"DROP DATABASE IF EXISTS `{args.database}`")
        admin.close()


if __name__ == "__main__":
    main()
