"""Elastic quotas for real: Kueue's own controller manager against the onprem plan on a real API server.

The manager is ``sigs.k8s.io/kueue/cmd/kueue`` at the pinned v0.19.2, built from its Go module by
``e2e/toolchain.py`` (tool set ``kueue``), run with the Configuration gpuaas renders for the Helm
release (:func:`components.queueing.queues.kueue_configuration`) plus what a process outside a cluster
needs: no leader election, loopback ports, a temporary cert directory, the on-demand visibility
API server off. Kueue's CRDs: the ones in ../shared/upstream/kueue (byte-identical to the
module's, checked below) and, for the kinds shared/upstream lacks (Workload, AdmissionCheck, …),
the same directory of the same module (``config/components/crd/bases``).

Controller only: Kueue's admission webhooks are not registered with the API server (its
serving certificate names the in-cluster Service, which a loopback server cannot be reached
as). So Jobs are submitted with ``suspend: true``, as Kueue's docs ask where its webhook is
absent, and Kueue admits one by unsuspending it (no kubelet needed). The admission side is
still real: the queue policy (components/queueing/admission.py) runs in this API server.

Scenario (onprem stack, h100-full: 32 GPUs; vision 12 guaranteed + borrowing limit 8, language 12
lending at most 8, speech 8): vision submits 24 GPUs while the others idle → 20 admitted (12 +
8 borrowed), the rest waits; language and speech submit their shares → Kueue preempts vision's
borrowed Jobs (suspended again) and admits theirs; vision can never get language's partition
resource; a Job naming language's queue from vision's namespace is refused by the server; and
within vision a ``production`` Job preempts one of vision's own default-priority Jobs.
"""

from __future__ import annotations

import base64
import contextlib
import json
import subprocess
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.loader import parse_config
from components.model.config import StackConfig
from components.model.resources import GPU, sriov_resource
from components.model.teams import Team
from components.queueing import queues
from components.queueing.admission import PRIORITY_LABEL, QUEUE_LABEL
from e2e import toolchain, upstream
from e2e.controlplane import ControlPlane, _die_with_parent, free_port
from e2e.kube import ApiError, Identity, Kube
from e2e.plan_apply import UPSTREAM, apply_plan, install_crds
from tests.conftest import offline_run, raw_stack
from tests.e2e.conftest import need_upstream, start_plane, wait_until_refused

CFG: StackConfig = parse_config(raw_stack("onprem"))
TEAMS = {t.name: t for t in CFG.teams}
A, B, C = "vision", "language", "speech"  # A borrows; B and C reclaim
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


class Kueue:
    """The Kueue manager as a child process of the test, against ``cp``."""

    def __init__(self, cp: ControlPlane, workdir: Path) -> None:
        self.cp, self.workdir = cp, workdir
        self.health_port, self.webhook_port = free_port(), free_port()
        self.log = workdir / "kueue.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def configuration(self) -> dict[str, Any]:
        conf = queues.kueue_configuration(CFG)
        conf.update(
            leaderElection={"leaderElect": False},
            health={"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
            metrics={"bindAddress": "0"},
            webhook={"port": self.webhook_port, "host": "127.0.0.1", "certDir": str(self.workdir / "certs")},
            # An aggregated API server of its own (needs the cluster's front-proxy CA): not here.
            featureGates={"VisibilityOnDemand": False},
        )
        return conf

    def start(self, bin_dir: Path) -> None:
        kube = self.cp.kube
        # The chart ships this Secret empty; Kueue's cert rotator fills it (and the cert dir).
        kube.apply(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "kueue-webhook-server-cert", "namespace": CFG.queues.namespace},
            }
        )
        config = self.workdir / "kueue-config.yaml"
        config.write_text(yaml.safe_dump(self.configuration()))
        with self.log.open("ab") as fh:
            self.proc = subprocess.Popen(
                [str(bin_dir / "kueue"), f"--config={config}", "--zap-log-level=2"],
                stdout=fh,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={"KUBECONFIG": str(self.cp.kubeconfig), "PATH": "/usr/bin:/bin"},
                preexec_fn=_die_with_parent,
                cwd=self.workdir,
            )

    def mount_certs(self) -> bool:
        """Play the kubelet: copy the webhook Secret the cert rotator filled into the cert dir.

        In a cluster the Secret is a volume of the manager's pod; the rotator waits for its files
        (cert-controller rotator.go ``ensureCertsMounted``) before it reports ready.
        """
        secret = self.cp.kube.get("v1", "Secret", "kueue-webhook-server-cert", CFG.queues.namespace) or {}
        data = secret.get("data") or {}
        if not {"tls.crt", "tls.key"} <= set(data):
            return False
        certs = self.workdir / "certs"
        certs.mkdir(exist_ok=True)
        for key, value in data.items():
            (certs / key).write_bytes(base64.b64decode(value))
        return True

    def ready(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"kueue exited ({self.proc.returncode}):\n{self.tail()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/readyz", timeout=2) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def tail(self, lines: int = 60) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)


