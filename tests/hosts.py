"""Hosts made on this machine, for tests of one run on several machines (issue 42): N
network namespaces joined by a Linux bridge, each a host with its own address, its own
loopback and its own data directory, and the machine's side of the bridge as their only
way out.

    with network(2, tmp_path) as net:         # 10.77.X.1 the bridge, .11 and .12 the hosts
        net.hosts[0].popen([...])              # a process inside host 0 (`ip netns exec`)
        url = net.over_bridge(database_url)    # the machine's PostgreSQL, as a host sees it

The machine's PostgreSQL and Redis listen on 127.0.0.1 only, which inside a host is the
host's own loopback: `over_bridge` starts a TCP forwarder (tests/forward.py) listening on the
bridge's address and answers the URL that reaches the service through it, so a host talks
to them over the bridge only, as another machine would over its network. A stack's API is
bound to the bridge's address (`running_stack(..., host=net.gateway)`).

Every change to this machine's own links and addresses holds tests/netlock.py's lock, which
the browser tests' pages hold shared: Chromium aborts its requests on such a change.

Everything is torn down at the end, however the block ends: every process left in a host
(SIGTERM, then SIGKILL), the namespaces, the veths, the bridge and the forwarders. Each
network holds a lock on its subnet (10.77.X.0/24) for its life, so concurrent tests never
share one, and removes what a killed test left under its names before it builds. Needs
root and iproute2 (`ip`); a failure to build raises with `ip`'s own message, never skips.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from tests.netlock import changing_network
from tests.stack import REDIS_URL, ROOT, Stack, pg_database, running_stack

PREFIX = "10.77"
LOCKS = Path("/tmp")
CLONE_NEWNET = 0x40000000  # <sched.h>; os.CLONE_NEWNET from Python 3.12
T = TypeVar("T")


class HostError(RuntimeError):
    """Building or tearing down the hosts failed: the message has `ip`'s own words."""


def ip(*args: str, check: bool = True) -> str:
    """`ip ARGS`; raises HostError with its stderr when it fails and `check`."""
    try:
        done = subprocess.run(["ip", *args], capture_output=True, text=True)
    except FileNotFoundError as e:
        raise HostError("`ip` (iproute2) is not installed: the hosts cannot be built") from e
    if check and done.returncode != 0:
        raise HostError(f"ip {' '.join(args)}: {done.stderr.strip() or done.returncode}")
    return done.stdout


@dataclass
class Host:
    """One host: a network namespace with one address on the bridge."""

    name: str
    """The namespace's name (`ip netns exec NAME ...`)."""
    address: str
    data_dir: Path

    @property
    def prefix(self) -> list[str]:
        """What a command runs under to run inside this host."""
        return ["ip", "netns", "exec", self.name]

    def run(self, argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self.prefix, *argv], capture_output=True, text=True, **kwargs)

    def popen(self, argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        """`ip netns exec` execs the command: the Popen's pid is the command's own."""
        return subprocess.Popen([*self.prefix, *argv], **kwargs)

    def namespace(self) -> int:
        """The host's network namespace (its inode, as /proc/PID/ns/net shows it)."""
        return os.stat(f"/run/netns/{self.name}").st_ino

    def wait_inside(self, proc: subprocess.Popen[bytes], timeout: float = 10) -> None:
        """Until `proc` (started by `popen`) has entered the host: `ip netns exec` joins the
        namespace, then execs the command."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                joined = os.stat(f"/proc/{proc.pid}/ns/net").st_ino == self.namespace()
                started = not (Path(f"/proc/{proc.pid}/exe").resolve().name == "ip")
            except FileNotFoundError:
                joined = started = False
            if joined and started:
                return
            if proc.poll() is not None:
                raise HostError(f"{proc.args!r} exited {proc.returncode} entering {self.name}")
            time.sleep(0.02)
        raise HostError(f"{proc.args!r} has not entered {self.name} in {timeout}s")

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` inside this host's network, in this process: on a thread of its own
        that joins the host's network namespace (setns(2); a network namespace is each
        thread's own) and ends with the call, so no process is started for it."""

        def inside() -> T:
            fd = os.open(f"/run/netns/{self.name}", os.O_RDONLY)
            try:
                if ctypes.CDLL(None, use_errno=True).setns(fd, CLONE_NEWNET) != 0:
                    raise HostError(f"setns into {self.name}: {os.strerror(ctypes.get_errno())}")
            finally:
                os.close(fd)
            return fn(*args)

        with ThreadPoolExecutor(1, thread_name_prefix=f"in-{self.name}") as thread:
            return thread.submit(inside).result()  # its exception raised here

    def pids(self) -> list[int]:
        """Every process inside this host, its children's children included."""
        return [int(p) for p in ip("netns", "pids", self.name, check=False).split()]

    def leftovers(self, timeout: float = 15) -> list[str]:
        """The processes still in this host after up to `timeout` s (a worker's fork server
        and resource tracker exit just after it), as their command lines."""
        deadline = time.monotonic() + timeout
        while (left := self.pids()) and time.monotonic() < deadline:
            time.sleep(0.2)
        return [f"{pid}: {_cmdline(pid)}" for pid in left]

    def connect_error(self, address: str, port: int, timeout: float = 3) -> str | None:
        """None when a TCP connection from inside this host to address:port opens; else the
        error it got (refused, unreachable, timed out)."""
        code = (
            "import socket, sys\n"
            "try:\n"
            f"    socket.create_connection(({address!r}, {port}), timeout={timeout}).close()\n"
            "except OSError as e:\n"
            "    sys.exit(repr(e))\n"
        )
        done = self.run([sys.executable, "-c", code], timeout=timeout + 30)
        return None if done.returncode == 0 else done.stderr.strip()


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]
    except OSError:
        return "(gone)"


