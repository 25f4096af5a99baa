"""One team and the admission guards work alone, in a program that is not gpuaas' (issue #33, item 1).

As in tests/reuse/test_components_alone.py: small Pulumi programs written here, outside ``Platform``,
under the SDK's mocks with no gpuaas stack config at all; the arguments are written by hand (never
mapped from a stack config by ``components.platform_args``) and the registered objects are compared
with objects written out in the test.

One piece: one team's objects and the guards, each written out in full, are most of its length.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest

from components.model.teams import AksPartition, OnPremPartition, Team
from components.tenancy.admission import Admission, AdmissionArgs
from components.tenancy.networks import PartitionNetworks
from components.tenancy.teams import TeamArgs, Teams, TeamsArgs
from tests.reuse.harness import assert_depends_on_and_provider_reach_every_child, objects, run, waits_for

PART_OF = {"app.kubernetes.io/part-of": "gpuaas"}
READ = ["get", "list", "watch"]
WRITE = ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]
TEAMS_SELECTOR = {"namespaceSelector": {"matchExpressions": [{"key": "gpuaas.io/team", "operator": "Exists"}]}}
PODS_CREATE = {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
#: The team's own quota, written as a platform team would for its cluster: 8 VFs of its partition.
QUOTA = {"requests.nvidia.com/sriov8001": "8", "requests.cpu": "32", "requests.memory": "256Gi", "pods": "50"}


def vision(**team: Any) -> TeamArgs:
    return TeamArgs(
        team=Team(name="vision", groups=["oidc:vision"], partition=OnPremPartition(pkey=1, vf_index=0), **team),
        quota=QUOTA,
    )


def nad_config(name: str, ipam: dict[str, Any] | None) -> str:
    conf: dict[str, Any] = {
        "cniVersion": "0.3.1",
        "name": name,
        "type": "ib-sriov",
        "pkey": "0x8001",
        "link_state": "enable",
        "ibKubernetesEnabled": False,
    }
    if ipam is not None:
        conf.update({"capabilities": {"ips": True}, "ipam": ipam})
    return json.dumps(conf, indent=2)


def in_vision(kind: str, name: str, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": "vision", "labels": PART_OF},
        **extra,
    }


def test_one_onprem_team_alone() -> None:
    built: list[Teams] = []

    def program() -> None:
        built.append(
            Teams("lab", TeamsArgs(teams=(vision(),), networks=PartitionNetworks(ipam="static", vfs_per_partition=4)))
        )

    records = run(program)
    got = objects(records)
    nad_meta = {
        "namespace": "vision",
        "labels": PART_OF,
        "annotations": {"k8s.v1.cni.cncf.io/resourceName": "nvidia.com/sriov8001"},
    }
    assert got == {
        "lab-member-role": (
            "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole",
            "lab",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": "gpuaas-team-member", "labels": PART_OF},
                # No queue rules: no elastic quotas were given.
                "rules": [
                    {
                        "apiGroups": [""],
                        "resources": ["pods"],
                        "verbs": ["get", "list", "watch", "create", "delete", "deletecollection"],
                    },
                    {
                        "apiGroups": [""],
                        "resources": ["services", "configmaps", "secrets", "persistentvolumeclaims", "serviceaccounts"],
                        "verbs": WRITE,
                    },
                    {
                        "apiGroups": [""],
                        "resources": ["pods/exec", "pods/attach", "pods/portforward"],
                        "verbs": ["create", "get"],
                    },
                    {"apiGroups": [""], "resources": ["pods/log", "pods/status", "events", "endpoints"], "verbs": READ},
                    {
                        "apiGroups": ["apps"],
                        "resources": ["deployments", "statefulsets", "replicasets"],
                        "verbs": WRITE,
                    },
                    {
                        "apiGroups": ["apps"],
                        "resources": ["deployments/scale", "statefulsets/scale"],
                        "verbs": ["get", "update", "patch"],
                    },
                    {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": WRITE},
                    {"apiGroups": [""], "resources": ["resourcequotas", "limitranges"], "verbs": READ},
                    {"apiGroups": ["k8s.cni.cncf.io"], "resources": ["network-attachment-definitions"], "verbs": READ},
                ],
            },
        ),
        "lab-vision-namespace": (
            "kubernetes:core/v1:Namespace",
            "lab",
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {
                    "name": "vision",
                    "labels": {
                        **PART_OF,
                        "gpuaas.io/team": "vision",
                        "gpuaas.io/partition-resource": "sriov8001",
                        "pod-security.kubernetes.io/enforce": "baseline",
                        "pod-security.kubernetes.io/audit": "baseline",
                        "pod-security.kubernetes.io/warn": "baseline",
                        "pod-security.kubernetes.io/enforce-version": "latest",
                    },
                },
            },
        ),
        "lab-vision-quota": (
            "kubernetes:core/v1:ResourceQuota",
            "lab",
            in_vision("ResourceQuota", "gpuaas-team-quota", spec={"hard": QUOTA}),
        ),
        "lab-vision-no-critical-priority": (
            "kubernetes:core/v1:ResourceQuota",
            "lab",
            in_vision(
                "ResourceQuota",
                "gpuaas-no-critical-priority",
                spec={
                    "hard": {"pods": "0"},
                    "scopeSelector": {
                        "matchExpressions": [
                            {
                                "scopeName": "PriorityClass",
                                "operator": "In",
                                "values": ["system-cluster-critical", "system-node-critical"],
                            }
                        ]
                    },
                },
            ),
        ),
        "lab-vision-limits": (
            "kubernetes:core/v1:LimitRange",
            "lab",
            in_vision(
                "LimitRange",
                "gpuaas-team-defaults",
                spec={"limits": [{"type": "Container", "defaultRequest": {"cpu": "1", "memory": "2Gi"}}]},
            ),
        ),
        "lab-vision-rolebinding": (
            "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding",
            "lab",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": "gpuaas-team-member", "namespace": "vision", "labels": PART_OF},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "gpuaas-team-member",
                },
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "oidc:vision"}],
            },
        ),
        # static IPAM: the team NAD takes the pods' own addresses, its twin none.
        "lab-vision-nad": (
            "kubernetes:k8s.cni.cncf.io/v1:NetworkAttachmentDefinition",
            "lab",
            {
                "apiVersion": "k8s.cni.cncf.io/v1",
                "kind": "NetworkAttachmentDefinition",
                "metadata": {"name": "ib-vision", **nad_meta},
                "spec": {"config": nad_config("ib-vision", {"type": "static"})},
            },
        ),
        "lab-vision-nad-rdma": (
            "kubernetes:k8s.cni.cncf.io/v1:NetworkAttachmentDefinition",
            "lab",
            {
                "apiVersion": "k8s.cni.cncf.io/v1",
                "kind": "NetworkAttachmentDefinition",
                "metadata": {"name": "ib-vision-rdma", **nad_meta},
                "spec": {"config": nad_config("ib-vision-rdma", None)},
            },
        ),
    }
    (namespace,) = [r for r in records if r.name == "lab-vision-namespace"]
    assert namespace.protect, "a team namespace is protected unless the team says otherwise"
    (teams,) = built
    assert teams.exports == {
        "vision": {
            "namespace": "vision",
            "quota": QUOTA,
            "pkey": "0x0001",
            "fullPkey": "0x8001",
            "vfIndex": 0,
            "guidCount": 4,
            "sriovResource": "nvidia.com/sriov8001",
            "nad": "ib-vision",
        }
    }


def test_nv_ipam_gives_the_team_its_pool_in_the_operators_namespace() -> None:
    networks = PartitionNetworks(
        ipam="nv-ipam", ipam_supernet="10.20.0.0/16", per_node_block=8, pool_namespace="fabric"
    )

    def program() -> None:
        Teams("lab", TeamsArgs(teams=(vision(),), networks=networks))

    got = objects(run(program))
    assert got["lab-vision-ippool"] == (
        "kubernetes:nv-ipam.nvidia.com/v1alpha1:IPPool",
        "lab",
        {
            "apiVersion": "nv-ipam.nvidia.com/v1alpha1",
            "kind": "IPPool",
            "metadata": {"name": "ib-vision", "namespace": "fabric", "labels": {**PART_OF, "gpuaas.io/team": "vision"}},
            # P_Key 1: the second /24 of the supernet.
            "spec": {"subnet": "10.20.1.0/24", "perNodeBlockSize": 8},
        },
    )
    assert json.loads(got["lab-vision-nad"][2]["spec"]["config"])["ipam"] == {
        "type": "nv-ipam",
        "poolName": "ib-vision",
    }
    assert "lab-vision-nad-rdma" not in got


def test_a_team_without_partition_networks_gets_no_nad() -> None:
    """The same team without :class:`PartitionNetworks` (as on AKS): no NAD, no partition label."""

    def program() -> None:
        Teams("lab", TeamsArgs(teams=(vision(protect=False),)))

    records = run(program)
    got = objects(records)
    assert sorted(got) == [
        "lab-member-role",
        "lab-vision-limits",
        "lab-vision-namespace",
        "lab-vision-no-critical-priority",
        "lab-vision-quota",
        "lab-vision-rolebinding",
    ]
    assert "gpuaas.io/partition-resource" not in got["lab-vision-namespace"][2]["metadata"]["labels"]
    assert not next(r for r in records if r.name == "lab-vision-namespace").protect


def test_one_aks_team_alone_gets_its_pools_scheduling_template() -> None:
    team = TeamArgs(
        team=Team(name="training", partition=AksPartition(node_pool="ndh100a")),
        quota={"requests.nvidia.com/gpu": "16", "requests.rdma/hcashared": "16"},
        namespace_labels={"gpuaas.io/hami": "true"},
        pool_taints=("nvidia.com/gpu=present:NoSchedule", "team=training:NoExecute"),
    )

    def program() -> None:
        Teams("lab", TeamsArgs(teams=(team,), queue_integrations=frozenset({"batch/job", "kubeflow.org/pytorchjob"})))

    got = objects(run(program))
    labels = got["lab-training-namespace"][2]["metadata"]["labels"]
    assert (labels["gpuaas.io/node-pool"], labels["gpuaas.io/hami"]) == ("ndh100a", "true")
    assert "lab-training-rolebinding" not in got, "no groups, no binding"
    pod_spec = {
        "nodeSelector": {"kubernetes.azure.com/agentpool": "ndh100a"},
        "tolerations": [
            {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"},
            {"key": "team", "operator": "Equal", "value": "training", "effect": "NoExecute"},
        ],
    }
    assert got["lab-training-scheduling"] == (
        "kubernetes:core/v1:ConfigMap",
        "lab",
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "gpuaas-scheduling", "namespace": "training", "labels": PART_OF},
            "data": {
                "nodeSelectorKey": "kubernetes.azure.com/agentpool",
                "nodeSelectorValue": "ndh100a",
                "pod-spec.json": json.dumps(pod_spec, indent=2, sort_keys=True),
            },
        },
    )
    # Elastic quotas: the role writes the one training kind whose integration runs, and reads its queue.
    assert got["lab-member-role"][2]["rules"][-2:] == [
        {"apiGroups": ["kubeflow.org"], "resources": ["pytorchjobs"], "verbs": WRITE},
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["localqueues", "workloads"], "verbs": READ},
    ]


# --------------------------------------------------------------------------------------------
# The admission guards


def binding(policy: str, selector: dict[str, Any] | None = TEAMS_SELECTOR) -> dict[str, Any]:
    spec: dict[str, Any] = {"policyName": policy, "validationActions": ["Deny"]}
    if selector is not None:
        spec["matchResources"] = selector
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": policy, "labels": PART_OF},
        "spec": spec,
    }


def test_onprem_guards_alone() -> None:
    def program() -> None:
        Admission("guards", AdmissionArgs(partitions=True))

    got = objects(run(program))
    policy = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
    bound = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
    assert {name: (kind, parent, obj["metadata"]["name"]) for name, (kind, parent, obj) in got.items()} == {
        "guards-networks-policy": (policy, "guards", "gpuaas-team-networks"),
        "guards-networks-binding": (bound, "guards", "gpuaas-team-networks"),
        "guards-networks-immutable-policy": (policy, "guards", "gpuaas-team-networks-immutable"),
        "guards-networks-immutable-binding": (bound, "guards", "gpuaas-team-networks-immutable"),
        "guards-partition-policy": (policy, "guards", "gpuaas-team-partition"),
        "guards-partition-binding": (bound, "guards", "gpuaas-team-partition"),
    }
    assert got["guards-networks-binding"][2] == binding("gpuaas-team-networks")
    assert got["guards-networks-immutable-binding"][2] == binding("gpuaas-team-networks-immutable")
    # A partition's VFs are its team's alone: the partition guard looks at every namespace.
    assert got["guards-partition-binding"][2] == binding("gpuaas-team-partition", None)
    spec = got["guards-partition-policy"][2]["spec"]
    assert (spec["failurePolicy"], spec["matchConstraints"]) == ("Fail", {"resourceRules": [PODS_CREATE]})
    assert [v["name"] for v in spec["variables"]] == ["ownPartition", "ownPartitionOnly"]


def test_aks_guards_alone_name_the_pools_no_team_owns() -> None:
    def program() -> None:
        Admission("guards", AdmissionArgs(node_pools=("spare", "extra")))

    got = objects(run(program))
    assert sorted(got) == [
        "guards-networks-binding",
        "guards-networks-immutable-binding",
        "guards-networks-immutable-policy",
        "guards-networks-policy",
        "guards-pool-binding",
        "guards-pool-policy",
    ]
    assert got["guards-pool-binding"][2] == binding("gpuaas-team-node-pool")
    spec = got["guards-pool-policy"][2]["spec"]
    assert spec["matchConstraints"] == {"resourceRules": [PODS_CREATE]}
    assert spec["variables"][3] == {"name": "unownedPools", "expression": "['spare', 'extra']"}
    assert "nodeSelector kubernetes.azure.com/agentpool (spare, extra)" in spec["validations"][0]["messageExpression"]


@pytest.mark.parametrize("core_policy", ["default", "force"])
def test_hami_guard_alone_allows_only_the_clusters_core_policy(core_policy: str) -> None:
    def program() -> None:
        Admission("guards", AdmissionArgs(hami_core_policy=core_policy))

    got = objects(run(program))
    assert got["guards-hami-binding"][2] == binding("gpuaas-team-hami")
    environment = next(v for v in got["guards-hami-policy"][2]["spec"]["variables"] if v["name"] == "environment")
    assert f"e.value == '{core_policy}'" in environment["expression"]
    assert "guards-partition-policy" not in got and "guards-pool-policy" not in got


def test_no_hami_no_pools_no_partitions_is_the_network_guards_alone() -> None:
    def program() -> None:
        Admission("guards", AdmissionArgs())

    assert sorted(objects(run(program))) == [
        "guards-networks-binding",
        "guards-networks-immutable-binding",
        "guards-networks-immutable-policy",
        "guards-networks-policy",
    ]


# --------------------------------------------------------------------------------------------
# Ordering: ordinary ResourceOptions, and the guards the quotas wait for


def test_the_quota_and_role_binding_wait_for_the_guards_the_namespace_does_not() -> None:
    def program() -> None:
        admission = Admission("guards", AdmissionArgs(partitions=True))
        crd = k8s.core.v1.ConfigMap("crd", metadata={"name": "crd"})
        Teams(
            "lab",
            TeamsArgs(
                teams=(vision(),), networks=PartitionNetworks(), objects_after=(crd,), guards=tuple(admission.objects)
            ),
        )

    records = run(program)
    guards = {r.urn for r in records if r.custom and r.name.startswith("guards-")}
    crd = next(r.urn for r in records if r.name == "crd")
    assert len(guards) == 6
    # What each waits for, directly or through another (the guarded objects through the member role).
    deps = {r.name: waits_for(records, r) for r in records if r.name.startswith("lab-")}
    for guarded in ("lab-vision-quota", "lab-vision-no-critical-priority", "lab-vision-rolebinding"):
        assert guards | {crd} <= deps[guarded], guarded
    # The unguarded twins: limits and NAD wait for the CRD, not the guards; the namespace for neither.
    for plain in ("lab-vision-limits", "lab-vision-nad"):
        assert crd in deps[plain] and not guards & deps[plain], plain
    assert not (guards | {crd}) & deps["lab-vision-namespace"]


COMPONENTS: dict[str, Callable[[str, pulumi.ResourceOptions], pulumi.ComponentResource]] = {
    "Teams": lambda name, opts: Teams(
        name, TeamsArgs(teams=(vision(),), networks=PartitionNetworks(ipam="nv-ipam")), opts
    ),
    "Admission": lambda name, opts: Admission(name, AdmissionArgs(partitions=True, hami_core_policy="default"), opts),
}


@pytest.mark.parametrize("component", sorted(COMPONENTS))
def test_depends_on_and_the_provider_reach_every_child(component: str) -> None:
    assert_depends_on_and_provider_reach_every_child(COMPONENTS[component])
