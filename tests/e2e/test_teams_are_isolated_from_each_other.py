"""Team isolation on the onprem stack, proven by the real API server, for every ordered pair A != B.

Each refusal is made as a member of A (impersonating a user in A's groups, as an OIDC login
would carry them) and asserts the server's own reason: the ValidatingAdmissionPolicy's message,
the ResourceQuota admission's, Pod Security's, or the RBAC authorizer's. Beside every refusal
stands the allowed case, so the suite cannot pass by refusing everything. Refusals are sent as
``dryRun=All`` creates: the whole admission chain runs, nothing is stored.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import pytest

from components.loader import parse_config
from components.model.config import StackConfig
from components.model.elastic import gpu_kind
from components.model.resources import GPU, GPU_SHARED, mig_resource, sriov_resource
from components.model.teams import Team
from components.queueing.admission import QUEUE_LABEL
from components.queueing.queues import local_queue_name
from components.tenancy.network_admission import NETWORKS_ANNOTATION, NETWORKS_IMMUTABLE_POLICY, NETWORKS_POLICY
from components.tenancy.networks import nad_name
from components.tenancy.teams import NO_CRITICAL_QUOTA, SYSTEM_PRIORITY_CLASSES
from e2e.kube import ApiError, Identity, Kube
from tests.conftest import raw_stack
from tests.e2e.conftest import AppliedStack, wait_until_refused

# Also run on the oldest supported Kubernetes minor (`make e2e`; pyproject.toml's markers).
pytestmark = pytest.mark.every_minor

CFG: StackConfig = parse_config(raw_stack("onprem"))
TEAMS = {t.name: t for t in CFG.teams}
PAIRS = [(a, b) for a, b in itertools.permutations(TEAMS, 2)]
# The tests use a team's name as its namespace, as the tests' stacks do.
assert all(t.ns == t.name for t in CFG.teams)
OWN_NAD_ONLY = "may reference NetworkAttachmentDefinitions of the pod's own namespace only"


def member(team: Team) -> Identity:
    return Identity(f"member-of-{team.name}@example.com", tuple(team.groups))


def partition_resource(team: Team) -> str:
    return sriov_resource(int(team.partition.pkey))  # type: ignore[union-attr]


def pod(
    ns: str,
    name: str,
    *,
    networks: str | None = None,
    limits: dict[str, Any] | None = None,
    spec: dict[str, Any] | None = None,
    container: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A plain pod as a team member writes it: cpu/memory requests only, extended resources as limits.

    With elastic quotas a GPU or RDMA pod names its team's queue (components/queueing/admission.py refuses
    it otherwise; tests/e2e/test_elastic_quotas_lend_and_reclaim.py proves that refusal and Kueue's admission).
    """
    c: dict[str, Any] = {
        "name": "main",
        "image": "registry.k8s.io/pause:3.10",
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
    }
    if limits:
        c["resources"]["limits"] = {k: str(v) for k, v in limits.items()}
    c.update(container or {})
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if CFG.queues.elastic and any(gpu_kind(r) or r.startswith(("nvidia.com/", "rdma/")) for r in limits or {}):
        meta["labels"] = {QUEUE_LABEL: ns}
    if networks is not None:
        meta["annotations"] = {NETWORKS_ANNOTATION: networks}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": [c], **(spec or {})}}


def refused(kube: Kube, obj: dict[str, Any], who: Identity) -> ApiError:
    with pytest.raises(ApiError) as err:
        kube.create(obj, as_=who, dry_run=True)
    return err.value


@pytest.fixture(scope="module")
def kube(onprem: AppliedStack) -> Iterator[Kube]:
    k = onprem.kube
    # Quota admission needs the controller's status first (else: "status unknown for quota").
    for team in TEAMS:
        k.wait_for(
            f"quota status in {team}",
            lambda team=team: (
                (k.get("v1", "ResourceQuota", "gpuaas-team-quota", team) or {}).get("status", {}).get("hard")
            ),
            timeout=60,
        )
        k.wait_for(
            f"default ServiceAccount in {team}", lambda team=team: k.get("v1", "ServiceAccount", "default", team)
        )
    a, b = PAIRS[0]
    wait_until_refused(k, pod(a, "probe", networks=f"{b}/{nad_name(TEAMS[b])}"), member(TEAMS[a]), OWN_NAD_ONLY)
    yield k


