"""A real, local Kubernetes control plane: etcd, kube-apiserver and kube-controller-manager.

What controller-runtime's envtest starts, plus the controllers that quotas and namespaces need:
without kube-controller-manager a ResourceQuota has no ``status`` (and is then not enforced, or
refuses everything once ``status.hard`` is set), namespaces stay ``Terminating`` and no
``default`` ServiceAccount exists (../shared/reference/real-control-plane.md). No scheduler and
no kubelet: pods are admitted and stored, never run.

Everything listens on loopback at free ports, so two runs can coexist; etcd keeps its data on
tmpfs with ``--unsafe-no-fsync``. Every child is started in its own process group with
``PR_SET_PDEATHSIG``, so it dies with the Python process that started it, even on ``kill -9``;
``stop()`` (also run at exit) terminates them in reverse order.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import dataclasses
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from e2e import toolchain
from e2e.kube import Kube

ADMIN_TOKEN_USER = "gpuaas-e2e-admin"
KCM_USER = "system:kube-controller-manager"
# The controllers that the platform's promises depend on (quota status, namespace deletion,
# ServiceAccounts and their tokens, kube-root-ca.crt, Job pods, owner-reference GC; a Deployment's
# rollout creating ReplicaSets and their pods; the type check of admission policies, which writes
# their status.typeChecking).
CONTROLLERS = (
    "namespace",
    "serviceaccount",
    "serviceaccount-token",
    "resourcequota",
    "garbagecollector",
    "root-ca-certificate-publisher-controller",
    "job",
    "deployment-controller",
    "replicaset-controller",
    "validatingadmissionpolicy-status-controller",
)
SERVICE_CIDR = "10.96.0.0/16"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:
    """preexec_fn: SIGKILL this child when the process that started it dies (Linux prctl)."""
    os.setpgrp()
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1


def _tmpfs_root() -> Path:
    shm = Path("/dev/shm")
    return shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())


@dataclasses.dataclass
class Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


class ControlPlaneError(RuntimeError):
    pass


class ControlPlane:
    """Start with :meth:`start` (or as a context manager); :attr:`kube` is an admin client."""

    def __init__(self, bin_dir: Path | None = None, workdir: Path | None = None) -> None:
        self.bin_dir = bin_dir or toolchain.build(toolchain.TOOLSETS["controlplane"])
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="gpuaas-cp-"))
        self._own_workdir = workdir is None
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.data_dir = Path(tempfile.mkdtemp(prefix="gpuaas-etcd-", dir=_tmpfs_root()))
        self.procs: list[Proc] = []
        self.etcd_port = free_port()
        self.etcd_peer_port = free_port()
        self.api_port = free_port()
        self.admin_token = os.urandom(16).hex()
        self.kcm_token = os.urandom(16).hex()
        self.server = f"https://127.0.0.1:{self.api_port}"
        self.kubeconfig = self.workdir / "kubeconfig"
        self.ca_file = self.workdir / "certs" / "apiserver.crt"
        self._kube: Kube | None = None
        atexit.register(self.stop)

    # ---------------------------------------------------------------------------------------
    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def kube(self) -> Kube:
        if self._kube is None:
            self._kube = Kube(self.server, self.admin_token, self.ca_file)
        return self._kube

    def _spawn(self, name: str, args: list[str]) -> Proc:
        log = self.workdir / f"{name}.log"
        fh = log.open("ab")
        popen = subprocess.Popen(
            [str(self.bin_dir / name), *args],
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,
            cwd=self.workdir,
        )
        fh.close()
        proc = Proc(name, popen, log)
        self.procs.append(proc)
        return proc

    def _keys(self) -> None:
        """A service-account signing key pair per run (never a fixed key)."""
        key, pub = self.workdir / "sa.key", self.workdir / "sa.pub"
        subprocess.run(["openssl", "genrsa", "-out", str(key), "2048"], check=True, capture_output=True)
        subprocess.run(
            ["openssl", "rsa", "-in", str(key), "-pubout", "-out", str(pub)], check=True, capture_output=True
        )
        # Static token file: one admin in system:masters (tests impersonate team members with it),
        # and kube-controller-manager as the user a real one signs in as without
        # --use-service-account-credentials (admission policies tell controllers by username).
        (self.workdir / "tokens.csv").write_text(
            f'{self.admin_token},{ADMIN_TOKEN_USER},uid-admin,"system:masters"\n'
            f'{self.kcm_token},{KCM_USER},uid-kcm,"system:masters"\n'
        )

    def start_etcd(self) -> None:
        client = f"http://127.0.0.1:{self.etcd_port}"
        peer = f"http://127.0.0.1:{self.etcd_peer_port}"
        self._spawn(
            "etcd",
            [
                "--name=e2e",
                f"--data-dir={self.data_dir}",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=e2e={peer}",
                "--unsafe-no-fsync=true",
                "--log-level=warn",
                "--listen-metrics-urls=",
            ],
        )

    def start_apiserver(self) -> None:
        certs = self.workdir / "certs"
        certs.mkdir(exist_ok=True)
        self._spawn(
            "kube-apiserver",
            [
                f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
                f"--secure-port={self.api_port}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--cert-dir={certs}",
                f"--token-auth-file={self.workdir / 'tokens.csv'}",
                "--authorization-mode=Node,RBAC",
                f"--service-account-key-file={self.workdir / 'sa.pub'}",
                f"--service-account-signing-key-file={self.workdir / 'sa.key'}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                # Privileged pods exist (the node DaemonSets); Pod Security labels per namespace decide.
                "--allow-privileged=true",
                # No endpoints for the `kubernetes` Service: 127.0.0.1 is refused as an endpoint address.
                "--endpoint-reconciler-type=none",
                "--profiling=false",
                "--v=1",
            ],
        )

    def start_controller_manager(self) -> None:
        self._spawn(
            "kube-controller-manager",
            [
                f"--kubeconfig={self._kcm_kubeconfig()}",
                f"--controllers={','.join(CONTROLLERS)}",
                f"--service-account-private-key-file={self.workdir / 'sa.key'}",
                f"--root-ca-file={self.ca_file}",
                "--use-service-account-credentials=false",
                "--leader-elect=false",
                "--secure-port=0",
                "--concurrent-resource-quota-syncs=2",
                "--resource-quota-sync-period=10s",
                "--v=1",
            ],
        )

    def _kcm_kubeconfig(self) -> Path:
        return self.write_kubeconfig(self.workdir / "kcm.kubeconfig", token=self.kcm_token)

    def write_kubeconfig(self, path: Path | None = None, context: str = "gpuaas-e2e", token: str | None = None) -> Path:
        path = path or self.kubeconfig
        path.write_text(
            "apiVersion: v1\nkind: Config\n"
            f"clusters:\n- name: {context}\n  cluster:\n    server: {self.server}\n"
            f"    certificate-authority: {self.ca_file}\n"
            f"users:\n- name: {context}-admin\n  user:\n    token: {token or self.admin_token}\n"
            f"contexts:\n- name: {context}\n  context:\n    cluster: {context}\n    user: {context}-admin\n"
            f"current-context: {context}\n"
        )
        path.chmod(0o600)
        return path

    def _wait(self, what: str, ok: object, timeout: float, proc: Proc) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.popen.poll() is not None:
                raise ControlPlaneError(f"{proc.name} exited ({proc.popen.returncode}):\n{proc.tail()}")
            with contextlib.suppress(Exception):
                if callable(ok) and ok():
                    return
            time.sleep(0.2)
        raise ControlPlaneError(f"{what} not ready after {timeout:.0f} s:\n{proc.tail()}")

    def _etcd_healthy(self) -> bool:
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{self.etcd_port}/health", timeout=2) as r:
            return b'"true"' in r.read()

    def start(self, timeout: float = 180.0) -> ControlPlane:
        t0 = time.monotonic()
        self._keys()
        self.start_etcd()
        self._wait("etcd", self._etcd_healthy, timeout, self.procs[-1])
        self.start_apiserver()
        api = self.procs[-1]
        self._wait("kube-apiserver certificate", lambda: self.ca_file.is_file(), timeout, api)
        self.write_kubeconfig()
        self._wait("kube-apiserver /readyz", lambda: self.kube.readyz(), timeout, api)
        self.start_controller_manager()
        kcm = self.procs[-1]
        # The namespace and serviceaccount controllers are up once `default` has its ServiceAccount.
        self._wait(
            "kube-controller-manager (default ServiceAccount)",
            lambda: self.kube.get("v1", "ServiceAccount", "default", "default") is not None,
            timeout,
            kcm,
        )
        self.started_in = time.monotonic() - t0
        return self

    def restart_apiserver(self, timeout: float = 120.0) -> None:
        """Kill and start kube-apiserver on the same port and etcd (state must survive)."""
        api = next(p for p in self.procs if p.name == "kube-apiserver")
        # SIGKILL: a crash, not a drain (a graceful stop waits for the watches of its clients).
        api.popen.kill()
        api.popen.wait(timeout=30)
        self.procs.remove(api)
        self.start_apiserver()
        self._wait("kube-apiserver /readyz after restart", lambda: self.kube.readyz(), timeout, self.procs[-1])

    def version(self) -> str:
        return str(self.kube.request("GET", "/version")["gitVersion"])

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.popen.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.popen.terminate()
        for proc in reversed(self.procs):
            try:
                proc.popen.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    proc.popen.kill()
                proc.popen.wait(timeout=5)
        self.procs.clear()
        shutil.rmtree(self.data_dir, ignore_errors=True)
        if self._own_workdir and not os.environ.get("GPUAAS_E2E_KEEP"):
            shutil.rmtree(self.workdir, ignore_errors=True)


@contextlib.contextmanager
def running(**kw: object) -> Iterator[ControlPlane]:
    cp = ControlPlane(**kw)  # type: ignore[arg-type]
    try:
        cp.start()
        yield cp
    finally:
        cp.stop()
