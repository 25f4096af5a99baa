"""Kueue's own controller manager for the e2e tests: its CRDs, the process, the applied plan.

The manager is ``sigs.k8s.io/kueue/cmd/kueue`` at the pinned v0.19.2, built from its Go module by
``e2e/toolchain.py`` (tool set ``kueue``), run with the Configuration gpuaas renders for the Helm
release (:func:`components.queueing.queues.kueue_configuration`) plus what a process outside a cluster
needs: no leader election, loopback ports, a temporary cert directory, the on-demand visibility
API server off. It signs in as the chart's ServiceAccount with a token the API server issued.
Kueue's CRDs: the ones in ../shared/upstream/kueue (byte-identical to the module's, checked in
test_elastic_quotas_lend_and_reclaim.py) and, for the kinds shared/upstream lacks (Workload,
AdmissionCheck, …), the same directory of the same module (``config/components/crd/bases``); the
workload CRDs of JobSet and the Kubeflow operators from their modules (:data:`WORKLOAD_CRDS`).

Controller only: Kueue's admission webhooks are not registered with the API server (its
serving certificate names the in-cluster Service, which a loopback server cannot be reached
as). So Jobs are submitted with ``suspend: true``, as Kueue's docs ask where its webhook is
absent, and Kueue admits one by unsuspending it (no kubelet needed).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest
import yaml

from components import platform_args
from components.loader import parse_config
from components.model.config import StackConfig
from components.model.resources import GPU
from components.model.teams import Team
from components.plan.offline import Run
from components.queueing import controllers, queues
from components.queueing.admission import QUEUE_LABEL
from e2e import toolchain, upstream
from e2e.controlplane import ControlPlane
from e2e.kube import Identity, Kube
from e2e.kueue_process import CERT_SECRET, KueueProcess
from e2e.plan_apply import UPSTREAM, apply_plan, install_crds
from tests.conftest import raw_stack
from tests.e2e.conftest import need_upstream, start_plane
from tests.e2e.jobs import queued_job as job  # noqa: F401  (the tests' name for it)
from tests.e2e.settle import job_gone

CFG: StackConfig = parse_config(raw_stack("onprem"))
KUEUE_API = queues.API
SHARED_CRDS = UPSTREAM / "kueue" / "v0.19.2" / "crds"
#: The CRDs Kueue's cert rotator injects its CA into as conversion webhooks (pkg/util/cert/cert.go).
CONVERTED = ("localqueues", "clusterqueues", "workloads", "cohorts", "multikueueclusters")


def member(team: Team) -> Identity:
    return Identity(f"member-of-{team.name}@example.com", tuple(team.groups))


def module_crds() -> Path:
    """The CRD bases of the sigs.k8s.io/kueue module the manager is built from (Go module cache)."""
    ts = toolchain.TOOLSETS["kueue"]
    cache = subprocess.run(
        ["go", "env", "GOMODCACHE"], env=toolchain.go_env(), check=True, capture_output=True, text=True
    ).stdout.strip()
    return Path(cache) / f"sigs.k8s.io/kueue@{toolchain.pinned_version(ts)}" / "config/components/crd/bases"


def dependency_dir(module: str) -> Path:
    """Where the Go module cache holds ``module`` at the version Kueue's build requires (its
    jobframework imports the JobSet and Kubeflow APIs, so the build downloaded them)."""
    out = subprocess.run(
        ["go", "list", "-m", "-json", module],
        cwd=toolchain.TOOLSETS["kueue"].module_dir,
        env=toolchain.go_env(),
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    found = json.loads(out).get("Dir")
    assert found, f"{module} is not in the Go module cache: `make e2e-tools` builds Kueue and downloads it"
    return Path(found)


#: The workload CRDs of the integrations Kueue runs here, as their own modules ship them (the
#: versions Kueue v0.19.2 is built against): the queue, owner and suspend guards on them are
#: type-checked against these schemas, and JobSets can be held and released for real.
WORKLOAD_CRDS: Final = (
    ("sigs.k8s.io/jobset", "config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml"),
    ("github.com/kubeflow/training-operator", "manifests/base/crds/kubeflow.org_pytorchjobs.yaml"),
    ("github.com/kubeflow/mpi-operator", "deploy/v2beta1/mpi-operator.yaml"),
)


def workload_crds() -> list[dict[str, Any]]:
    docs = []
    for module, path in WORKLOAD_CRDS:
        for doc in yaml.safe_load_all((dependency_dir(module) / path).read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                docs.append(doc)
    assert {d["spec"]["names"]["plural"] for d in docs} == {"jobsets", "pytorchjobs", "mpijobs"}
    return docs


def kueue_crds(webhook_port: int) -> list[dict[str, Any]]:
    """Every Kueue CRD: shared/upstream's, then the module's for the rest.

    Kueue's cert rotator is not ready until it has put its CA into the conversion webhook of each
    CRD in :data:`CONVERTED`, as the release manifests declare it (config/components/crd/patches
    webhook_in_*.yaml); here that webhook is the manager's loopback port. Every object is stored
    and asked for at v1beta2, the storage version, so the API server never calls it.
    """
    docs: dict[str, dict[str, Any]] = {}
    for root in (upstream.require(SHARED_CRDS.relative_to(UPSTREAM)), module_crds()):
        for f in sorted(root.glob("*.yaml")):
            doc = yaml.safe_load(f.read_text())
            docs.setdefault(doc["metadata"]["name"], doc)
    for plural in CONVERTED:
        doc = docs[f"{plural}.kueue.x-k8s.io"]
        doc["spec"]["conversion"] = {
            "strategy": "Webhook",
            "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": {"url": f"https://127.0.0.1:{webhook_port}/convert"},
            },
        }
    return list(docs.values())


class Kueue(KueueProcess):
    """The Kueue manager as a child process of the test, against ``cp``, signed in as the chart's
    ServiceAccount (:func:`components.queueing.controllers.kueue_identity`): the identity the
    suspend guard lets release a held workload, with a ServiceAccount token the API server issued.

    ``pods_ready_timeout``: no kubelet makes a pod ready here, so Kueue's ``waitForPodsReady``
    would evict every admitted workload after the stack's timeout; the scenario tests run with it
    raised to this, and ``test_kueue_gives_back_what_never_starts.py`` proves the stack's own.
    """

    def __init__(
        self,
        cp: ControlPlane,
        workdir: Path,
        cfg: StackConfig = CFG,
        pods_ready_timeout: str | None = "3600s",
        metrics: bool = False,
    ) -> None:
        """``metrics``: serve the metrics endpoint as the chart does (the stack's ``metrics``
        settings, HTTPS with controller-runtime's authentication and authorization filter) on a
        loopback port, :attr:`metrics_port`; off by default (nothing here scrapes it)."""
        super().__init__(workdir, metrics=metrics)
        self.cp, self.cfg = cp, cfg
        self.pods_ready_timeout = pods_ready_timeout

    def configuration(self) -> dict[str, Any]:
        conf = queues.kueue_configuration(platform_args.queues(self.cfg))
        if self.pods_ready_timeout is not None:
            conf["waitForPodsReady"] = {**conf["waitForPodsReady"], "timeout": self.pods_ready_timeout}
        conf.update(
            leaderElection={"leaderElect": False},
            health={"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
            metrics=(
                {**conf["metrics"], "bindAddress": f"127.0.0.1:{self.metrics_port}"}
                if self.metrics_port is not None
                else {"bindAddress": "0"}
            ),
            webhook={"port": self.webhook_port, "host": "127.0.0.1", "certDir": str(self.certs)},
            # An aggregated API server of its own (needs the cluster's front-proxy CA): not here.
            featureGates={"VisibilityOnDemand": False},
        )
        return conf

    def service_account_kubeconfig(self) -> Path:
        """A kubeconfig with a token of Kueue's ServiceAccount, bound to ``cluster-admin`` (the
        chart's ClusterRole is a Helm template; its rights are not what this proves)."""
        kube, ns = self.cp.kube, self.cfg.queues.namespace
        name = controllers.kueue_identity(self.cfg.queues).rsplit(":", 1)[1]
        kube.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": ns}})
        kube.apply(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": "gpuaas-e2e-kueue"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
                "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}],
            }
        )
        request = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 7200},
        }
        token = kube.request("POST", f"/api/v1/namespaces/{ns}/serviceaccounts/{name}/token", request)
        return self.cp.write_kubeconfig(self.workdir / "kueue.kubeconfig", token=token["status"]["token"])

    def start(self, bin_dir: Path) -> None:
        kube = self.cp.kube
        # The chart ships this Secret empty; Kueue's cert rotator fills it (and the cert dir).
        kube.apply(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": CERT_SECRET, "namespace": self.cfg.queues.namespace},
            }
        )
        self.launch(bin_dir, self.configuration(), self.service_account_kubeconfig())

    def mount_certs(self) -> bool:
        """Play the kubelet (:meth:`e2e.kueue_process.KueueProcess.copy_certs`)."""
        return self.copy_certs(self.cp.kube, self.cfg.queues.namespace)

    def stop(self) -> None:
        self.terminate()


