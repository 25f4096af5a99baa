"""Kueue with its webhooks registered: the real chart, the real manager, the API server calling both.

The onprem plan on a real API server, with Kueue's Helm release installed by Helm at its place in
the plan (the chart v0.19.2 from the e2e's chart mirror, ../shared/upstream/charts, with our values)
and Kueue's manager serving the chart's webhooks on loopback (e2e/kueue.py lists everything the
e2e changes for that). So the objects after the release — flavors, priority classes, ClusterQueues,
LocalQueues — pass Kueue's own validating webhooks, and every Job and pod of a team namespace
passes Kueue's mutating ones, as on a cluster.

Then the attack of #21 item 2 as a regression, and which of our guards still matter once Kueue's
webhooks are there:

- a Job with the team's queue label is suspended by Kueue's webhook on create (nobody submits it
  suspended), and counted (a Workload); a Job without the label is not Kueue's;
- a bare pod with the queue label is gated by Kueue's pod webhook (``kueue.x-k8s.io/admission``);
  the same pod claiming that held Job as its controller is **not**: Kueue skips it as the Job's
  child (v0.19.2 pod_webhook.go, ``FindAncestorJobManagedByKueue``), so it would run outside the
  queue with nothing to count it. Kueue alone leaves this hole; ``gpuaas-team-queue-owners``
  (components/queueing/controllers.py) closes it for team identities;
- unsuspending the held Job is accepted by Kueue's webhooks (Kueue re-suspends it later, its pods
  run in between); ``gpuaas-team-queue-suspend-jobs`` refuses it for team identities.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest

from components.loader import parse_config
from components.model.config import StackConfig
from components.model.resources import GPU
from components.plan.writer import HELM_RELEASE
from components.queueing import queues
from components.queueing.admission import QUEUE_LABEL
from components.queueing.controllers import kueue_identity
from e2e.controlplane import KCM_USER, ControlPlane
from e2e.engine import mirror
from e2e.kube import ApiError, Identity, Kube
from e2e.kueue import SERVICE_ACCOUNT, VISIBILITY_APISERVICES, WEBHOOK_CONFIGS, KueueManager
from e2e.plan_apply import Applied, HelmReleases, apply_plan
from tests.conftest import offline_run, raw_stack
from tests.e2e.conftest import _say, need_upstream, start_plane
from tests.e2e.jobs import queued_job
from tests.e2e.settle import job_gone

CFG: Final[StackConfig] = parse_config(raw_stack("onprem"))
TEAMS: Final = {t.name: t for t in CFG.teams}
A: Final = "vision"
WHO: Final = Identity(f"member-of-{A}@example.com", tuple(TEAMS[A].groups))
#: Who our queue guards exempt: kube-controller-manager (the Job controller's user here, in
#: system:masters as e2e/controlplane.py signs it in). What it sends meets Kueue's webhooks alone.
CONTROLLER: Final = Identity(KCM_USER, ("system:masters", "system:authenticated"))
#: Who releases a held workload: Kueue's manager (its ServiceAccount; the suspend guard lets it alone).
KUEUE: Final = Identity(
    kueue_identity(CFG.queues),
    ("system:serviceaccounts", f"system:serviceaccounts:{CFG.queues.namespace}", "system:authenticated"),
)
#: More GPUs than the fleet has: Kueue never admits it, so it stays held.
NEVER: Final = {GPU: "64"}
GATE: Final = "kueue.x-k8s.io/admission"


class Queued:
    def __init__(self, cp: ControlPlane, manager: KueueManager, applied: list[Applied], helm: HelmReleases) -> None:
        self.cp, self.manager, self.applied, self.helm = cp, manager, applied, helm

    @property
    def kube(self) -> Kube:
        return self.cp.kube


@pytest.fixture(scope="module")
def queued(pytestconfig: pytest.Config) -> Iterator[Queued]:
    need_upstream()
    cp = start_plane(pytestconfig, "onprem plan with Kueue's chart and webhooks")
    try:
        with KueueManager(cp.kube, CFG.queues.namespace) as manager:
            helm = HelmReleases(
                cp.kubeconfig, mirror(), wait=False, only={queues.RELEASE}, after={queues.RELEASE: manager.wait_ready}
            )
            applied = apply_plan(cp.kube, offline_run("onprem"), releases=helm)
            _say(
                pytestconfig,
                f"e2e: kueue: chart installed by Helm in {helm.installed[queues.RELEASE]:.1f} s, "
                f"{len(applied)} objects applied through Kueue's webhooks; e2e patches: {len(manager.patched)}",
            )
            yield Queued(cp, manager, applied, helm)
    finally:
        cp.stop()


def job(name: str, queue: str | None, limits: dict[str, str], suspend: bool = False) -> dict[str, Any]:
    """A one-pod Job as a team member writes it: not suspended (Kueue's webhook decides)."""
    return queued_job(A, name, queue, limits, suspend)


def pod(name: str, labels: dict[str, str], owner: dict[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": A, "labels": labels}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": job("x", None, {GPU: "1"})["spec"]["template"]["spec"],
    }


def delete_job(kube: Kube, name: str) -> None:
    job_gone(kube, A, name)


def gates(obj: dict[str, Any]) -> list[str]:
    return [g["name"] for g in obj["spec"].get("schedulingGates") or []]


# --------------------------------------------------------------------------------------------


def test_the_chart_is_installed_and_the_api_server_calls_kueues_webhooks(queued: Queued) -> None:
    kube, manager = queued.kube, queued.manager
    # Every webhook of the chart's two configurations calls the manager's port, through the chart's
    # Service (an ExternalName here), with the one CA Kueue's cert rotator made for this run.
    cas = set()
    for kind, name in WEBHOOK_CONFIGS:
        hooks = (kube.get("admissionregistration.k8s.io/v1", kind, name) or {})["webhooks"]
        assert len(hooks) > 10, (kind, len(hooks))
        services = {(h["clientConfig"]["service"]["name"], h["clientConfig"]["service"]["port"]) for h in hooks}
        assert services == {("kueue-webhook-service", manager.webhook_port)}, services
        cas |= {h["clientConfig"]["caBundle"] for h in hooks}
    assert len(cas) == 1 and cas != {""}, "one CA, injected by Kueue's cert rotator"
    assert manager.patched, "the e2e's changes, listed"
    # The visibility API is not served here (e2e patch 3), and nothing else the chart made is missing.
    for name in VISIBILITY_APISERVICES:
        assert kube.get("apiregistration.k8s.io/v1", "APIService", name) is None
    assert kube.get("v1", "ServiceAccount", SERVICE_ACCOUNT, CFG.queues.namespace) is not None
    # The manager runs as the chart's ServiceAccount, with the chart's RBAC: it reconciles.
    for team in TEAMS:
        kube.wait_for(
            f"ClusterQueue {team} active",
            lambda team=team: _condition(kube.get(queues.API, "ClusterQueue", team), "Active") == "True",
            120,
        )
    # Everything the plan registers after the release went through Kueue's validating webhooks.
    kinds = {a.planned.obj["kind"] for a in queued.applied if a.planned.obj["apiVersion"] == queues.API}
    assert {"ResourceFlavor", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass"} <= kinds
    # ... which do refuse what Kueue refuses: a ClusterQueue whose namespaceSelector Kubernetes
    # could not parse (its CRD takes any map there; Kueue's webhook validates it as a LabelSelector).
    bad = {
        "apiVersion": queues.API,
        "kind": "ClusterQueue",
        "metadata": {"name": "e2e-bad-selector"},
        "spec": {"namespaceSelector": {"matchExpressions": [{"key": "a", "operator": "Sometimes"}]}},
    }
    with pytest.raises(ApiError) as err:
        kube.create(bad, dry_run=True)
    assert 'admission webhook "vclusterqueue.kb.io" denied the request' in err.value.message, err.value.message
    good = {**bad, "spec": {"namespaceSelector": {"matchExpressions": [{"key": "a", "operator": "Exists"}]}}}
    kube.create(good, dry_run=True)


def test_a_queued_job_is_suspended_by_kueues_webhook_on_create(queued: Queued) -> None:
    kube = queued.kube
    try:
        stored = kube.create(job("held", A, NEVER), as_=WHO)
        assert stored["spec"]["suspend"] is True, "Kueue's mjob webhook suspends a queued Job on create"
        kube.wait_for(
            "the held Job's Workload",
            lambda: [w for w in kube.list(queues.API, "Workload", A) if _owned_by(w, "held")],
            60,
        )
        # The twin: a CPU-only Job without the queue label is not Kueue's (manageJobsWithoutQueueName off).
        free = kube.create(job("not-queued", None, {}), as_=WHO, dry_run=True)
        assert free["spec"]["suspend"] is False
    finally:
        delete_job(kube, "held")


def test_kueue_skips_a_pod_that_claims_a_held_job_as_its_controller(queued: Queued) -> None:
    """The hole of #21 item 2 with Kueue's webhooks on: Kueue gates a queued bare pod, but not one
    that names a Kueue-managed Job as its controller. Who sends it: our guards exempt the
    controller identity, so only Kueue's webhooks judge it."""
    kube = queued.kube
    try:
        held = kube.create(job("owner", A, NEVER), as_=WHO)
        assert held["spec"]["suspend"] is True
        labels = {QUEUE_LABEL: A}
        gated = kube.create(pod("bare", labels), as_=CONTROLLER, dry_run=True)
        assert GATE in gates(gated), "Kueue's pod webhook gates a queued bare pod"
        owner = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": "owner",
            "uid": held["metadata"]["uid"],
            "controller": True,
        }
        forged = kube.create(pod("forged", labels, owner), as_=CONTROLLER, dry_run=True)
        assert GATE not in gates(forged), "Kueue skips the child of a Job it manages: nothing gates this pod"
        # So our guard must refuse it for the team's own identities.
        with pytest.raises(ApiError) as err:
            kube.create(pod("forged", labels, owner), as_=WHO, dry_run=True)
        assert err.value.status == 403
        assert "gpuaas-team-queue-owners" in err.value.message, err.value.message
    finally:
        delete_job(kube, "owner")


def test_kueues_webhooks_accept_unsuspending_a_held_job_and_our_guard_refuses_it(queued: Queued) -> None:
    kube = queued.kube
    try:
        kube.create(job("unsuspend", A, NEVER), as_=WHO)
        # Kueue's webhooks alone (Kueue's own identity, which our suspend guard exempts): accepted.
        kube.request(
            "PATCH",
            kube.resource("batch/v1", "Job").path(A, "unsuspend"),
            {"spec": {"suspend": False}},
            content_type="application/merge-patch+json",
            query={"dryRun": "All"},
            as_=KUEUE,
        )
        # A team member: refused by our guard.
        with pytest.raises(ApiError) as err:
            kube.patch("batch/v1", "Job", "unsuspend", A, {"spec": {"suspend": False}}, as_=WHO)
        assert err.value.status == 403
        assert "gpuaas-team-queue-suspend" in err.value.message, err.value.message
        assert (kube.get("batch/v1", "Job", "unsuspend", A) or {})["spec"]["suspend"] is True
    finally:
        delete_job(kube, "unsuspend")


def test_the_helm_release_is_the_plans(queued: Queued) -> None:
    """What Helm installed is the plan's release: its values, from the mirror's chart at the pinned version."""
    (rec,) = [r for r in offline_run("onprem").records if r.type == HELM_RELEASE and r.inputs["name"] == queues.RELEASE]
    out = queued.cp.kubectl("get", "secret", "-n", CFG.queues.namespace, "-l", "owner=helm,name=kueue", "-o", "json")
    (secret,) = json.loads(out.stdout)["items"]
    assert secret["metadata"]["labels"]["status"] == "deployed"
    assert Path(queued.helm.chart(rec)).name == "kueue-v0.19.2"


def _condition(obj: dict[str, Any] | None, kind: str) -> str | None:
    for c in (obj or {}).get("status", {}).get("conditions") or []:
        if c["type"] == kind:
            return str(c["status"])
    return None


def _owned_by(obj: dict[str, Any], name: str) -> bool:
    return any(o.get("name") == name for o in obj["metadata"].get("ownerReferences") or [])
