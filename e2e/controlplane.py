"""A real, local Kubernetes control plane: etcd, kube-apiserver and kube-controller-manager, and
on request kube-scheduler and KWOK.

What controller-runtime's envtest starts, plus kube-controller-manager with every controller that
is on by default (``--controllers=*``: namespace, serviceaccount(-token), resourcequota,
garbagecollector, root-ca-cert-publisher, daemonset, replicaset, deployment, statefulset, job,
cronjob, ttl-after-finished, disruption, endpoint(slice), nodelifecycle with taint eviction,
podgc, resourceclaim, ...): without it a ResourceQuota has no ``status`` (and is then not
enforced, or refuses everything once ``status.hard`` is set), namespaces stay ``Terminating`` and
no ``default`` ServiceAccount exists (../shared/reference/real-control-plane.md).

No kubelet. By default no scheduler either: pods are admitted and stored, and stay ``Pending``
(the DaemonSet, ReplicaSet and Job controllers create their pods; nothing binds them).
``ControlPlane(scheduler=True)`` starts the real kube-scheduler (as ``system:kube-scheduler``,
authorized by the bootstrap RBAC only), and ``ControlPlane(kwok=True)`` starts KWOK, which plays the
kubelet of every Node annotated ``kwok.x-k8s.io/node: fake`` (:func:`e2e.kwok_nodes.kwok_node` builds one): such
nodes become Ready and keep a lease, pods bound to them become Running (Job pods Succeeded), and
deleted pods go, with KWOK's default stages. Nodes that nothing reports for (the plans' own Node
objects) are never marked unhealthy: ``--node-startup-grace-period`` is a year, so node
lifecycle taints and evictions act on KWOK nodes only.

Everything listens on loopback at free ports, so two runs can coexist; etcd keeps its data on
tmpfs with ``--unsafe-no-fsync``. Every child is started in its own process group with
``PR_SET_PDEATHSIG``, so it dies with the Python process that started it, even on ``kill -9``;
``stop()`` (also run at exit) terminates them in reverse order.

The binaries are the control-plane tool set of one Kubernetes minor (``kubernetes=``, else
``$GPUAAS_E2E_KUBERNETES``, else the newest; see e2e/toolchain.py) and the ``kwok`` set.

Past the 400-line mark on purpose: one class for one control plane's processes, their flags and
their start order, and each flag's reason beside it is the substance (the process helpers live
in e2e/processes.py, the KWOK Node in e2e/kwok_nodes.py).

    with ControlPlane(scheduler=True, kwok=True) as cp:
        cp.kube.create(kwok_node("gpu-0", capacity={"nvidia.com/gpu": "8"}))
        cp.kubectl("get", "nodes")
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from e2e import toolchain
from e2e.kube import Kube
from e2e.kwok_nodes import KWOK_NODE_ANNOTATION, KWOK_NODE_VALUE
from e2e.processes import Proc, die_with_parent, free_port, healthz, tmpfs_root

ADMIN_TOKEN_USER = "gpuaas-e2e-admin"
KCM_USER = "system:kube-controller-manager"
# The user the bootstrap RBAC binds ClusterRoles system:kube-scheduler and system:volume-scheduler
# (and the extension-apiserver-authentication-reader Role) to: the scheduler gets no more.
SCHEDULER_USER = "system:kube-scheduler"
# KWOK plays every kubelet of the fake nodes (node and pod status, leases, pod deletion).
KWOK_USER = "system:kwok-controller"
# Every controller kube-controller-manager turns on by default (names change between minors;
# `*` does not). The cloud ones (service-lb, node-route, cloud-node-lifecycle) and node-ipam skip
# themselves without a cloud provider or --allocate-node-cidrs.
CONTROLLERS = ("*",)
#: Served beside resource.k8s.io/v1 (see start_apiserver).
DRA_BETA = "resource.k8s.io/v1beta2"
SERVICE_CIDR = "10.96.0.0/16"
# KWOK's pod addresses (its --cidr).
KWOK_POD_CIDR = "10.244.0.0/16"
# A year: nodes that never posted a status (no kubelet, not KWOK's) are never marked Unknown.
NODE_STARTUP_GRACE = "8760h"


class ControlPlaneError(RuntimeError):
    pass


class ControlPlane:
    """A control plane on loopback; :meth:`start` it (or use it as a context manager).

    :attr:`kube` is an admin client (``system:masters``); :attr:`kubeconfig` the admin kubeconfig
    (written once kube-apiserver has made its certificate); :meth:`kubectl` runs the kubectl of the
    same Kubernetes version against it.

    Arguments:
        bin_dir: the control-plane binaries (default: built for ``kubernetes``).
        workdir: where certificates, kubeconfigs and logs go (default: a temporary directory,
            removed on stop unless ``$GPUAAS_E2E_KEEP`` is set).
        kubernetes: the minor, e.g. ``"1.35"`` (default: ``$GPUAAS_E2E_KUBERNETES`` or the newest).
        scheduler: also run kube-scheduler (:meth:`start_scheduler` starts it later too).
        kwok: also run KWOK for the nodes annotated ``kwok.x-k8s.io/node: fake``
            (:meth:`start_kwok`; :meth:`stop_process` ``("kwok")`` stops every heartbeat, so
            the node lifecycle controller marks those nodes NotReady after its grace period).
        controllers: kube-controller-manager's ``--controllers``.
        controller_manager_args, scheduler_args, kwok_args: more flags for that program.
        kwok_config: KWOK's stages (default: KWOK's own defaults, from the ``kwok`` tool set);
            e2e/fleet.py writes a variant in which a pod completes only when its test says so.
    """

    def __init__(
        self,
        bin_dir: Path | None = None,
        workdir: Path | None = None,
        *,
        kubernetes: str | None = None,
        scheduler: bool = False,
        kwok: bool = False,
        controllers: Sequence[str] = CONTROLLERS,
        controller_manager_args: Sequence[str] = (),
        scheduler_args: Sequence[str] = (),
        kwok_args: Sequence[str] = (),
        kwok_bin_dir: Path | None = None,
        kwok_config: Path | None = None,
    ) -> None:
        self.bin_dir = bin_dir or toolchain.build(toolchain.controlplane(kubernetes))
        self._kwok_bin_dir = kwok_bin_dir
        self.kwok_config = kwok_config
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="gpuaas-cp-"))
        self._own_workdir = workdir is None
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.data_dir = Path(tempfile.mkdtemp(prefix="gpuaas-etcd-", dir=tmpfs_root()))
        self.procs: list[Proc] = []
        self.with_scheduler, self.with_kwok = scheduler, kwok
        self.controllers = tuple(controllers)
        self.controller_manager_args = tuple(controller_manager_args)
        self.scheduler_args, self.kwok_args = tuple(scheduler_args), tuple(kwok_args)
        self.etcd_port = free_port()
        self.etcd_peer_port = free_port()
        self.api_port = free_port()
        self.scheduler_port = free_port()
        self.kwok_port = free_port()
        self.admin_token = os.urandom(16).hex()
        self.kcm_token = os.urandom(16).hex()
        self.scheduler_token = os.urandom(16).hex()
        self.kwok_token = os.urandom(16).hex()
        self.server = f"https://127.0.0.1:{self.api_port}"
        self.kubeconfig = self.workdir / "kubeconfig"
        self.ca_file = self.workdir / "certs" / "apiserver.crt"
        self.started_in = 0.0
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

    @property
    def kwok_bin_dir(self) -> Path:
        if self._kwok_bin_dir is None:
            self._kwok_bin_dir = toolchain.build(toolchain.TOOLSETS["kwok"])
        return self._kwok_bin_dir

    @property
    def kubectl_path(self) -> Path:
        """kubectl at the control plane's own version (a name of its multi-call binary)."""
        return self.bin_dir / "kubectl"

    def kubectl(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run ``kubectl ARGS`` as the admin against this control plane; output as text."""
        return subprocess.run(
            [str(self.kubectl_path), f"--kubeconfig={self.kubeconfig}", *args],
            check=check,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def _spawn(self, name: str, args: list[str], exe: Path | None = None) -> Proc:
        log = self.workdir / f"{name}.log"
        fh = log.open("ab")
        popen = subprocess.Popen(
            [str(exe or self.bin_dir / name), *args],
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent,
            cwd=self.workdir,
        )
        fh.close()
        proc = Proc(name, popen, log)
        self.procs.append(proc)
        return proc

    def proc(self, name: str) -> Proc | None:
        """The running process ``name`` (``etcd``, ``kube-apiserver``, ``kwok``, ...), if any."""
        return next((p for p in self.procs if p.name == name), None)

    def _keys(self) -> None:
        """A service-account signing key pair per run (never a fixed key)."""
        key, pub = self.workdir / "sa.key", self.workdir / "sa.pub"
        subprocess.run(["openssl", "genrsa", "-out", str(key), "2048"], check=True, capture_output=True)
        subprocess.run(
            ["openssl", "rsa", "-in", str(key), "-pubout", "-out", str(pub)], check=True, capture_output=True
        )
        # Static token file: one admin in system:masters (tests impersonate team members with it),
        # kube-controller-manager as the user a real one signs in as without
        # --use-service-account-credentials (admission policies tell controllers by username),
        # kube-scheduler as its own user with no group (the bootstrap RBAC decides what it may do),
        # and KWOK, which stands in for the kubelets.
        (self.workdir / "tokens.csv").write_text(
            f'{self.admin_token},{ADMIN_TOKEN_USER},uid-admin,"system:masters"\n'
            f'{self.kcm_token},{KCM_USER},uid-kcm,"system:masters"\n'
            f"{self.scheduler_token},{SCHEDULER_USER},uid-scheduler\n"
            f'{self.kwok_token},{KWOK_USER},uid-kwok,"system:masters"\n'
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
                # DRA's beta API served beside v1, as on a cluster that still enables it for older
                # clients (off by default on 1.35 and 1.37: pkg/controlplane/instance.go,
                # betaAPIGroupVersionsDisabledByDefault): a claim sent as v1beta2 must meet the same
                # policies (matchPolicy Equivalent; tests/e2e/test_dra_quota_and_claim_guard_hold.py).
                f"--runtime-config={DRA_BETA}=true",
                "--profiling=false",
                "--v=1",
            ],
        )

    def start_controller_manager(self) -> None:
        self._spawn(
            "kube-controller-manager",
            [
                f"--kubeconfig={self.write_kubeconfig(self.workdir / 'kcm.kubeconfig', token=self.kcm_token)}",
                f"--controllers={','.join(self.controllers)}",
                f"--service-account-private-key-file={self.workdir / 'sa.key'}",
                f"--root-ca-file={self.ca_file}",
                "--use-service-account-credentials=false",
                "--leader-elect=false",
                "--secure-port=0",
                "--concurrent-resource-quota-syncs=2",
                "--resource-quota-sync-period=10s",
                f"--node-startup-grace-period={NODE_STARTUP_GRACE}",
                "--v=1",
                *self.controller_manager_args,
            ],
        )

    def start_scheduler(self, timeout: float = 120.0) -> None:
        """Start kube-scheduler as ``system:kube-scheduler`` and wait for its ``/healthz``.

        Its kubeconfig serves for delegated authentication and authorization too (as kubeadm
        sets it up); it serves HTTPS on a free loopback port with a self-signed certificate.
        """
        kc = self.write_kubeconfig(self.workdir / "scheduler.kubeconfig", token=self.scheduler_token)
        certs = self.workdir / "scheduler-certs"
        certs.mkdir(exist_ok=True)
        proc = self._spawn(
            "kube-scheduler",
            [
                f"--kubeconfig={kc}",
                f"--authentication-kubeconfig={kc}",
                f"--authorization-kubeconfig={kc}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={self.scheduler_port}",
                f"--cert-dir={certs}",
                "--v=1",
                *self.scheduler_args,
            ],
        )
        url = f"https://127.0.0.1:{self.scheduler_port}/healthz"
        self._wait("kube-scheduler /healthz", lambda: healthz(url), timeout, proc)

    def start_named_scheduler(self, name: str, config: Path, timeout: float = 120.0) -> Proc:
        """Another kube-scheduler (process ``name``) with its own KubeSchedulerConfiguration ``config``.

        The configuration names the kubeconfig it signs in with (``clientConnection.kubeconfig``:
        with ``--config`` kube-scheduler ignores ``--kubeconfig``), e.g. a ServiceAccount's token,
        and its profiles; it serves ``/healthz`` on a free loopback port of its own.
        """
        port = free_port()
        certs = self.workdir / f"{name}-certs"
        certs.mkdir(exist_ok=True)
        proc = self._spawn(
            name,
            [f"--config={config}", "--bind-address=127.0.0.1", f"--secure-port={port}", f"--cert-dir={certs}", "--v=1"],
            exe=self.bin_dir / "kube-scheduler",
        )
        url = f"https://127.0.0.1:{port}/healthz"
        self._wait(f"{name} /healthz", lambda: healthz(url), timeout, proc)
        return proc

    def start_kwok(self, timeout: float = 120.0) -> None:
        """Start KWOK for the nodes annotated ``kwok.x-k8s.io/node: fake`` and wait for ``/healthz``.

        Its stages are KWOK's defaults (written into the ``kwok`` bin directory by the toolchain);
        nodes keep a lease (40 s) so the node lifecycle controller sees them alive.
        """
        kc = self.write_kubeconfig(self.workdir / "kwok.kubeconfig", token=self.kwok_token)
        proc = self._spawn(
            "kwok",
            [
                f"--kubeconfig={kc}",
                f"--config={self.kwok_config or self.kwok_bin_dir / 'kwok-stages.yaml'}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}={KWOK_NODE_VALUE}",
                "--node-lease-duration-seconds=40",
                f"--cidr={KWOK_POD_CIDR}",
                "--node-ip=127.0.0.1",
                f"--server-address=127.0.0.1:{self.kwok_port}",
                *self.kwok_args,
            ],
            exe=self.kwok_bin_dir / "kwok",
        )
        url = f"http://127.0.0.1:{self.kwok_port}/healthz"
        self._wait("kwok /healthz", lambda: healthz(url), timeout, proc)

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

    def _wait(self, what: str, ok: Callable[[], object], timeout: float, proc: Proc) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.popen.poll() is not None:
                raise ControlPlaneError(f"{proc.name} exited ({proc.popen.returncode}):\n{proc.tail()}")
            with contextlib.suppress(Exception):
                if ok():
                    return
            time.sleep(0.2)
        raise ControlPlaneError(f"{what} not ready after {timeout:.0f} s:\n{proc.tail()}")

    def _etcd_healthy(self) -> bool:
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
        if self.with_scheduler:
            self.start_scheduler(timeout)
        if self.with_kwok:
            self.start_kwok(timeout)
        self.started_in = time.monotonic() - t0
        return self

    def restart_apiserver(self, timeout: float = 120.0) -> None:
        """Kill and start kube-apiserver on the same port and etcd (state must survive)."""
        api = self.proc("kube-apiserver")
        assert api is not None, "kube-apiserver is not running"
        # SIGKILL: a crash, not a drain (a graceful stop waits for the watches of its clients).
        api.popen.kill()
        api.popen.wait(timeout=30)
        self.procs.remove(api)
        self.start_apiserver()
        self._wait("kube-apiserver /readyz after restart", lambda: self.kube.readyz(), timeout, self.procs[-1])

    def stop_process(self, name: str, timeout: float = 15.0) -> None:
        """Stop one program (e.g. ``kwok``: its nodes stop heartbeating); the rest keeps running."""
        proc = self.proc(name)
        if proc is None:
            return
        self._terminate([proc], timeout)
        self.procs.remove(proc)

    def version(self) -> str:
        return str(self.kube.request("GET", "/version")["gitVersion"])

    @staticmethod
    def _terminate(procs: Sequence[Proc], timeout: float) -> None:
        for proc in procs:
            if proc.popen.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.popen.terminate()
        for proc in procs:
            try:
                proc.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    proc.popen.kill()
                proc.popen.wait(timeout=5)

    def stop(self) -> None:
        self._terminate(list(reversed(self.procs)), 15)
        self.procs.clear()
        shutil.rmtree(self.data_dir, ignore_errors=True)
        if self._own_workdir and not os.environ.get("GPUAAS_E2E_KEEP"):
            shutil.rmtree(self.workdir, ignore_errors=True)


@contextlib.contextmanager
def running(**kw: Any) -> Iterator[ControlPlane]:
    cp = ControlPlane(**kw)
    try:
        cp.start()
        yield cp
    finally:
        cp.stop()
