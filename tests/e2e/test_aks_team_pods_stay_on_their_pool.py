"""AKS: a team's GPU and RDMA pods run only on its own ND pool (its InfiniBand partition).

On Azure each pool is one partition, so a GPU pod of A scheduled onto B's pool would join B's
partition. The pool guard must hold for every container list (init containers and native sidecars
can ask for GPUs or RDMA too), and nothing a team member can write may loosen it.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from components.loader import parse_config
from components.model.config import StackConfig
from components.model.resources import AKS_POOL_LABEL, GPU
from components.tenancy.admission import POOL_POLICY
from e2e.kube import ApiError, Identity, Kube
from e2e.plan_apply import planned_objects
from tests import tenancy_objects
from tests.conftest import raw_stack
from tests.e2e.conftest import AppliedStack, wait_until_refused
from tests.e2e.settle import gone

# Also run on the oldest supported Kubernetes minor (`make e2e`; pyproject.toml's markers).
pytestmark = pytest.mark.every_minor

CFG: StackConfig = parse_config(raw_stack("aks"))
TEAMS = {t.name: t for t in CFG.teams if t.partition is not None}
POOL = {name: t.partition.node_pool for name, t in TEAMS.items()}  # type: ignore[union-attr]
PAIRS = list(itertools.permutations(TEAMS, 2))
RDMA = "rdma/hca_shared_devices_a"


def member(team: str) -> Identity:
    return Identity(f"member-of-{team}@example.com", tuple(TEAMS[team].groups))


def gpu_pod(ns: str, *, pool: str | None, where: str = "containers", resource: str = GPU) -> dict[str, Any]:
    plain = {"name": "main", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "100m"}}}
    accel = {"name": "accel", "image": "registry.k8s.io/pause:3.10", "resources": {"limits": {resource: "1"}}}
    spec: dict[str, Any] = {"containers": [accel] if where == "containers" else [plain]}
    if where == "initContainers":
        spec["initContainers"] = [accel]
    elif where == "sidecar":
        spec["initContainers"] = [{**accel, "restartPolicy": "Always"}]
    if pool is not None:
        spec["nodeSelector"] = {AKS_POOL_LABEL: pool}
    spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": ns}, "spec": spec}


@pytest.fixture(scope="module")
def kube(aks: AppliedStack) -> Kube:
    k = aks.kube
    for team in TEAMS:
        k.wait_for(
            f"quota status in {team}",
            lambda team=team: (
                (k.get("v1", "ResourceQuota", "gpuaas-team-quota", team) or {}).get("status", {}).get("hard")
            ),
        )
        k.wait_for(
            f"default ServiceAccount in {team}", lambda team=team: k.get("v1", "ServiceAccount", "default", team)
        )
    a, b = PAIRS[0]
    wait_until_refused(k, gpu_pod(a, pool=POOL[b]), member(a), "InfiniBand pool")
    return k


def _refused(kube: Kube, obj: dict[str, Any], who: Identity) -> ApiError:
    with pytest.raises(ApiError) as err:
        kube.create(obj, as_=who, dry_run=True)
    return err.value


@pytest.mark.parametrize("where", ["containers", "initContainers", "sidecar"])
@pytest.mark.parametrize(("a", "b"), PAIRS)
def test_a_gpu_or_rdma_pod_of_a_off_its_own_pool_is_refused(kube: Kube, a: str, b: str, where: str) -> None:
    for resource in (GPU, RDMA):
        for pool in (POOL[b], None):
            err = _refused(kube, gpu_pod(a, pool=pool, where=where, resource=resource), member(a))
            assert err.status == 403 and "InfiniBand pool" in err.message, (resource, pool, err)
            assert f"ValidatingAdmissionPolicy '{POOL_POLICY}'" in err.message, (resource, pool, err)
        # The allowed twin: the same pod on A's own pool.
        kube.create(gpu_pod(a, pool=POOL[a], where=where, resource=resource), as_=member(a), dry_run=True)


@pytest.mark.parametrize(("a", "b"), PAIRS)
def test_nothing_a_member_writes_in_its_namespace_loosens_the_pool_guard(
    aks: AppliedStack, kube: Kube, a: str, b: str
) -> None:
    """A member who rewrites (or creates) a ConfigMap of the guard's name to name B's pool gains nothing."""
    forged = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "gpuaas-scheduling", "namespace": a},
        "data": {"nodeSelectorKey": AKS_POOL_LABEL, "nodeSelectorValue": POOL[b]},
    }
    try:
        kube.apply(forged, manager="team-member", as_=member(a))
    except ApiError as e:
        assert e.status == 403  # may not even write it: fine too
    try:
        err = _refused(kube, gpu_pod(a, pool=POOL[b]), member(a))
        assert err.status == 403 and "InfiniBand pool" in err.message, err
        assert f"ValidatingAdmissionPolicy '{POOL_POLICY}'" in err.message, err
        kube.create(gpu_pod(a, pool=POOL[a]), as_=member(a), dry_run=True)
    finally:
        # Give the ConfigMap back to the plan: the member's manager lets go of its fields, ours retakes them.
        kube.apply({k: forged[k] for k in ("apiVersion", "kind", "metadata")}, manager="team-member")
        planned = next(
            p.obj
            for p in planned_objects(aks.run)
            if p.obj["kind"] == "ConfigMap"
            and p.obj["metadata"]["name"] == "gpuaas-scheduling"
            and p.obj["metadata"].get("namespace") == a
        )
        kube.apply(planned, manager="gpuaas-plan")


def test_a_pod_without_gpus_or_rdma_may_run_anywhere(kube: Kube) -> None:
    a = next(iter(TEAMS))
    plain = gpu_pod(a, pool=None)
    plain["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "100m"}}
    kube.create(plain, as_=member(a), dry_run=True)


def test_a_team_without_a_partition_may_request_no_rdma_on_any_pool(kube: Kube) -> None:
    """Review item 1: a partitionless team's namespace has no pool label; it may not pick a pool itself."""
    from components.tenancy import labels

    raw = raw_stack("aks")
    raw["teams"].append({"name": "interns", "groups": ["aad:gpuaas-interns"], "quota": {"gpus": 0}})
    cfg = parse_config(raw)
    ns = tenancy_objects.namespace(cfg, cfg.teams[-1])
    assert labels.POOL_LABEL not in ns["metadata"]["labels"]
    kube.apply(ns, manager="gpuaas-plan")
    try:
        for where in ("containers", "initContainers", "sidecar"):
            for pool in (*POOL.values(), None):
                with pytest.raises(ApiError) as err:
                    kube.create(gpu_pod("interns", pool=pool, where=where, resource=RDMA), dry_run=True)
                assert err.value.status == 403 and "no InfiniBand pool" in err.value.message, (where, pool)
        # The allowed twin: the same pod with no RDMA and no GPU. (A GPU alone would have to select
        # a pool no team owns, and the AKS stack has none: every pool is a team's partition; the
        # pool no team owns is tests/e2e/test_aks_elastic_queues_keep_teams_on_their_pools.py's.)
        cpu = gpu_pod("interns", pool=None, resource=GPU)
        cpu["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "100m"}}
        kube.create(cpu, dry_run=True)
        with pytest.raises(ApiError) as err:
            kube.create(gpu_pod("interns", pool=POOL["training"], resource=GPU), dry_run=True)
        assert "select a pool no team owns" in err.value.message and "none: each GPU pool" in err.value.message
    finally:
        gone(kube, "v1", "Namespace", "interns", None)
