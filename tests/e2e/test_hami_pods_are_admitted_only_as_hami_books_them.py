"""The HAMi variant stack on a real API server: what a team member's HAMi pods may carry, and their quota.

``tests/stacks/onprem-hami.yaml`` is planned offline and applied in install order; HAMi's real
chart, rendered by Helm with the plan's values (tests/e2e/test_hami_chart_renders_as_configured.py), is
applied beside it — its webhook configuration included, pointing at a scheduler that does not run
here: HAMi's outage, for real. As a member of team ``inference`` (impersonated: a user in the team's
OIDC group), each case of tests/hami_cases.py is refused by ``gpuaas-team-hami`` with the check's
own message, and its allowed twin is admitted. Then the quota: the Kubernetes quota controller
refuses slices beyond ``requests.nvidia.com/vgpu``, counts ``requests.nvidia.com/vgpu-memory`` per
container without multiplying by slices, and ignores the ``limits.`` keys — those are HAMi's
(HAMi's scheduler is not running here, so nothing enforces them in this test: that is the point
of the check). Refusals are ``dryRun=All`` creates: the whole admission chain runs, nothing is stored.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

import pytest

from components.model import hami, resources
from components.operators import hami as hami_operator
from components.plan.offline import Run, run_program, stack_config
from components.tenancy import hami_admission, teams
from e2e import helm_template
from e2e.controlplane import ControlPlane
from e2e.kube import ApiError, Identity, Kube
from e2e.plan_apply import apply_plan
from e2e.upstream import root as upstream_root
from tests.e2e.conftest import need_upstream, start_plane, wait_until_refused
from tests.e2e.settle import gone, quota_given_back
from tests.hami_cases import CASES, HAMI_STACK, PAUSE, TEAM, Edit, hami_pod

MEMBER: Final = Identity("alice@example.com", ("oidc:team-inference",))
VISION_MEMBER: Final = Identity("bob@example.com", ("oidc:team-vision",))
POLICY_DENIED: Final = f"ValidatingAdmissionPolicy '{hami_admission.POLICY}'"
MESSAGES: Final = {name: msg for name, _expr, msg in hami_admission.checks("default")}
HAMI_SA: Final = Identity(
    f"system:serviceaccount:{hami.NAMESPACE}:{hami.SCHEDULER_SERVICE_ACCOUNT}",
    ("system:serviceaccounts", f"system:serviceaccounts:{hami.NAMESPACE}"),
)


class HamiCluster:
    def __init__(self, cp: ControlPlane, run: Run) -> None:
        self.cp, self.run = cp, run

    @property
    def kube(self) -> Kube:
        return self.cp.kube


@pytest.fixture(scope="module")
def cluster(pytestconfig: pytest.Config) -> Iterator[HamiCluster]:
    need_upstream()
    cp = start_plane(pytestconfig, "HAMi variant plan")
    try:
        run = run_program("onprem", config=stack_config("onprem", HAMI_STACK))
        apply_plan(cp.kube, run)
        values = run.named("gpuaas-hami-release").inputs["values"]
        chart = upstream_root() / "charts" / "hami-2.10.0"
        for doc in helm_template.render(chart, hami.RELEASE, hami.NAMESPACE, values, cp.version().lstrip("v")):
            if doc["kind"] == "Job":  # the certificate jobs would wait for a kubelet
                continue
            if _namespaced(cp.kube, doc):
                doc["metadata"].setdefault("namespace", hami.NAMESPACE)
            cp.kube.apply(doc, manager="helm")
        for ns in (TEAM, "vision"):
            cp.kube.wait_for(
                f"{ns} quota status",
                lambda ns=ns: (cp.kube.get("v1", "ResourceQuota", teams.QUOTA, ns) or {}).get("status", {}).get("hard"),
                timeout=90,
            )
        # A policy takes effect once the API server has loaded it.
        unscheduled = hami_pod("probe")
        del unscheduled["spec"]["schedulerName"]
        wait_until_refused(cp.kube, unscheduled, MEMBER, POLICY_DENIED)
        yield HamiCluster(cp, run)
    finally:
        cp.stop()


def _namespaced(kube: Kube, doc: dict[str, Any]) -> bool:
    return bool(kube.resource(doc["apiVersion"], doc["kind"]).namespaced)


def refusal(kube: Kube, obj: dict[str, Any], who: Identity = MEMBER) -> ApiError:
    with pytest.raises(ApiError) as err:
        kube.create(obj, as_=who, dry_run=True)
    return err.value


def test_a_team_members_hami_pod_is_admitted(cluster: HamiCluster) -> None:
    created = cluster.kube.create(hami_pod(), as_=MEMBER, dry_run=True)
    assert created["spec"]["schedulerName"] == hami.SCHEDULER_NAME


@pytest.mark.parametrize(("check", "refuse", "allow"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_forbidden_field_is_refused_by_the_policy_beside_its_admitted_twin(
    cluster: HamiCluster, check: str, refuse: Edit, allow: Edit
) -> None:
    refused, allowed = hami_pod(), hami_pod()
    refuse(refused)
    allow(allowed)
    err = refusal(cluster.kube, refused)
    assert err.status == 403 and POLICY_DENIED in err.message, err.message
    assert MESSAGES[check] in err.message, err.message
    cluster.kube.create(allowed, as_=MEMBER, dry_run=True)


def test_hamis_webhook_down_fails_closed_for_hami_pods_only(cluster: HamiCluster) -> None:
    """HAMi's real webhook configuration is installed and its scheduler is not running."""
    kube = cluster.kube
    webhook = kube.get("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", "hami-webhook")
    assert webhook is not None and webhook["webhooks"][0]["failurePolicy"] == "Ignore"
    assert kube.get("v1", "Namespace", TEAM)["metadata"]["labels"][resources.HAMI_LABEL] == "true"  # type: ignore[index]
    # A pod without HAMi resources in the same namespace: the unreachable webhook is ignored.
    plain = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "plain", "namespace": TEAM},
        "spec": {"containers": [{"name": "main", "image": PAUSE}]},
    }
    assert kube.create(plain, as_=MEMBER, dry_run=True)["spec"]["schedulerName"] == "default-scheduler"
    # A HAMi pod that HAMi's webhook did not point at HAMi's scheduler: refused, not scheduled by default.
    unscheduled = hami_pod()
    del unscheduled["spec"]["schedulerName"]
    err = refusal(kube, unscheduled)
    assert POLICY_DENIED in err.message and MESSAGES["scheduler"] in err.message, err.message