@dataclass
class Network:
    """The bridge, its hosts, and the forwarders that bring loopback services onto it."""

    index: int
    """The subnet's third number: 10.77.<index>.0/24."""
    base_dir: Path
    hosts: list[Host] = field(default_factory=list)
    forwarded: dict[str, int] = field(default_factory=dict)
    """`host:port` on the machine's loopback -> the bridge port that reaches it."""
    forwarders: list[subprocess.Popen[str]] = field(default_factory=list)

    @property
    def gateway(self) -> str:
        """The machine's address on the bridge: what the hosts reach it by."""
        return f"{PREFIX}.{self.index}.1"

    @property
    def bridge(self) -> str:
        return f"grpo{self.index}br"

    def over_bridge(self, url: str) -> str:
        """`url` (a service on this machine's 127.0.0.1) as a host reaches it: through a
        forwarder on the bridge's address. One forwarder per service, started once."""
        parts = urlsplit(url)
        if parts.hostname not in ("127.0.0.1", "localhost") or parts.port is None:
            raise ValueError(f"not a loopback service with a port: {url!r}")
        target = f"127.0.0.1:{parts.port}"
        if target not in self.forwarded:
            self.forwarded[target] = self._forward(target)
        user = f"{parts.username}@" if parts.username else ""
        netloc = f"{user}{self.gateway}:{self.forwarded[target]}"
        return urlunsplit(parts._replace(netloc=netloc))

    def _forward(self, target: str) -> int:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.forward", self.gateway, target],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.forwarders.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.strip().isdigit():
            raise HostError(f"the forwarder to {target} did not start (exit {proc.poll()})")
        return int(line)

    def build(self, count: int) -> None:
        ip("link", "add", self.bridge, "type", "bridge")
        ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
        ip("link", "set", self.bridge, "up")
        for i in range(1, count + 1):
            host = Host(
                name=f"grpo{self.index}n{i}",
                address=f"{PREFIX}.{self.index}.{10 + i}",
                data_dir=self.base_dir / f"host{i}",
            )
            host.data_dir.mkdir(parents=True, exist_ok=True)
            self.hosts.append(host)
            outside, inside = f"grpo{self.index}v{i}", f"grpo{self.index}p{i}"
            ip("netns", "add", host.name)
            ip("link", "add", outside, "type", "veth", "peer", "name", inside)
            ip("link", "set", inside, "netns", host.name)
            ip("link", "set", outside, "master", self.bridge, "up")
            ip("-n", host.name, "addr", "add", f"{host.address}/24", "dev", inside)
            ip("-n", host.name, "link", "set", inside, "up")
            ip("-n", host.name, "link", "set", "lo", "up")

    def link_of(self, host: Host) -> str:
        """The bridge side of `host`'s veth: set it down and the host is cut off."""
        return f"grpo{self.index}v{self.hosts.index(host) + 1}"

    def teardown(self) -> list[str]:
        """Stops every process in the hosts, removes the namespaces, the veths and the
        bridge, and stops the forwarders; each step runs whatever failed before it. Returns
        what could not be removed."""
        problems = []
        for host in self.hosts:
            problems += _kill_all(host)
        for proc in self.forwarders:
            proc.terminate()
            proc.wait(timeout=10)
            assert proc.stdout is not None
            proc.stdout.close()
        with changing_network():
            problems += remove_leftovers(self.index)
        return problems


