"""Child processes of the e2e harness: loopback ports, dying with the parent, health probes, logs.

What every server the e2e starts needs, whoever starts it (the control plane, Kueue's manager,
the CNI harness): a loopback port no other server of this process was given, a child that dies
with the Python process even on ``kill -9``, and the end of its log for an error message. And
:class:`Poller`, the background thread the harness plays operators with and the benchmarks sample by.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import os
import random
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import urllib.request
from pathlib import Path
from typing import Self

#: Ports this process has handed out: never one twice (a probed port is free again the moment its
#: probe socket closes, so two calls of ``bind(0)`` could return one port to two servers).
_HANDED_OUT: set[int] = set()


def _ephemeral_low() -> int:
    """The low end of the kernel's ephemeral range (``net.ipv4.ip_local_port_range``, 32768 by default)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A loopback TCP port no server of this process was given, below the ephemeral range.

    ``bind(("127.0.0.1", 0))`` picks from the ephemeral range, where the kernel also takes the
    source port of every outgoing connection (etcd's clients, the API server's watches): between
    this probe and the server's own bind, such a connection could take the port. Below that range
    only explicit binds take ports, so the probe stays true; picked at random, parallel test
    sessions rarely meet, and the probe refuses one that is taken.
    """
    low = max(_ephemeral_low(), 10000)
    rng = random.SystemRandom()
    for _ in range(2000):
        port = rng.randrange(max(1024, low - 10000), low)
        if port in _HANDED_OUT:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _HANDED_OUT.add(port)
        return port
    raise OSError("no free loopback port below the ephemeral range")


def die_with_parent() -> None:
    """preexec_fn: SIGKILL this child when the process that started it dies (Linux prctl)."""
    os.setpgrp()
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1


def tmpfs_root() -> Path:
    shm = Path("/dev/shm")
    return shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())


def healthz(url: str) -> bool:
    """GET a loopback /healthz (the scheduler's self-signed serving certificate is not checked)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with urllib.request.urlopen(url, timeout=2, context=ctx) as r:
        return bool(r.status == 200 and r.read().strip() == b"ok")


def log_tail(log: Path, lines: int) -> str:
    """The last ``lines`` lines of a child's log ("" while it has none): for an error message."""
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


@dataclasses.dataclass
class Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 40) -> str:
        return log_tail(self.log, lines)


class Poller:
    """A daemon thread that calls :meth:`tick` every ``every`` seconds until stopped; a context manager.

    One shape for everything the harness does beside a test or a benchmark while something else
    runs: playing an operator (the Network Operator's status, Kueue's manager), sampling memory or
    the engine's checkpoint. The first tick comes ``every`` seconds after the start; :meth:`stop`
    ends the wait at once, so a stop takes at most one tick.
    """

    def __init__(self, name: str, every: float) -> None:
        self.every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def tick(self) -> None:
        raise NotImplementedError

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            self.tick()

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=timeout)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