# --------------------------------------------------------------------------------------------
# the allowed side first: an ordinary GPU pod of A, with A's NAD and A's partition, is admitted


@pytest.mark.parametrize("a", list(TEAMS))
def test_a_members_ordinary_gpu_pod_with_its_own_network_is_admitted(kube: Kube, a: str) -> None:
    team = TEAMS[a]
    limits = {partition_resource(team): 1, **_one_gpu_of(team)}
    for form in (nad_name(team), f"{a}/{nad_name(team)}", json.dumps([{"name": nad_name(team), "namespace": a}])):
        created = kube.create(pod(a, "ok", networks=form, limits=limits), as_=member(team), dry_run=True)
        assert created["metadata"]["namespace"] == a
    assert isinstance(kube.list("v1", "Pod", a, as_=member(team)), list), "A's member lists A's pods"


def _one_gpu_of(team: Team) -> dict[str, int]:
    """One unit of the first GPU kind in the team's quota (whole, MIG profile or time-sliced)."""
    q = team.quota
    if q.gpus:
        return {GPU: 1}
    if q.mig:
        return {mig_resource(next(iter(q.mig))): 1}
    if q.time_sliced_gpus:
        return {GPU_SHARED: 1}
    return {}


# --------------------------------------------------------------------------------------------
# networks


def _foreign_network_forms(a: str, b: Team) -> list[str]:
    nad = nad_name(b)
    return [
        json.dumps([{"name": nad, "namespace": b.name}]),
        json.dumps([{"name": nad, "namespace": b.name, "interface": "ib0"}]),
        json.dumps([{"name": nad_name(TEAMS[a]), "namespace": a}, {"name": nad, "namespace": b.name}]),
        f"{b.name}/{nad}",
        f"{b.name}/{nad}@ib0",
        f"{nad_name(TEAMS[a])}, {b.name}/{nad}",
    ]


@pytest.mark.parametrize(("a", "b"), PAIRS)
def test_a_pod_in_a_naming_bs_nad_is_refused_in_every_form(kube: Kube, a: str, b: str) -> None:
    for form in _foreign_network_forms(a, TEAMS[b]):
        err = refused(kube, pod(a, "x", networks=form), member(TEAMS[a]))
        assert err.status == 403 and OWN_NAD_ONLY in err.message, (form, err)
        assert f"ValidatingAdmissionPolicy '{NETWORKS_POLICY}'" in err.message, (form, err)


@pytest.mark.parametrize(("a", "b"), PAIRS)
def test_bs_nad_name_without_a_namespace_resolves_in_a_where_a_cannot_create_it(kube: Kube, a: str, b: str) -> None:
    """``ib-B`` or ``[{"name": "ib-B"}]`` in A means A's namespace (Multus): no such NAD exists there,
    and A's member may not create one, so the name cannot reach B's partition."""
    nad = nad_name(TEAMS[b])
    assert kube.get("k8s.cni.cncf.io/v1", "NetworkAttachmentDefinition", nad, a) is None
    planted = {
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": {"name": nad, "namespace": a},
        "spec": {"config": "{}"},
    }
    err = refused(kube, planted, member(TEAMS[a]))
    assert err.status == 403 and "cannot create resource" in err.message


@pytest.mark.parametrize("a", list(TEAMS))
def test_a_guid_through_cni_args_is_refused(kube: Kube, a: str) -> None:
    team = TEAMS[a]
    own = nad_name(team)
    for form in (
        json.dumps([{"name": own, "namespace": a, "cni-args": {"guid": "02:00:00:00:00:00:10:00"}}]),
        json.dumps([{"name": own, "infiniband-guid": "02:00:00:00:00:00:10:00"}]),
        json.dumps([{"name": own, "CNI-Args": {"guid": "02:00:00:00:00:00:10:00"}}]),
    ):
        err = refused(kube, pod(a, "x", networks=form), member(team))
        assert err.status == 403 and "may not set cni-args" in err.message, (form, err)
        assert f"ValidatingAdmissionPolicy '{NETWORKS_POLICY}'" in err.message, (form, err)