@pytest.mark.every_minor
def test_slices_beyond_the_teams_quota_are_refused_by_the_quota_controller(cluster: HamiCluster) -> None:
    kube = cluster.kube
    hard = kube.get("v1", "ResourceQuota", teams.QUOTA, TEAM)["status"]["hard"]  # type: ignore[index]
    slices = int(hard[f"requests.{resources.HAMI_GPU}"])
    assert slices == 80  # elastic: the team's 40 and all it may borrow of the group's 80
    fill = hami_pod("fill", slices=slices, memory_mib=1024, cores=0)
    # The next test's pods need the slices back: the quota controller recounts after the delete.
    with quota_given_back(kube, TEAM):
        kube.create(fill, as_=MEMBER)  # up to exactly the quota: admitted
        try:
            key = f"requests.{resources.HAMI_GPU}"
            err = refusal(kube, hami_pod("one-more", slices=1, memory_mib=1024, cores=0))
            assert err.status == 403 and "exceeded quota: gpuaas-team-quota" in err.message, err.message
            assert f"limited: {key}={slices}" in err.message, err.message
        finally:
            gone(kube, "v1", "Pod", "fill", TEAM)


def test_the_quota_controller_counts_requests_keys_per_container_and_ignores_the_limits_keys(
    cluster: HamiCluster,
) -> None:
    kube = cluster.kube
    quota = kube.get("v1", "ResourceQuota", teams.QUOTA, TEAM)
    assert quota is not None
    hard, used = quota["status"]["hard"], quota["status"].get("used", {})
    memory = int(hard[f"limits.{resources.HAMI_MEMORY}"])
    assert hard[f"requests.{resources.HAMI_MEMORY}"] == str(memory)  # both keys stored, same number
    assert not [k for k in used if k.startswith("limits.nvidia.com/")], used  # never counted
    # 80 slices of 10 GiB is 800 GiB to HAMi, beyond limits.vgpu-memory; the quota controller counts
    # 10 GiB (one container's request, not multiplied by slices) and admits it. HAMi's own quota
    # refuses it in its webhook and scheduler filter, neither of which runs here.
    kube.create(hami_pod("hami-refuses-this", slices=80, memory_mib=10240, cores=0), as_=MEMBER, dry_run=True)
    assert memory < 80 * 10240
    # What the quota controller does count: a container's memory request beyond requests.vgpu-memory.
    err = refusal(kube, hami_pod("too-much-memory", slices=1, memory_mib=memory + 1, cores=0))
    assert "exceeded quota" in err.message and f"requests.{resources.HAMI_MEMORY}" in err.message, err.message


