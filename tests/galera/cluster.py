"""A 3-node MariaDB Galera cluster on loopback, for the Galera test leg.

Each node is a ``mariadbd`` of its own: its own datadir, socket, SQL port
and Galera ports under one base folder, never the system server's (3306)
files or ports. Node 1 bootstraps the cluster (``--wsrep-new-cluster``); the
others join it by state transfer (rsync SST), and a node stopped and started
again catches up by incremental transfer (IST) from the gcache.

    python -m tests.galera.cluster start [--dir DIR] [--base-port 14306]
    python -m tests.galera.cluster stop [--dir DIR]

Needs Debian's ``galera-4`` (``libgalera_smm.so``) and ``rsync``; ``.ci/run``
installs them. ``GaleraCluster`` is what the tests drive (kill a node, start
it again, wait until it is synced).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

PROVIDER_LIBRARIES = ("/usr/lib/galera/libgalera_smm.so", "/usr/lib/libgalera_smm.so")
DEFAULT_DIR = Path(os.environ.get("GALERA_DIR", "/tmp/sessiontree-galera"))
DEFAULT_BASE_PORT = int(os.environ.get("GALERA_BASE_PORT", "14306"))
NODES = 3
START_TIMEOUT = 120
RECOVER_TIMEOUT = 180
RECOVER_EXIT_GRACE = 5  # seconds --wsrep-recover gets to exit after telling the position
PORT_TIMEOUT = 60


def galera_library() -> str | None:
    return next((path for path in PROVIDER_LIBRARIES if Path(path).exists()), None)


def missing_reason() -> str | None:
    """Why a cluster cannot start here, or ``None``."""
    if galera_library() is None:
        return "galera-4 is not installed (libgalera_smm.so not found)"
    for tool in ("mariadbd", "mariadb-install-db", "rsync", "wsrep_sst_rsync"):
        if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists():
            return f"{tool} not found"
    return None


def server_user() -> str:
    """Who the servers run as: ``mysql`` when started by root (an rsync SST
    receiver started by root drops to ``nobody`` and could not write the
    datadir), else the user starting them."""
    if os.geteuid() == 0:
        return "mysql"
    import pwd

    return pwd.getpwuid(os.geteuid()).pw_name


def _own(path: Path) -> None:
    if os.geteuid() != 0:
        return
    import pwd

    entry = pwd.getpwnam("mysql")
    for folder, _dirs, files in os.walk(path):
        os.chown(folder, entry.pw_uid, entry.pw_gid)
        for name in files:
            os.chown(os.path.join(folder, name), entry.pw_uid, entry.pw_gid)


def _free(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(5)
        try:
            return probe.connect_ex(("127.0.0.1", port)) != 0
        except TimeoutError:  # nobody answers, yet something holds the port's queue
            return False


def _wait_free(node: Node, timeout: float = PORT_TIMEOUT) -> None:
    """Wait until nothing answers on the node's ports. A node killed a moment
    ago may leave a helper (the SST script's rsync daemon) that goes away by
    itself; a port still taken after ``timeout`` is another server's."""
    ports = (node.sql_port, node.galera_port, node.ist_port, node.sst_port)
    deadline = time.monotonic() + timeout
    while True:
        taken = [port for port in ports if not _free(port)]
        if not taken:
            return
        if time.monotonic() >= deadline:
            raise RuntimeError(f"Port(s) {taken} of Galera node {node.number} still taken after {timeout:.0f} s")
        time.sleep(0.5)


@dataclass
class Node:
    number: int
    base: Path
    sql_port: int
    galera_port: int
    ist_port: int
    sst_port: int
    process: subprocess.Popen[bytes] | None = None

    @property
    def datadir(self) -> Path:
        return self.base / f"node{self.number}" / "data"

    @property
    def socket(self) -> Path:
        return self.base / f"node{self.number}" / "mariadb.sock"

    @property
    def log(self) -> Path:
        return self.base / f"node{self.number}" / "error.log"

    @property
    def pid_file(self) -> Path:
        return self.base / f"node{self.number}" / "mariadb.pid"

    @property
    def url(self) -> str:
        return f"mysql://root@127.0.0.1:{self.sql_port}/test"


class GaleraCluster:
    def __init__(self, base: Path = DEFAULT_DIR, base_port: int = DEFAULT_BASE_PORT, nodes: int = NODES) -> None:
        self.base = base
        self.nodes = [
            Node(
                number=n,
                base=base,
                sql_port=base_port + n - 1,
                galera_port=base_port + 1000 + (n - 1) * 10,
                ist_port=base_port + 1001 + (n - 1) * 10,
                sst_port=base_port + 1002 + (n - 1) * 10,
            )
            for n in range(1, nodes + 1)
        ]

    # --- lifecycle ------------------------------------------------------------------------------------

    def _address(self) -> str:
        return "gcomm://" + ",".join(f"127.0.0.1:{node.galera_port}" for node in self.nodes)

    def _command(
        self, node: Node, *, bootstrap: bool, recover: bool = False, start_position: str | None = None
    ) -> list[str]:
        library = galera_library()
        assert library is not None
        folder = node.base / f"node{node.number}"
        if recover:
            # Read the last committed position from the datadir and exit: no
            # network at all (never a default port), files of its own.
            where = [
                f"--socket={folder / 'recover.sock'}",
                f"--pid-file={folder / 'recover.pid'}",
                f"--log-error={folder / 'recover.log'}",
                "--skip-networking",
                "--wsrep-recover",
            ]
        else:
            where = [
                f"--socket={node.socket}",
                f"--pid-file={node.pid_file}",
                f"--log-error={node.log}",
                f"--port={node.sql_port}",
                "--bind-address=127.0.0.1",
            ]
        command = [
            "mariadbd",
            "--no-defaults",
            f"--datadir={node.datadir}",
            *where,
            "--skip-name-resolve",
            f"--user={server_user()}",
            "--binlog-format=ROW",
            "--default-storage-engine=InnoDB",
            "--innodb-autoinc-lock-mode=2",
            "--innodb-buffer-pool-size=64M",
            "--innodb-log-file-size=48M",
            "--innodb-flush-log-at-trx-commit=2",
            "--character-set-server=utf8mb4",
            "--collation-server=utf8mb4_bin",
            "--max-connections=200",
            "--wsrep-on=ON",
            f"--wsrep-provider={library}",
            "--wsrep-cluster-name=sessiontree-test",
            f"--wsrep-cluster-address={self._address()}",
            f"--wsrep-node-name=node{node.number}",
            f"--wsrep-node-address=127.0.0.1:{node.galera_port}",
            f"--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:{node.galera_port};"
            f"ist.recv_addr=127.0.0.1:{node.ist_port};gcache.size=64M;evs.suspect_timeout=PT3S;"
            "evs.inactive_timeout=PT6S;pc.wait_prim_timeout=PT10S",
            f"--wsrep-sst-receive-address=127.0.0.1:{node.sst_port}",
            "--wsrep-sst-method=rsync",
            "--wsrep-slave-threads=2",
        ]
        if bootstrap:
            command.append("--wsrep-new-cluster")
        if start_position is not None:
            command.append(f"--wsrep-start-position={start_position}")
        return command

    def recovered_position(self, node: Node) -> str | None:
        """``uuid:seqno`` the node's datadir last committed (``mariadbd
        --wsrep-recover``, what the init scripts run after a crash); ``None``
        when it cannot tell. Started at that position, a node killed with -9
        asks its donor for what it missed (IST) instead of a whole copy (SST)."""
        log = node.base / f"node{node.number}" / "recover.log"
        log.unlink(missing_ok=True)
        # Our own child in a session of its own, so that it is the one stopped.
        process = subprocess.Popen(
            self._command(node, bootstrap=False, recover=True),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + RECOVER_TIMEOUT
        told_at: float | None = None
        try:
            while process.poll() is None:
                now = time.monotonic()
                if told_at is None and _RECOVERY_TOLD.search(_text(log)):
                    told_at = now
                if told_at is not None and now - told_at > RECOVER_EXIT_GRACE:
                    # It told the position and hangs on its way out (seen with
                    # 10.11 after a kill -9: 3 runs in 8 here): stopped below.
                    break
                if now > deadline:
                    raise RuntimeError(
                        f"Galera node {node.number}: --wsrep-recover told no position within "
                        f"{RECOVER_TIMEOUT} s: {tail(log)}"
                    )
                time.sleep(0.1)
        finally:
            if process.poll() is None:  # stopped like a crash: the real start recovers InnoDB again
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=30)
        found = re.search(r"Recovered position: ([0-9a-f-]{36}:-?[0-9]+)", _text(log))
        return found.group(1) if found and not found.group(1).endswith(":-1") else None

    def _install(self, node: Node) -> None:
        if (node.datadir / "mysql").exists():
            return
        node.datadir.mkdir(parents=True, exist_ok=True)
        _own(self.base)
        user = [f"--user={server_user()}"]
        result = subprocess.run(
            [
                "mariadb-install-db",
                "--no-defaults",
                f"--datadir={node.datadir}",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                *user,
            ],
            capture_output=True,
            text=True,
            timeout=180,
        )
        if result.returncode != 0:
            raise RuntimeError(f"mariadb-install-db for node {node.number} failed: {result.stderr[-2000:]}")

    def start_node(self, node: Node, *, bootstrap: bool = False, start_position: str | None = None) -> None:
        node.log.parent.mkdir(parents=True, exist_ok=True)
        if bootstrap:
            self._install(node)
        else:
            node.datadir.mkdir(parents=True, exist_ok=True)
        _own(node.datadir.parent)
        _wait_free(node)
        node.process = subprocess.Popen(
            self._command(node, bootstrap=bootstrap, start_position=start_position),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.wait_synced(node)

    def start(self) -> None:
        if self.base.exists():
            shutil.rmtree(self.base)
        self.base.mkdir(parents=True)
        first, *others = self.nodes
        try:
            self.start_node(first, bootstrap=True)
            self.sql(first, "CREATE DATABASE IF NOT EXISTS test")
            self.sql(first, "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1'")
            self.sql(first, "GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION")
            for node in others:
                self.start_node(node)
        except BaseException:
            self.stop()
            raise

    def kill(self, node: Node) -> None:
        """kill -9 of the node's server: the cluster notices by itself. A
        server this process did not start (``attach``) is found by the pid
        file in the node's own folder, so only this cluster's servers are hit."""
        if node.process is not None and node.process.poll() is None:
            os.killpg(node.process.pid, signal.SIGKILL)
            node.process.wait(timeout=30)
        elif node.process is None:
            pid = _pid_of(node)
            if pid is not None:
                os.kill(pid, signal.SIGKILL)
                _wait_gone(pid)
        node.process = None
        node.pid_file.unlink(missing_ok=True)

    def attach(self) -> GaleraCluster:
        """Drive a cluster another process started in ``base`` (``python -m
        tests.galera.cluster start``): its servers are known by their pid files."""
        for node in self.nodes:
            if _pid_of(node) is None:
                raise RuntimeError(f"Galera node {node.number} is not running under {self.base}")
        return self

    def restart(self, node: Node) -> None:
        """Start a killed node again from its recovered position: it rejoins
        by IST when a donor's gcache still holds what it missed."""
        self.start_node(node, start_position=self.recovered_position(node))

    def stop(self) -> None:
        for node in reversed(self.nodes):
            if node.process is not None and node.process.poll() is None:
                node.process.terminate()
                try:
                    node.process.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    os.killpg(node.process.pid, signal.SIGKILL)
                    node.process.wait(timeout=30)
            node.process = None
        stop_by_pid_files(self.base)

    # --- queries ---------------------------------------------------------------------------------------

    def sql(self, node: Node, statement: str) -> str:
        result = subprocess.run(
            ["mariadb", "--no-defaults", f"--socket={node.socket}", "-uroot", "-N", "-B", "-e", statement],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if result.returncode != 0:
            raise RuntimeError(f"node {node.number}: {statement}: {result.stderr.strip()}")
        return result.stdout.strip()

    def status(self, node: Node, name: str) -> str | None:
        try:
            out = self.sql(node, f"SHOW STATUS LIKE '{name}'")
        except RuntimeError:
            return None
        parts = out.split("\t")
        return parts[1] if len(parts) == 2 else None

    def wait_synced(self, node: Node, timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if node.process is None and _pid_of(node) is None:
                raise RuntimeError(f"Galera node {node.number} is not running (never started, or killed)")
            if node.process is not None and node.process.poll() is not None:
                raise RuntimeError(f"Galera node {node.number} exited: {tail(node.log)}")
            if self.status(node, "wsrep_local_state_comment") == "Synced":
                return
            time.sleep(0.3)
        raise RuntimeError(f"Galera node {node.number} did not sync within {timeout:.0f} s: {tail(node.log)}")

    def cluster_size(self, node: Node) -> int:
        value = self.status(node, "wsrep_cluster_size")
        return int(value) if value and value.isdigit() else 0


def _pid_of(node: Node) -> int | None:
    """The pid in the node's pid file, if that process is alive."""
    try:
        pid = int(node.pid_file.read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


def _wait_gone(pid: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):  # our own child (restarted by this process): reap it
            os.waitpid(pid, os.WNOHANG)
        try:
            os.kill(pid, 0)
        except OSError:
            return
        time.sleep(0.05)


_RECOVERY_TOLD = re.compile(r"WSREP: (Recovered position: |Failed to recover position)")


def _text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def stop_by_pid_files(base: Path) -> None:
    """Stop servers a previous run of this module left behind (by their pid files only)."""
    for pid_file in sorted(base.glob("node*/mariadb.pid")):
        try:
            pid = int(pid_file.read_text().strip())
            os.kill(pid, signal.SIGTERM)
        except (OSError, ValueError):
            continue
        for _ in range(100):
            try:
                os.kill(pid, 0)
            except OSError:
                break
            time.sleep(0.1)


@contextmanager
def running_cluster(base: Path = DEFAULT_DIR, base_port: int = DEFAULT_BASE_PORT) -> Iterator[GaleraCluster]:
    cluster = GaleraCluster(base, base_port)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=("start", "stop"))
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--base-port", type=int, default=DEFAULT_BASE_PORT)
    args = parser.parse_args(argv)
    if args.action == "stop":
        stop_by_pid_files(args.dir)
        return 0
    reason = missing_reason()
    if reason is not None:
        print(f"galera: cannot start: {reason}", file=sys.stderr)
        return 1
    cluster = GaleraCluster(args.dir, args.base_port)
    cluster.start()
    for node in cluster.nodes:
        print(f"node{node.number}: {node.url} (cluster size {cluster.cluster_size(node)})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