def _kill_all(host: Host, grace: float = 10) -> list[str]:
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        pids = host.pids()
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while pids and time.monotonic() < deadline:
            time.sleep(0.1)
            pids = host.pids()
        if not pids:
            return []
    return [f"{host.name}: processes {pids} survive SIGKILL"]


def remove_leftovers(index: int) -> list[str]:
    """Removes the namespaces and links named for subnet `index` (ours, or a killed test's:
    whoever holds the subnet's lock owns its names). Returns what could not be removed."""
    problems = []
    names = re.compile(rf"grpo{index}n\d+")
    for line in ip("netns", "list", check=False).splitlines():
        name = line.split()[0] if line.split() else ""
        if names.fullmatch(name):
            for pid in ip("netns", "pids", name, check=False).split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                ip("netns", "del", name)
            except HostError as e:
                problems.append(str(e))
    links = re.compile(rf"grpo{index}(br|v\d+|p\d+)")
    for line in ip("-o", "link", "show", check=False).splitlines():
        name = line.split(":")[1].strip().split("@")[0] if ":" in line else ""
        if links.fullmatch(name):
            try:
                ip("link", "del", name)
            except HostError as e:
                if "Cannot find device" not in str(e):  # a veth goes with its peer
                    problems.append(str(e))
    return problems


def _subnet_taken(index: int) -> bool:
    """Whether this machine already has an address in 10.77.<index>.0/24 (not ours: our
    leftovers are removed before this is asked)."""
    return f" {PREFIX}.{index}." in ip("-4", "-o", "addr", "show", check=False)


def _claim_subnet() -> tuple[int, IO[str]]:
    for index in range(1, 255):
        lock = open(LOCKS / f"grpo-hosts-{PREFIX}.{index}.lock", "w")  # noqa: SIM115
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            continue
        if not remove_leftovers(index) and not _subnet_taken(index):
            return index, lock
        lock.close()
    raise HostError(f"no free subnet {PREFIX}.X.0/24 for test hosts")


@contextmanager
def network(count: int, base_dir: Path) -> Iterator[Network]:
    """`count` hosts on a bridge of their own; their data directories under `base_dir`."""
    with changing_network():
        index, lock = _claim_subnet()
    net = Network(index=index, base_dir=base_dir)
    try:
        with changing_network():
            net.build(count)
        yield net
    finally:
        problems = net.teardown()
        lock.close()
        if problems:
            raise HostError("; ".join(problems))


@contextmanager
def hosts_and_api(count: int, base_dir: Path) -> Iterator[tuple[Network, Stack]]:
    """`count` hosts, and a stack on PostgreSQL and Redis whose API listens on the bridge,
    with no worker on the machine itself: the workers are the tests' own, in the hosts."""
    with (
        network(count, base_dir) as net,
        pg_database() as url,
        running_stack(
            base_dir / "api",
            database_url=url,
            broker_url=REDIS_URL,
            host=net.gateway,
            with_worker=False,
        ) as stack,
    ):
        yield net, stack


def host_env(
    stack: Stack, net: Network, host: Host, extra_env: dict[str, str] | None = None
) -> dict[str, str]:
    """What a worker of `stack` inside `host` sets on top of the stack's environment: the
    host's data directory, the stack's database and broker over the bridge (the stack must
    be on PostgreSQL and Redis: the embedded store and broker are files, which another
    machine could not share), and `extra_env`."""
    env = {"GRPO_DATA_DIR": str(host.data_dir), **(extra_env or {})}
    for key in ("GRPO_DATABASE_URL", "GRPO_BROKER_URL"):
        if key not in stack.env:
            raise ValueError(f"a host's worker needs a network service: the stack has no {key}")
        env[key] = net.over_bridge(stack.env[key])
    return env


def start_host_worker(
    stack: Stack,
    net: Network,
    host: Host,
    name: str,
    extra_env: dict[str, str] | None = None,
    *,
    queue: str | None = None,
    cpus: str | None = None,
) -> subprocess.Popen[bytes]:
    """A `celery worker` of `stack` inside `host`: its data directory is the host's, and it
    reaches the stack's database and broker over the bridge. The stack must be on
    PostgreSQL and Redis: the embedded store and broker are files, which another machine
    could not share. `extra_env`: more of the worker's settings (GRPO_WORKER_ADDRESS);
    `queue`: the queues it consumes (comma-separated; the stack's by default); `cpus`: the
    cores it and its ranks run on (`taskset -c CPUS`: it then holds one CPU slot a core)."""
    env = host_env(stack, net, host, extra_env)
    pinned = ["taskset", "-c", cpus] if cpus else []
    proc = stack.start_worker(name, queue=queue, extra_env=env, wrapper=[*pinned, *host.prefix])
    host.wait_inside(proc)
    return proc
