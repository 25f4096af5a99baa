"""Queued work stays in the queue: the onprem plan on a real API server, with Kueue's own manager.

Issue 21, items 2, 3, 7 and 8, each as a team member of vision (impersonated with the team's OIDC
group) against the real admission chain and RBAC authorizer, each refusal with the refusing
policy's name and the server's own words, beside its allowed twin:

- a bare GPU pod, labelled with the team's queue, claiming a held Job as its controller (Kueue
  would skip it as that Job's child) is refused by ``gpuaas-team-queue-owners``; the Job
  controller's own pod of a released Job is admitted;
- a member setting ``suspend: false`` on a held Job or JobSet is refused by
  ``gpuaas-team-queue-suspend-*``; Kueue's manager, signed in as its ServiceAccount, releases an
  admissible Job (and the same patch as Kueue's identity passes);
- the team role reads its LocalQueue and Workloads (why a Job waits) and writes JobSets,
  PyTorchJobs and MPIJobs, and nothing more (SubjectAccessReviews and real requests);
- a GPU Deployment made before elastic quotas still rolls out: the deployment controller's new
  ReplicaSet and its pods are admitted; a new one without the queue label, or a bare GPU
  ReplicaSet, is refused.

Every guard is also type-checked by kube-controller-manager against the real schemas (the JobSet,
PyTorchJob and MPIJob CRDs from their modules) with no warning.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any, Final

import pytest

from components.model.resources import GPU
from components.queueing import controllers, suspend
from components.queueing.admission import QUEUE_LABEL, policy_name, queue_admission_objects
from components.tenancy.labels import PART_OF
from e2e.controlplane import ControlPlane
from e2e.kube import ApiError, Identity, Kube
from tests.conftest import offline_run
from tests.e2e.conftest import wait_until_refused
from tests.e2e.kueue_manager import CFG, KUEUE_API, Kueue, condition, delete_job, job, kueue_plane, member, workload_of

TEAMS: Final = {t.name: t for t in CFG.teams}
A, B = "vision", "language"
WHO: Final = member(TEAMS[A])
#: More GPUs than the fleet has: Kueue never admits it, so it stays held for as long as a test needs.
NEVER: Final = {GPU: "64"}


@pytest.fixture(scope="module")
def kueue(pytestconfig: pytest.Config) -> Iterator[tuple[ControlPlane, Kueue]]:
    yield from kueue_plane(pytestconfig, "onprem plan with Kueue (held work)", offline_run("onprem"))


@pytest.fixture
def kube(kueue: tuple[ControlPlane, Kueue]) -> Kube:
    return kueue[0].kube


def refused(call: Any) -> ApiError:
    with pytest.raises(ApiError) as err:
        call()
    assert err.value.status == 403, err.value
    return err.value


def by_policy(name: str) -> str:
    return f"ValidatingAdmissionPolicy '{name}' with binding '{name}' denied request"


def _gone(kube: Kube, api_version: str, kind: str, ns: str, names: list[str]) -> None:
    kube.wait_for(f"{kind}s {names} gone", lambda: not [n for n in names if kube.get(api_version, kind, n, ns)], 90)


def jobset(name: str, queue: str, limits: dict[str, str]) -> dict[str, Any]:
    template = job(A, "x", None, limits)["spec"]
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": A, "labels": {QUEUE_LABEL: queue}},
        "spec": {"suspend": True, "replicatedJobs": [{"name": "main", "replicas": 1, "template": {"spec": template}}]},
    }


# --------------------------------------------------------------------------------------------


def test_every_guard_type_checks_against_the_real_schemas(kube: Kube) -> None:
    """kube-controller-manager's validatingadmissionpolicy-status controller checks each expression
    against the kinds it matches (the JobSet and Kubeflow CRDs included) and reports any warning."""
    expected = {
        m["metadata"]["name"]
        for m in queue_admission_objects(CFG.queues).values()
        if m["kind"] == "ValidatingAdmissionPolicy"
    }
    assert {controllers.OWNERS_POLICY, f"{suspend.SUSPEND_POLICY}-jobsets", policy_name("replicasets")} <= expected

    def checked() -> dict[str, Any] | None:
        out = {}
        for p in kube.list("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"):
            status = p.get("status") or {}
            if p["metadata"].get("labels", {}).get("app.kubernetes.io/part-of") != PART_OF["app.kubernetes.io/part-of"]:
                continue
            if status.get("observedGeneration") != p["metadata"]["generation"] or "typeChecking" not in status:
                return None
            out[p["metadata"]["name"]] = status["typeChecking"].get("expressionWarnings") or []
        return out

    warnings = kube.wait_for("every policy type-checked", checked, 120)
    assert expected <= set(warnings)
    assert not {n: w for n, w in warnings.items() if w}, json.dumps({n: w for n, w in warnings.items() if w})[:3000]


def test_a_pod_claiming_a_held_job_as_its_controller_is_refused(kube: Kube) -> None:
    """Item 2, the attack as the issue reproduced it: Kueue's pod webhook skips a pod whose controller
    is a Job it manages (FindAncestorJobManagedByKueue), so the pod would hold GPUs outside the queue."""
    held = kube.create(job(A, "attack-held", A, NEVER), as_=WHO)
    released = "attack-released"
    try:
        pod: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "attack",
                "namespace": A,
                "labels": {QUEUE_LABEL: A},
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": "attack-held",
                        "uid": held["metadata"]["uid"],
                        "controller": True,
                    }
                ],
            },
            "spec": held["spec"]["template"]["spec"]
            | {
                "containers": [
                    {**held["spec"]["template"]["spec"]["containers"][0], "resources": {"limits": {GPU: "1"}}}
                ]
            },
        }
        wait_until_refused(kube, pod, WHO, "only workload controllers set a controller ownerReference")
        err = refused(lambda: kube.create(pod, as_=WHO))
        assert by_policy(controllers.OWNERS_POLICY) in err.message, err.message
        assert f"member-of-{A}@example.com is not one of them (gpuaas:queues.controllers)" in err.message
        # the twin: the same pod without the ownerReference (queued by Kueue's pod integration)
        plain = json.loads(json.dumps(pod))
        del plain["metadata"]["ownerReferences"]
        kube.create(plain, as_=WHO, dry_run=True)
        # ... and the Job controller's own pod of a released Job, its controller the Job
        owner = kube.create(job(A, released, A, {GPU: "1"}, suspend=False), as_=WHO)
        pods = kube.wait_for(
            "the Job controller's pod",
            lambda: [
                p
                for p in kube.list("v1", "Pod", A)
                if any(
                    o.get("uid") == owner["metadata"]["uid"] and o.get("controller")
                    for o in p["metadata"].get("ownerReferences", [])
                )
            ],
            60,
        )
        assert pods[0]["spec"]["containers"][0]["resources"]["limits"][GPU] == "1"
    finally:
        for name in ("attack-held", released):
            delete_job(kube, A, name)
        _gone(kube, "batch/v1", "Job", A, ["attack-held", released])


def test_a_member_cannot_release_a_held_job_only_kueue_can(kube: Kube) -> None:
    """Item 3: ``kubectl patch job held -p '{"spec":{"suspend":false}}'`` by the team is refused."""
    kube.create(job(A, "held", A, NEVER), as_=WHO)
    kube.create(jobset("held-set", A, NEVER), as_=WHO)
    try:
        kube.wait_for(
            "Kueue holds the Job", lambda: condition(workload_of(kube, A, "held"), "QuotaReserved") == "False", 90
        )
        release = {"spec": {"suspend": False}}
        err = refused(lambda: kube.patch("batch/v1", "Job", "held", A, release, as_=WHO))
        assert by_policy(f"{suspend.SUSPEND_POLICY}-jobs") in err.message, err.message
        assert "jobs in a team namespace are released by Kueue alone" in err.message
        err = refused(lambda: kube.patch("jobset.x-k8s.io/v1alpha2", "JobSet", "held-set", A, release, as_=WHO))
        assert by_policy(f"{suspend.SUSPEND_POLICY}-jobsets") in err.message, err.message
        # twins: the member may still label it, and suspend it (give quota back) ...
        kube.patch("batch/v1", "Job", "held", A, {"metadata": {"labels": {"note": "waiting"}}}, as_=WHO)
        kube.patch("batch/v1", "Job", "held", A, {"spec": {"suspend": True}}, as_=WHO)
        assert (kube.get("batch/v1", "Job", "held", A) or {})["spec"]["suspend"] is True
        # ... and Kueue's own identity may release it (dry run: it stays held for the other checks)
        sa = controllers.kueue_identity(CFG.queues)
        kueue_sa = Identity(sa, ("system:serviceaccounts", f"system:serviceaccounts:{CFG.queues.namespace}"))
        path = kube.resource("batch/v1", "Job").path(A, "held")
        query = {"dryRun": "All"}
        out = kube.request(
            "PATCH", path, release, content_type="application/merge-patch+json", query=query, as_=kueue_sa
        )
        assert out["spec"]["suspend"] is False
        # For real: the manager, signed in as that ServiceAccount, releases an admissible Job.
        kube.create(job(A, "admissible", A, {}), as_=WHO)
        kube.wait_for(
            "Kueue releases the admissible Job",
            lambda: (kube.get("batch/v1", "Job", "admissible", A) or {}).get("spec", {}).get("suspend") is False,
            90,
        )
    finally:
        for name in ("held", "admissible"):
            delete_job(kube, A, name)
        with contextlib.suppress(ApiError):
            kube.delete("jobset.x-k8s.io/v1alpha2", "JobSet", "held-set", A)
        _gone(kube, "batch/v1", "Job", A, ["held", "admissible"])


def test_the_team_role_gives_what_the_readme_promises(kube: Kube) -> None:
    """Item 7, by the RBAC authorizer (SubjectAccessReview) and by real requests."""
    for group, resource in (
        ("jobset.x-k8s.io", "jobsets"),
        ("kubeflow.org", "pytorchjobs"),
        ("kubeflow.org", "mpijobs"),
    ):
        for verb in ("create", "get", "list", "watch", "update", "patch", "delete"):
            assert kube.can_i(verb, resource, A, WHO, group=group), (verb, resource)
            assert not kube.can_i(verb, resource, B, WHO, group=group), (verb, resource, B)
    for resource in ("workloads", "localqueues"):
        for verb in ("get", "list", "watch"):
            assert kube.can_i(verb, resource, A, WHO, group="kueue.x-k8s.io"), (verb, resource)
            assert not kube.can_i(verb, resource, B, WHO, group="kueue.x-k8s.io"), (verb, resource, B)
        for verb in ("create", "update", "patch", "delete"):
            assert not kube.can_i(verb, resource, A, WHO, group="kueue.x-k8s.io"), (verb, resource)
        assert not kube.can_i("update", f"{resource}", A, WHO, group="kueue.x-k8s.io", sub="status")
    # nothing more: no ClusterQueue, no other Kubeflow kind, no Workload written
    assert not kube.can_i("list", "clusterqueues", None, WHO, group="kueue.x-k8s.io")
    assert not kube.can_i("create", "tfjobs", A, WHO, group="kubeflow.org")
    # real requests: the member reads why its Job waits ...
    kube.create(job(A, "waits", A, NEVER), as_=WHO)
    try:
        kube.wait_for(
            "Kueue holds it", lambda: condition(workload_of(kube, A, "waits"), "QuotaReserved") == "False", 90
        )
        seen = kube.list(KUEUE_API, "Workload", A, as_=WHO)
        (mine,) = [w for w in seen if any(o.get("name") == "waits" for o in w["metadata"].get("ownerReferences", []))]
        reasons = [c for c in mine["status"]["conditions"] if c["type"] == "QuotaReserved"]
        assert reasons and reasons[0]["status"] == "False" and GPU in reasons[0]["message"], reasons
        assert [q["metadata"]["name"] for q in kube.list(KUEUE_API, "LocalQueue", A, as_=WHO)] == [A]
        err = refused(lambda: kube.list(KUEUE_API, "Workload", B, as_=WHO))
        assert f'cannot list resource "workloads" in API group "kueue.x-k8s.io" in the namespace "{B}"' in err.message
    finally:
        delete_job(kube, A, "waits")
        _gone(kube, "batch/v1", "Job", A, ["waits"])
    # ... and runs a PyTorchJob through its queue, never in another team's namespace
    ptj = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "train", "namespace": A, "labels": {QUEUE_LABEL: A}},
        "spec": {
            "runPolicy": {"suspend": True},
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": {"spec": job(A, "x", None, {})["spec"]["template"]["spec"]}}
            },
        },
    }
    kube.create(ptj, as_=WHO, dry_run=True)
    moved = json.loads(json.dumps(ptj))
    moved["metadata"] |= {"namespace": B, "labels": {QUEUE_LABEL: B}}
    err = refused(lambda: kube.create(moved, as_=WHO, dry_run=True))
    assert f'cannot create resource "pytorchjobs" in API group "kubeflow.org" in the namespace "{B}"' in err.message


def _deployment(name: str, limits: dict[str, str], queue: str | None = None) -> dict[str, Any]:
    spec = job(A, "x", None, limits)["spec"]["template"]["spec"] | {"restartPolicy": "Always"}
    meta: dict[str, Any] = {"name": name, "namespace": A}
    if queue is not None:
        meta["labels"] = {QUEUE_LABEL: queue}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": spec},
        },
    }


def test_a_rollout_of_a_gpu_deployment_made_before_elastic_quotas_is_not_trapped(kube: Kube) -> None:
    """Item 8: turning elastic quotas on must not wedge a GPU Deployment that predates them. Its
    rollout's new ReplicaSet comes from the deployment controller for that Deployment (kind and
    identity together), so it passes; the team cannot make such a ReplicaSet itself."""
    name = "legacy-gpu"
    binding = queue_admission_objects(CFG.queues)["deployments-queue-binding"]
    assert kube.get("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding", policy_name("deployments"))
    legacy = _deployment(name, {GPU: "1"})
    # Before elastic quotas: no queue guard on Deployments (its binding taken away for the moment).
    kube.delete("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding", policy_name("deployments"))
    try:
        kube.wait_for("Deployments unguarded", lambda: _admitted(kube, legacy), 60)
        kube.create(legacy, as_=WHO)
    finally:
        kube.apply(binding, manager="gpuaas-plan")  # elastic quotas turned on
    try:
        wait_until_refused(kube, _deployment("new-gpu", {GPU: "1"}), WHO, f"add the label {QUEUE_LABEL}: {A}")
        first = kube.wait_for("the first ReplicaSet's pod", lambda: _pods_of(kube, name), 90)
        # The rollout: a template change; the deployment controller creates a second ReplicaSet.
        patch = {"spec": {"template": {"metadata": {"annotations": {"gpuaas.io/rollout": "2"}}}}}
        kube.patch("apps/v1", "Deployment", name, A, patch, as_=WHO)
        sets = kube.wait_for(
            "the rollout's new ReplicaSet",
            lambda: rs if len(rs := _replica_sets(kube, name)) == 2 else None,
            90,
        )
        new = max(sets, key=lambda r: int(r["metadata"]["annotations"]["deployment.kubernetes.io/revision"]))
        assert new["metadata"]["ownerReferences"][0]["kind"] == "Deployment"
        kube.wait_for(
            "the new ReplicaSet's pod",
            lambda: [
                p
                for p in _pods_of(kube, name)
                if p["metadata"]["labels"]["pod-template-hash"] == new["metadata"]["labels"]["pod-template-hash"]
            ],
            90,
        )
        assert first
        # The twins: a new unlabelled GPU Deployment, and a bare GPU ReplicaSet of the member, are refused.
        err = refused(lambda: kube.create(_deployment("new-gpu", {GPU: "1"}), as_=WHO, dry_run=True))
        assert by_policy(policy_name("deployments")) in err.message
        kube.create(_deployment("new-gpu", {GPU: "1"}, queue=A), as_=WHO, dry_run=True)
        bare = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": "bare-gpu", "namespace": A, "labels": {QUEUE_LABEL: A}},
            "spec": _deployment("bare-gpu", {GPU: "1"})["spec"],
        }
        err = refused(lambda: kube.create(bare, as_=WHO, dry_run=True))
        assert (
            by_policy(policy_name("replicasets")) in err.message and "Kueue has no integration for them" in err.message
        )
    finally:
        path = kube.resource("apps/v1", "Deployment").path(A, name)
        with contextlib.suppress(ApiError):
            kube.request("DELETE", path, {"propagationPolicy": "Foreground"})
        kube.wait_for(
            "the legacy Deployment and its pods gone",
            lambda: not _pods_of(kube, name) and not kube.get("apps/v1", "Deployment", name, A),
            120,
        )


def _admitted(kube: Kube, obj: dict[str, Any]) -> bool:
    try:
        kube.create(obj, as_=WHO, dry_run=True)
    except ApiError:
        return False
    return True


def _replica_sets(kube: Kube, app: str) -> list[dict[str, Any]]:
    return kube.list("apps/v1", "ReplicaSet", A, selector=f"app={app}")


def _pods_of(kube: Kube, app: str) -> list[dict[str, Any]]:
    return kube.list("v1", "Pod", A, selector=f"app={app}")