def delete_job(kube: Kube, ns: str, name: str) -> None:
    """Delete a Job and its pods, and wait until they are gone (:func:`tests.e2e.settle.job_gone`)."""
    job_gone(kube, ns, name)


def kueue_plane(
    pytestconfig: pytest.Config,
    what: str,
    run: Run,
    cfg: StackConfig = CFG,
    pods_ready_timeout: str | None = "3600s",
) -> Iterator[tuple[ControlPlane, Kueue]]:
    """A control plane with ``run``'s plan applied and Kueue's manager running against it (for a fixture)."""
    need_upstream()
    bin_dir = toolchain.build(toolchain.TOOLSETS["kueue"])
    cp = start_plane(pytestconfig, what)
    workdir = Path(tempfile.mkdtemp(prefix="gpuaas-kueue-"))
    manager = Kueue(cp, workdir, cfg, pods_ready_timeout)
    try:
        kube = cp.kube
        install_crds(kube, kueue_crds(manager.webhook_port))
        install_crds(kube, workload_crds())
        apply_plan(kube, run)
        # The plan's own proof Jobs go through their team's queue too; the scenarios count GPUs
        # from zero, so they go (with their pods) before Kueue starts.
        for team in cfg.teams:
            for job in kube.list("batch/v1", "Job", team.ns, selector=QUEUE_LABEL):
                delete_job(kube, team.ns, job["metadata"]["name"])
            kube.wait_for(
                f"no queued Jobs in {team.ns}",
                lambda team=team: not kube.list("batch/v1", "Job", team.ns, selector=QUEUE_LABEL),
            )
        manager.start(bin_dir)
        try:
            kube.wait_for("the cert rotator's Secret", manager.mount_certs, timeout=60)
            kube.wait_for("Kueue /readyz", manager.ready, timeout=180)
            for team in cfg.teams:
                kube.wait_for(
                    f"ClusterQueue {team.name} active",
                    lambda team=team: condition(kube.get(KUEUE_API, "ClusterQueue", team.name), "Active") == "True",
                    timeout=120,
                )
        except (TimeoutError, RuntimeError) as e:
            raise AssertionError(f"{e}\n--- kueue log ---\n{manager.tail()}") from e
        yield cp, manager
    finally:
        manager.stop()
        cp.stop()