def _delete_job(kube: Kube, ns: str, name: str) -> None:
    """Delete a Job and its pods (a Job's REST default is to orphan them)."""
    path = kube.resource("batch/v1", "Job").path(ns, name)
    with contextlib.suppress(ApiError):
        kube.request("DELETE", path, {"propagationPolicy": "Background"})


@pytest.fixture(scope="module")
def kueue(pytestconfig: pytest.Config) -> Iterator[tuple[ControlPlane, Kueue]]:
    need_upstream()
    bin_dir = toolchain.build(toolchain.TOOLSETS["kueue"])
    cp = start_plane(pytestconfig, "onprem plan with Kueue")
    workdir = Path(tempfile.mkdtemp(prefix="gpuaas-kueue-"))
    manager = Kueue(cp, workdir)
    try:
        kube = cp.kube
        install_crds(kube, kueue_crds(manager.webhook_port))
        apply_plan(kube, offline_run("onprem"))
        # The plan's own proof Jobs in vision go through its queue too; the scenario counts GPUs
        # from zero, so they go (with their pods) before Kueue starts.
        for job in kube.list("batch/v1", "Job", A, selector=QUEUE_LABEL):
            _delete_job(kube, A, job["metadata"]["name"])
        kube.wait_for(f"no queued Jobs in {A}", lambda: not kube.list("batch/v1", "Job", A, selector=QUEUE_LABEL))
        manager.start(bin_dir)
        try:
            kube.wait_for("the cert rotator's Secret", manager.mount_certs, timeout=60)
            kube.wait_for("Kueue /readyz", manager.ready, timeout=180)
            for team in TEAMS:
                kube.wait_for(
                    f"ClusterQueue {team} active",
                    lambda team=team: _condition(kube.get(KUEUE_API, "ClusterQueue", team), "Active") == "True",
                    timeout=120,
                )
        except (TimeoutError, RuntimeError) as e:
            raise AssertionError(f"{e}\n--- kueue log ---\n{manager.tail()}") from e
        yield cp, manager
    finally:
        manager.stop()
        cp.stop()


def _condition(obj: dict[str, Any] | None, kind: str) -> str | None:
    for c in (obj or {}).get("status", {}).get("conditions") or []:
        if c["type"] == kind:
            return str(c["status"])
    return None


def job(ns: str, name: str, queue: str | None, limits: dict[str, str], suspend: bool = True) -> dict[str, Any]:
    """A one-pod batch Job as a team member writes it for Kueue (suspended; Kueue unsuspends it)."""
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if queue is not None:
        meta["labels"] = {QUEUE_LABEL: queue}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": {
            "suspend": suspend,
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": "100m", "memory": "128Mi", **limits}, "limits": limits},
                        }
                    ],
                }
            },
        },
    }


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


def _gpu_usage(kube: Kube, team: str) -> dict[str, str]:
    cq = kube.get(KUEUE_API, "ClusterQueue", team) or {}
    for f in cq.get("status", {}).get("flavorsUsage") or []:
        if f["name"] == "h100-full":
            for r in f["resources"]:
                if r["name"] == GPU:
                    return {"total": str(r.get("total", "0")), "borrowed": str(r.get("borrowed", "0"))}
    return {"total": "0", "borrowed": "0"}