def test_a_team_without_slices_can_have_none(cluster: HamiCluster) -> None:
    kube = cluster.kube
    labels = kube.get("v1", "Namespace", "vision")["metadata"]["labels"]  # type: ignore[index]
    assert resources.HAMI_LABEL not in labels  # outside HAMi's webhook's sight
    err = refusal(kube, hami_pod(ns="vision"), who=VISION_MEMBER)
    assert err.status == 403 and f"requests.{resources.HAMI_GPU}=0" in err.message, err.message
    # Its twin: the same member's whole-GPU pod is the quota's to admit (vision holds GPUs).
    gpu_pod = hami_pod(ns="vision")
    gpu_pod["spec"].pop("schedulerName")
    gpu_pod["spec"]["containers"][0]["resources"]["limits"] = {resources.GPU: "1"}
    kube.create(gpu_pod, as_=VISION_MEMBER, dry_run=True)


@pytest.mark.every_minor
def test_hamis_scheduler_may_read_what_kube_scheduler_of_this_version_reads_in_resource_k8s_io(
    cluster: HamiCluster,
) -> None:
    """Every resource.k8s.io read of this version's own system:kube-scheduler role is in ours."""
    kube = cluster.kube
    role = kube.get("rbac.authorization.k8s.io/v1", "ClusterRole", "system:kube-scheduler")
    assert role is not None
    reads = {
        r
        for rule in role["rules"]
        if "resource.k8s.io" in rule.get("apiGroups", []) and {"list", "watch"} <= set(rule["verbs"])
        for r in rule["resources"]
        if "/" not in r
    }
    assert reads and reads <= set(hami_operator.DRA_READ_RESOURCES), reads
    # As on a cluster whose bootstrap role lacks the DRA rules: the chart's binding to it taken away,
    # ours alone still lets HAMi's scheduler read them.
    rbac = "rbac.authorization.k8s.io/v1"
    chart_binding = kube.get(rbac, "ClusterRoleBinding", "hami-scheduler-kube")
    assert chart_binding is not None and chart_binding["roleRef"]["name"] == "system:kube-scheduler"
    kube.delete(rbac, "ClusterRoleBinding", "hami-scheduler-kube")
    try:
        kube.wait_for(
            "the chart's binding gone from the authorizer",
            # Only system:kube-scheduler grants it among the roles HAMi's scheduler is bound to.
            lambda: not kube.can_i("list", "poddisruptionbudgets", None, HAMI_SA, group="policy"),
        )
        for resource in sorted(hami_operator.DRA_READ_RESOURCES):
            for verb in ("get", "list", "watch"):
                assert kube.can_i(verb, resource, None, HAMI_SA, group="resource.k8s.io"), (verb, resource)
        # Read only: allocating a claim stays kube-scheduler's role's (HAMi pods use no claims).
        assert not kube.can_i("update", "resourceclaims", None, HAMI_SA, group="resource.k8s.io", sub="status")
        # Its twin: another ServiceAccount of HAMi's namespace has none of it.
        other = Identity(f"system:serviceaccount:{hami.NAMESPACE}:default", HAMI_SA.groups)
        assert not kube.can_i("list", "resourceslices", None, other, group="resource.k8s.io")
    finally:
        meta = {k: v for k, v in chart_binding["metadata"].items() if k in ("name", "labels")}
        kube.apply({**{k: chart_binding[k] for k in ("apiVersion", "kind", "roleRef", "subjects")}, "metadata": meta})