def condition(obj: dict[str, Any] | None, kind: str) -> str | None:
    for c in (obj or {}).get("status", {}).get("conditions") or []:
        if c["type"] == kind:
            return str(c["status"])
    return None


def admitted(kube: Kube, ns: str, prefix: str) -> list[str]:
    """Names of the Jobs ``prefix*`` in ``ns`` that Kueue has admitted (unsuspended), sorted."""
    return sorted(
        j["metadata"]["name"]
        for j in kube.list("batch/v1", "Job", ns)
        if j["metadata"]["name"].startswith(prefix) and not j["spec"].get("suspend")
    )


def workload_of(kube: Kube, ns: str, job_name: str) -> dict[str, Any] | None:
    for w in kube.list(KUEUE_API, "Workload", ns):
        if any(o.get("name") == job_name and o.get("kind") == "Job" for o in w["metadata"].get("ownerReferences", [])):
            return w
    return None


def gpu_usage(kube: Kube, team: str) -> dict[str, str]:
    cq = kube.get(KUEUE_API, "ClusterQueue", team) or {}
    for f in cq.get("status", {}).get("flavorsUsage") or []:
        if f["name"] == "h100-full":
            for r in f["resources"]:
                if r["name"] == GPU:
                    return {"total": str(r.get("total", "0")), "borrowed": str(r.get("borrowed", "0"))}
    return {"total": "0", "borrowed": "0"}