# --------------------------------------------------------------------------------------------


def test_shared_upstream_crds_are_the_modules() -> None:
    """The CRDs the unit tests validate against are the ones this manager ships (same bytes)."""
    need_upstream()
    module = module_crds()
    # `make e2e` builds the kueue tool set first (e2e-tools), which brings the module: absent is a failure.
    assert module.is_dir(), f"{module} is absent: `python -m e2e.toolchain build kueue` downloads the module"
    shared = sorted(upstream.require(SHARED_CRDS.relative_to(UPSTREAM)).glob("*.yaml"))
    assert shared, SHARED_CRDS
    for f in shared:
        assert f.read_bytes() == (module / f.name).read_bytes(), f.name


def test_a_job_naming_another_teams_queue_is_refused_by_the_server(kueue: tuple[ControlPlane, Kueue]) -> None:
    kube, who = kueue[0].kube, member(TEAMS[A])
    gpu = {GPU: "1"}
    wait_until_refused(kube, job(A, "other-queue", B, gpu), who, "is not this team's queue")
    with pytest.raises(ApiError) as err:
        kube.create(job(A, "other-queue", B, gpu), as_=who)
    assert err.value.status == 403
    assert f"{QUEUE_LABEL} {B} is not this team's queue" in err.value.message
    assert f"may name only LocalQueue {A}" in err.value.message
    # naming no queue at all: a GPU Job is refused, a CPU-only Job is not Kueue's business
    with pytest.raises(ApiError) as err:
        kube.create(job(A, "no-queue", None, gpu), as_=who, dry_run=True)
    assert err.value.status == 403 and f"add the label {QUEUE_LABEL}: {A}" in err.value.message
    kube.create(job(A, "cpu-only", None, {}), as_=who, dry_run=True)
    # the allowed twin: its own queue
    kube.create(job(A, "own-queue", A, gpu), as_=who, dry_run=True)
    # and the same name is B's own queue in B's namespace
    kube.create(job(B, "own-queue", B, gpu), as_=member(TEAMS[B]), dry_run=True)