@pytest.mark.parametrize(("a", "b"), PAIRS[:: max(1, len(PAIRS) // 6)])
def test_changing_an_existing_pods_networks_annotation_is_refused(kube: Kube, a: str, b: str) -> None:
    """Multus reads the annotation at network setup: an UPDATE could swap in B's NAD or a GUID.

    A member may not patch pods at all (RBAC); the admission policy holds even for an identity that
    may (here the admin: a ValidatingAdmissionPolicy binds every user), on ``pods`` and ``pods/status``.
    """
    team = TEAMS[a]
    name = f"upd-{b}"
    created = kube.create(pod(a, name, networks=nad_name(team)), as_=member(team))
    try:
        patch = {"metadata": {"annotations": {NETWORKS_ANNOTATION: f"{b}/{nad_name(TEAMS[b])}"}}}
        with pytest.raises(ApiError) as err:
            kube.patch("v1", "Pod", name, a, patch, as_=member(team))
        assert err.value.status == 403 and 'cannot patch resource "pods"' in err.value.message, err.value
        for sub in (None, "status"):
            with pytest.raises(ApiError) as err:
                kube.patch("v1", "Pod", name, a, patch, sub=sub)
            assert err.value.status == 403 and NETWORKS_IMMUTABLE_POLICY in err.value.message, (sub, err.value)
        # The allowed twin: a label change of the same pod goes through the same policy.
        ok = kube.patch("v1", "Pod", name, a, {"metadata": {"labels": {"touched": "yes"}}})
        assert ok["metadata"]["labels"]["touched"] == "yes"
        assert ok["metadata"]["annotations"][NETWORKS_ANNOTATION] == nad_name(team)
        assert created["metadata"]["annotations"][NETWORKS_ANNOTATION] == nad_name(team)
    finally:
        kube.delete("v1", "Pod", name, a)


# --------------------------------------------------------------------------------------------
# resources: another team's partition, and GPUs beyond A's quota (counted by the real controller)


@pytest.mark.parametrize(("a", "b"), PAIRS)
def test_a_pod_in_a_requesting_bs_partition_resource_is_refused(kube: Kube, a: str, b: str) -> None:
    foreign, own = partition_resource(TEAMS[b]), partition_resource(TEAMS[a])
    err = refused(kube, pod(a, "x", limits={foreign: 1}), member(TEAMS[a]))
    # The partition policy, not a quota line per foreign partition (adding a team changes no other
    # team's objects): it names the one partition resource this namespace may request.
    assert err.status == 403 and "gpuaas-team-partition" in err.message and own in err.message, err
    # In a sidecar too (labelled with its queue: the queue guard counts VFs as well).
    sidecar = pod(a, "x")
    sidecar["metadata"]["labels"] = {QUEUE_LABEL: a}
    sidecar["spec"]["initContainers"] = [
        {
            "name": "side",
            "image": "registry.k8s.io/pause:3.10",
            "restartPolicy": "Always",
            "resources": {"limits": {foreign: "1"}},
        }
    ]
    err = refused(kube, sidecar, member(TEAMS[a]))
    assert err.status == 403 and "gpuaas-team-partition" in err.message, err


#: What each team's ResourceQuota admits per GPU kind, from tests/stacks/onprem.yaml's own numbers (never from
#: the code under test). The fleet: h100-full 4 nodes x 8 GPUs = 32 nvidia.com/gpu; h100-mig 1 node x 8
#: GPUs x (1x4g.40gb + 3x1g.10gb) = 8 mig-4g.40gb and 24 mig-1g.10gb; h100-shared 1 node x 8 GPUs x 2
#: replicas = 16 gpu.shared. Elastic quotas are on: a team's ceiling is its quota plus what it may
#: borrow, at most the capacity of its queue's node groups. So a team without a borrowing limit may
#: hold a whole group's kind; vision borrows at most 8 GPUs (12 + 8 = 20); platform-qa's queue has the
#: MIG group only, so its quota refuses whole and time-sliced GPUs.
WHOLE_FLEET = {GPU: 32, GPU_SHARED: 16, mig_resource("1g.10gb"): 24, mig_resource("4g.40gb"): 8}
CEILINGS: dict[str, dict[str, int]] = {
    "vision": {**WHOLE_FLEET, GPU: 20},
    "language": WHOLE_FLEET,
    "speech": WHOLE_FLEET,
    "research": WHOLE_FLEET,
    "inference": WHOLE_FLEET,
    "platform-qa": {mig_resource("1g.10gb"): 24, mig_resource("4g.40gb"): 8},
}
assert CFG.queues.elastic and set(CEILINGS) == set(TEAMS), "CEILINGS are the elastic onprem stack's"
#: Kinds some team's quota refuses: the refusal below must run for at least one team.
REFUSED = {a: sorted(set(WHOLE_FLEET) - set(kinds)) for a, kinds in CEILINGS.items()}
assert any(REFUSED.values())


def _exceeded(resource: str, requested: int, used: int, limited: int) -> str:
    """The ResourceQuota admission's own message (k8s.io/apiserver plugin/pkg/admission/resourcequota)."""
    return (
        f"exceeded quota: gpuaas-team-quota, requested: requests.{resource}={requested}, "
        f"used: requests.{resource}={used}, limited: requests.{resource}={limited}"
    )


@pytest.mark.parametrize("a", list(TEAMS))
def test_gpus_beyond_as_quota_are_refused_once_a_is_full(kube: Kube, a: str) -> None:
    who = member(TEAMS[a])
    assert CEILINGS[a], f"{a}: no GPU kind to fill"
    for resource, n in sorted(CEILINGS[a].items()):
        base = _used(kube, a, resource)  # e.g. the verification Jobs' pods in a verified team
        fill = pod(a, "fill", limits={resource: n - base})
        kube.create(fill, as_=who)  # up to exactly the quota: admitted
        try:
            err = refused(kube, pod(a, "one-more", limits={resource: 1}), who)
            assert err.status == 403 and _exceeded(resource, 1, n, n) in err.message, err
        finally:
            kube.delete("v1", "Pod", "fill", a)
        # Freed again: the same one-more pod is admitted once the fill pod is gone.
        kube.wait_for(
            f"{resource} usage back to what it was in {a}",
            lambda resource=resource, base=base: _used(kube, a, resource) == base,
            timeout=60,
        )
        kube.create(pod(a, "one-more", limits={resource: 1}), as_=who, dry_run=True)


def _used(kube: Kube, ns: str, resource: str) -> int:
    q = kube.get("v1", "ResourceQuota", "gpuaas-team-quota", ns) or {}
    return int(str((q.get("status", {}).get("used") or {}).get(f"requests.{resource}", "0")))


@pytest.mark.parametrize("a", [a for a, kinds in REFUSED.items() if kinds])
def test_a_gpu_kind_outside_as_quota_is_refused(kube: Kube, a: str) -> None:
    team = TEAMS[a]
    for resource in REFUSED[a]:
        err = refused(kube, pod(a, "x", limits={resource: 1}), member(team))
        assert err.status == 403 and _exceeded(resource, 1, 0, 0) in err.message, err
    # The twin: every kind the team may hold (or borrow) is admitted by the quota (Kueue decides).
    for resource in sorted(CEILINGS[a]):
        kube.create(pod(a, "x", limits={resource: 1}), as_=member(team), dry_run=True)


# --------------------------------------------------------------------------------------------
# RBAC: what a member may not write or read


TEAM_WRITES_REFUSED = [
    ("k8s.cni.cncf.io", "network-attachment-definitions"),
    ("", "resourcequotas"),
    ("", "limitranges"),
    ("rbac.authorization.k8s.io", "rolebindings"),
    ("rbac.authorization.k8s.io", "roles"),
    ("admissionregistration.k8s.io", "validatingadmissionpolicies"),
    ("admissionregistration.k8s.io", "validatingadmissionpolicybindings"),
    ("", "namespaces"),
]


@pytest.mark.parametrize(("a", "b"), PAIRS)
def test_a_member_cannot_write_platform_objects_or_read_bs_pods_and_secrets(kube: Kube, a: str, b: str) -> None:
    who = member(TEAMS[a])
    for ns in (a, b):
        for group, resource in TEAM_WRITES_REFUSED:
            for verb in ("create", "update", "patch", "delete"):
                assert not kube.can_i(verb, resource, ns, who, group=group), (verb, group, resource, ns)
    for resource in ("pods", "secrets", "configmaps"):
        assert not kube.can_i("get", resource, b, who), (resource, b)
        assert not kube.can_i("list", resource, b, who), (resource, b)
    # The allowed twins, from the same authorizer: A's own pods and secrets.
    assert kube.can_i("list", "pods", a, who) and kube.can_i("create", "pods", a, who)
    assert kube.can_i("get", "secrets", a, who)


@pytest.mark.parametrize("a", list(TEAMS))
def test_a_member_reading_bs_pods_is_refused_by_the_server(kube: Kube, a: str) -> None:
    b = next(t for t in TEAMS if t != a)
    with pytest.raises(ApiError) as err:
        kube.list("v1", "Pod", b, as_=member(TEAMS[a]))
    assert (
        err.value.status == 403
        and f'cannot list resource "pods" in API group "" in the namespace "{b}"' in err.value.message
    )


# --------------------------------------------------------------------------------------------
# Pod Security


@pytest.mark.parametrize("a", list(TEAMS))
def test_privileged_and_host_network_pods_are_refused_in_a_team_namespace(kube: Kube, a: str) -> None:
    who = member(TEAMS[a])
    err = refused(kube, pod(a, "x", container={"securityContext": {"privileged": True}}), who)
    assert err.status == 403 and "violates PodSecurity" in err.message and "privileged" in err.message
    err = refused(kube, pod(a, "x", spec={"hostNetwork": True}), who)
    assert err.status == 403 and "violates PodSecurity" in err.message and "host namespaces" in err.message
    # The allowed twin: the same pod unprivileged.
    kube.create(pod(a, "x"), as_=who, dry_run=True)


# --------------------------------------------------------------------------------------------
# the proofs' own pods: admitted in their team's namespace with their NAD, nowhere else


def test_the_proof_jobs_pods_are_admitted_only_in_their_own_team_namespace(onprem: AppliedStack, kube: Kube) -> None:
    jobs = [
        a.planned.obj
        for a in onprem.applied
        if a.planned.obj["kind"] == "Job" and a.planned.obj["metadata"]["namespace"] in TEAMS
    ]
    assert any(j["metadata"]["name"].startswith("isolation-") for j in jobs), "the plan has negative probes"
    for job in jobs:
        ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
        # The real Job controller made the pod, through the whole admission chain.
        kube.wait_for(
            f"a pod of Job {ns}/{name}",
            lambda ns=ns, name=name: kube.list("v1", "Pod", ns, selector=f"job-name={name}"),
        )
        other = next(t for t in TEAMS if t != ns)
        tpl = job["spec"]["template"]
        labels = dict(tpl["metadata"].get("labels", {}))
        if CFG.queues.elastic:  # through the other team's own queue: the queue policy is not the reason
            labels[QUEUE_LABEL] = local_queue_name(TEAMS[other])
        moved = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "moved",
                "namespace": other,
                "labels": labels,
                "annotations": tpl["metadata"].get("annotations", {}),
            },
            "spec": tpl["spec"],
        }
        err = refused(kube, moved, member(TEAMS[other]))
        # Refused for the partition: another namespace's NAD, or another partition's VF resource.
        assert err.status == 403 and (OWN_NAD_ONLY in err.message or "gpuaas-team-partition" in err.message), (
            ns,
            name,
            err,
        )


@pytest.mark.parametrize("a", list(TEAMS)[:2])
def test_a_pod_at_a_system_priority_is_refused_in_a_team_namespace(kube: Kube, a: str) -> None:
    """Review item 2: system-node-critical / system-cluster-critical would preempt other teams' GPU pods."""
    team = TEAMS[a]
    kube.wait_for(
        f"no-critical quota status in {a}",
        lambda: (kube.get("v1", "ResourceQuota", NO_CRITICAL_QUOTA, a) or {}).get("status", {}).get("hard"),
        timeout=60,
    )
    for cls in SYSTEM_PRIORITY_CLASSES:
        assert kube.get("scheduling.k8s.io/v1", "PriorityClass", cls), f"the API server creates {cls}"
        err = refused(kube, pod(a, "critical", spec={"priorityClassName": cls}), member(team))
        assert err.status == 403 and NO_CRITICAL_QUOTA in err.message, (cls, err)
    # The allowed twin: the same pod without the priority class.
    kube.create(pod(a, "critical"), as_=member(team), dry_run=True)