def test_the_queue_cannot_be_bypassed_by_forged_owners_apps_kinds_relabels_or_claims(
    kueue: tuple[ControlPlane, Kueue],
) -> None:
    """The holes an independent review found, against the real server's CEL and schemas: each
    refusal with its allowed twin beside it."""
    kube, who = kueue[0].kube, member(TEAMS[A])
    gpu = {GPU: "1"}
    spec = job(A, "x", None, gpu)["spec"]["template"]["spec"]

    # 1. a bare GPU pod with a forged controller ownerReference is not a Job's pod
    forged: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "forged",
            "namespace": A,
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "1", "controller": True}],
        },
        "spec": spec,
    }
    wait_until_refused(kube, forged, who, f"add the label {QUEUE_LABEL}: {A}")
    forged["metadata"]["labels"] = {QUEUE_LABEL: A}
    kube.create(forged, as_=who, dry_run=True)
    # ... while the Job controller's pods pass by who creates them (here kube-controller-manager
    # without --use-service-account-credentials: system:kube-controller-manager). An unsuspended
    # Job (no Kueue webhook here to suspend it) gets its unlabelled GPU pod at once.
    kube.create(job(A, "by-controller", A, gpu, suspend=False), as_=who)
    try:
        kube.wait_for(
            "the Job controller creates its GPU pod",
            lambda: [p for p in kube.list("v1", "Pod", A) if p["metadata"]["name"].startswith("by-controller-")],
            60,
        )
    finally:
        _delete_job(kube, A, "by-controller")

    # 1. GPU pods through a Deployment (or StatefulSet, ReplicaSet) would skip Kueue
    for kind in ("Deployment", "StatefulSet", "ReplicaSet"):
        workload: dict[str, Any] = {
            "apiVersion": "apps/v1",
            "kind": kind,
            "metadata": {"name": "gpu-app", "namespace": A, "labels": {QUEUE_LABEL: A}},
            "spec": {
                "selector": {"matchLabels": {"app": "gpu-app"}},
                "template": {"metadata": {"labels": {"app": "gpu-app"}}, "spec": {**spec, "restartPolicy": "Always"}},
            },
        }
        if kind == "StatefulSet":
            workload["spec"]["serviceName"] = "gpu-app"
        wait_until_refused(kube, workload, who, "not managed by Kueue here")
        cpu_only = json.loads(json.dumps(workload))
        cpu_only["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "100m"}}
        kube.create(cpu_only, as_=who, dry_run=True)

    # 3. a DRA claim asks for a GPU as much as an extended resource does
    claimed = job(A, "claimed", None, {})
    claimed["spec"]["template"]["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "gpu"}]
    with pytest.raises(ApiError) as err:
        kube.create(claimed, as_=who, dry_run=True)
    assert err.value.status == 403 and f"add the label {QUEUE_LABEL}: {A}" in err.value.message
    claimed["metadata"]["labels"] = {QUEUE_LABEL: A}
    kube.create(claimed, as_=who, dry_run=True)

    # 2. the queue label cannot be removed from (or added to) a Job after creation
    kube.create(job(A, "relabel-queued", A, {}), as_=who)
    kube.create(job(A, "relabel-bare", None, {}), as_=who)
    try:
        for name, patch in (("relabel-queued", {QUEUE_LABEL: None}), ("relabel-bare", {QUEUE_LABEL: A})):
            with pytest.raises(ApiError) as err:
                kube.patch("batch/v1", "Job", name, A, {"metadata": {"labels": patch}}, as_=who)
            assert err.value.status == 403 and "cannot be added, changed or removed" in err.value.message
            # the twin: other labels may change
            kube.patch("batch/v1", "Job", name, A, {"metadata": {"labels": {"note": "ok"}}}, as_=who)
    finally:
        for name in ("relabel-queued", "relabel-bare"):
            _delete_job(kube, A, name)
        # nothing of this test left to count against vision's quota in the tests after it
        kube.wait_for(
            "the test's Jobs and Workloads gone",
            lambda: (
                not [
                    o
                    for o in kube.list("batch/v1", "Job", A) + kube.list(KUEUE_API, "Workload", A)
                    if "relabel-" in json.dumps(o["metadata"]) or "by-controller" in json.dumps(o["metadata"])
                ]
            ),
            90,
        )


def test_a_team_can_never_be_admitted_with_anothers_partition_resource(kueue: tuple[ControlPlane, Kueue]) -> None:
    kube = kueue[0].kube
    own, foreign = sriov_resource(int(TEAMS[A].partition.pkey)), sriov_resource(int(TEAMS[B].partition.pkey))  # type: ignore[union-attr]
    kube.create(job(A, "vf-own", A, {own: "1"}))
    kube.create(job(A, "vf-foreign", A, {foreign: "1"}))
    try:
        kube.wait_for("vision's Job with its own VF admitted", lambda: admitted(kube, A, "vf-") == ["vf-own"], 90)

        def refused_by_kueue() -> str | None:
            w = workload_of(kube, A, "vf-foreign")
            for c in (w or {}).get("status", {}).get("conditions") or []:
                if c["type"] == "QuotaReserved" and c["status"] == "False" and foreign in c.get("message", ""):
                    return str(c["message"])
            return None

        message = kube.wait_for("Kueue refuses the foreign VF", refused_by_kueue, 90)
        # Kueue's reason for a resource no flavor of the ClusterQueue covers
        # (pkg/scheduler/flavorassigner/flavorassigner.go, v0.19.2)
        assert f"resource {foreign} unavailable in ClusterQueue" in message, message
        assert admitted(kube, A, "vf-") == ["vf-own"], "the foreign VF never gets admitted"
        cq = kube.get(KUEUE_API, "ClusterQueue", A) or {}
        covered = {r for g in cq["spec"]["resourceGroups"] for r in g["coveredResources"]}
        assert own in covered and foreign not in covered
    finally:
        for name in ("vf-own", "vf-foreign"):
            _delete_job(kube, A, name)
        kube.wait_for(
            "vf Jobs gone",
            lambda: not [j for j in kube.list("batch/v1", "Job", A) if j["metadata"]["name"].startswith("vf-")],
        )


def test_idle_gpus_are_borrowed_and_reclaimed_by_their_owners(kueue: tuple[ControlPlane, Kueue]) -> None:
    kube = kueue[0].kube
    four = {GPU: "4"}
    # 1. vision asks for 24 GPUs while language and speech idle: 12 guaranteed + 8 borrowed = 20.
    for i in range(6):
        kube.create(job(A, f"burst-{i}", A, four), as_=member(TEAMS[A]))
    # (which five: Kueue's order among Jobs created within one second is its own)
    kube.wait_for("20 of vision's GPUs admitted", lambda: len(admitted(kube, A, "burst-")) == 5, 120)
    kube.wait_for("vision borrows 8", lambda: _gpu_usage(kube, A) == {"total": "20", "borrowed": "8"}, 60)
    borrowed = admitted(kube, A, "burst-")
    (waiting,) = {f"burst-{i}" for i in range(6)} - set(borrowed)
    w = workload_of(kube, A, waiting)
    assert w is not None and _condition(w, "QuotaReserved") != "True", "the borrowing limit holds the sixth back"
    assert admitted(kube, A, "burst-") == borrowed

    # 2. language and speech submit their guaranteed shares: the cohort needs its lent GPUs back.
    for i in range(3):
        kube.create(job(B, f"share-{i}", B, four), as_=member(TEAMS[B]))
    for i in range(2):
        kube.create(job(C, f"share-{i}", C, four), as_=member(TEAMS[C]))
    kube.wait_for("language's 12 admitted", lambda: len(admitted(kube, B, "share-")) == 3, 180)
    kube.wait_for("speech's 8 admitted", lambda: len(admitted(kube, C, "share-")) == 2, 180)
    kube.wait_for("vision back to its 12", lambda: len(admitted(kube, A, "burst-")) == 3, 60)
    # (ClusterQueue status is written a moment after admission changes)
    kube.wait_for("vision borrows nothing", lambda: _gpu_usage(kube, A) == {"total": "12", "borrowed": "0"}, 60)
    after_reclaim = admitted(kube, A, "burst-")

    # The two preempted were vision's borrowed Jobs: suspended again, evicted for reclamation.
    preempted = sorted(set(borrowed) - set(admitted(kube, A, "burst-")))
    assert len(preempted) == 2
    for name in preempted:
        j = kube.get("batch/v1", "Job", name, A) or {}
        assert j["spec"]["suspend"] is True
        w = workload_of(kube, A, name) or {}
        reasons = {c["type"]: (c["status"], c.get("reason", "")) for c in w.get("status", {}).get("conditions") or []}
        assert reasons.get("Preempted", ("", ""))[1] == "InCohortReclamation", json.dumps(reasons)
    # Nothing of the cohort is lent that is not there: 12 + 12 + 8 of h100-full's 32.
    usage = kube.wait_for(
        "the ClusterQueues' status shows the cohort full",
        lambda: (u := {t: _gpu_usage(kube, t)["total"] for t in (A, B, C)}) == {A: "12", B: "12", C: "8"} and u,
        60,
    )
    assert sum(int(n) for n in usage.values()) == 32

    # 3. Within a team, priority decides (preemption.withinClusterQueue: LowerPriority): a
    #    production Job of vision preempts one of its own default-priority Jobs, not another team's.
    urgent = job(A, "urgent", A, four)
    urgent["metadata"]["labels"][PRIORITY_LABEL] = "production"
    kube.create(urgent, as_=member(TEAMS[A]))
    kube.wait_for("the production Job admitted", lambda: admitted(kube, A, "urgent") == ["urgent"], 120)
    kube.wait_for("vision still at its 12", lambda: len(admitted(kube, A, "burst-")) == 2, 60)
    assert len(admitted(kube, B, "share-")) == 3 and len(admitted(kube, C, "share-")) == 2
    evicted = set(after_reclaim) - set(admitted(kube, A, "burst-"))
    (name,) = evicted
    conditions = (workload_of(kube, A, name) or {}).get("status", {}).get("conditions") or []
    assert any(c["type"] == "Preempted" and c.get("reason") == "InClusterQueue" for c in conditions), conditions
