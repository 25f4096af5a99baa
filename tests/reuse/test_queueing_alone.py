"""Queues, the DRA model, Observability and Verification work alone, in a program that is not gpuaas'
(issue #33, item 1).

As in ``test_components_alone.py``: each program is written here, outside ``Platform``, with arguments
written by hand (never mapped from a stack config by ``components.platform_args``), run under the SDK's
mocks with no gpuaas stack config, and the objects it registers are compared with objects written out
in the test.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

import pulumi
import pulumi_kubernetes as k8s
import pytest
import yaml

from components.dra.tenancy import DraTeam, DraTenancy, DraTenancyArgs
from components.model import charts
from components.model.elastic import Line
from components.model.queues import KueuePreemption
from components.model.queues import Queues as QueuesConfig
from components.model.verification import Verification as VerificationConfig
from components.observability.component import Observability, ObservabilityArgs
from components.plan.offline import Record
from components.proofs.targets import Target
from components.proofs.verification import Verification, VerificationArgs
from components.queueing.queues import Flavor, Queues, QueuesArgs, TeamQueue
from tests.reuse.harness import assert_depends_on_and_provider_reach_every_child, objects, run

PART_OF = {"app.kubernetes.io/part-of": "gpuaas"}
KUEUE = "kueue.x-k8s.io/v1beta2"


def by_name(records: list[Record]) -> dict[str, Record]:
    return {r.name: r for r in records}


# --------------------------------------------------------------------------------------------
# Queues: one on-prem flavor, one team, their namespace made by the program itself


def _ml_queue() -> TeamQueue:
    return TeamQueue(
        name="ml",
        namespace="team-ml",
        cohort="lab",
        lines={
            "a100": {"nvidia.com/gpu": Line(Decimal(4), Decimal(2), None)},
            "gpuaas-any-node": {
                "cpu": Line(Decimal(64), None, None),
                "memory": Line(Decimal(256 * 2**30), None, Decimal(0)),
            },
        },
    )


def _queues_program() -> None:
    queues = Queues(
        "q",
        QueuesArgs(
            queues=QueuesConfig(
                namespace="kueue",
                replicas=1,
                integrations=["batch/job"],
                controllers=[],
                preemption=KueuePreemption(),
                pods_ready_timeout_seconds=120,
                helm_timeout_seconds=300,
            ),
            chart=charts.Source("oci://registry.k8s.io/kueue/charts/kueue", "0.19.2", None),
            flavors=(Flavor("a100"),),
            teams=(_ml_queue(),),
        ),
    )
    ns = k8s.core.v1.Namespace("ml-namespace", metadata={"name": "team-ml"})
    queues.local_queues({"ml": ns})


def test_queues_alone_registers_kueue_its_flavors_and_the_teams_queues() -> None:
    records = run(_queues_program)
    got = objects(records)
    policies = {n for n, (t, _p, _i) in got.items() if t.endswith("ValidatingAdmissionPolicy")}
    # batch/job alone: the kinds always guarded (pods, jobs, deployments, statefulsets), ReplicaSets,
    # the ownerReference guard and the Jobs' unsuspend guard.
    assert policies == {
        "q-pods-queue-policy",
        "q-jobs-queue-policy",
        "q-deployments-queue-policy",
        "q-statefulsets-queue-policy",
        "q-replicasets-queue-policy",
        "q-owners-queue-policy",
        "q-jobs-suspend-policy",
    }
    kueue_objects = {n: v for n, v in got.items() if not n.endswith(("-policy", "-binding"))}
    assert sorted(kueue_objects) == [
        "ml-namespace",
        "q-flavor-a100",
        "q-flavor-gpuaas-any-node",
        "q-kueue",
        "q-ml-cluster-queue",
        "q-ml-local-queue",
        "q-namespace",
    ]
    assert got["q-namespace"] == (
        "kubernetes:core/v1:Namespace",
        "q",
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "kueue", "labels": {**PART_OF, "pod-security.kubernetes.io/enforce": "restricted"}},
        },
    )
    assert got["q-flavor-a100"] == (
        f"kubernetes:{KUEUE}:ResourceFlavor",
        "q",
        {
            "apiVersion": KUEUE,
            "kind": "ResourceFlavor",
            "metadata": {"name": "a100", "labels": PART_OF},
            "spec": {"nodeLabels": {"gpuaas.io/node-group": "a100"}},
        },
    )
    assert got["q-ml-cluster-queue"] == (
        f"kubernetes:{KUEUE}:ClusterQueue",
        "q",
        {
            "apiVersion": KUEUE,
            "kind": "ClusterQueue",
            "metadata": {"name": "ml", "labels": PART_OF},
            "spec": {
                "cohortName": "lab",
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "team-ml"}},
                "queueingStrategy": "BestEffortFIFO",
                "preemption": {
                    "reclaimWithinCohort": "Any",
                    "withinClusterQueue": "LowerPriority",
                    "borrowWithinCohort": {"policy": "Never"},
                },
                "resourceGroups": [
                    {
                        "coveredResources": ["nvidia.com/gpu"],
                        "flavors": [
                            {
                                "name": "a100",
                                "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "4", "borrowingLimit": "2"}],
                            }
                        ],
                    },
                    {
                        "coveredResources": ["cpu", "memory"],
                        "flavors": [
                            {
                                "name": "gpuaas-any-node",
                                "resources": [
                                    {"name": "cpu", "nominalQuota": "64"},
                                    {"name": "memory", "nominalQuota": "256Gi", "lendingLimit": "0"},
                                ],
                            }
                        ],
                    },
                ],
            },
        },
    )
    assert got["q-ml-local-queue"] == (
        f"kubernetes:{KUEUE}:LocalQueue",
        "q",
        {
            "apiVersion": KUEUE,
            "kind": "LocalQueue",
            "metadata": {"name": "ml", "namespace": "team-ml", "labels": PART_OF},
            "spec": {"clusterQueue": "ml"},
        },
    )
    kind, parent, release = got["q-kueue"]
    assert (kind, parent, release["chart"], release["version"], release["namespace"], release["timeout"]) == (
        "kubernetes:helm.sh/v3:Release",
        "q",
        "oci://registry.k8s.io/kueue/charts/kueue",
        "0.19.2",
        "kueue",
        300,
    )
    manager = release["values"]["controllerManager"]
    assert manager["replicas"] == 1 and "podDisruptionBudget" not in manager
    conf = yaml.safe_load(release["values"]["managerConfig"]["controllerManagerConfigYaml"])
    assert (conf["namespace"], conf["integrations"], conf["waitForPodsReady"]) == (
        "kueue",
        {"frameworks": ["batch/job"]},
        {"timeout": "120s", "blockAdmission": False},
    )
    # No HAMi, no DRA, no observability given: Kueue counts everything but what no quota counts.
    assert conf["resources"] == {"excludeResourcePrefixes": ["ephemeral-storage", "hugepages-"]}
    assert "enableClusterQueueResources" not in conf["metrics"]


def test_queues_alone_orders_the_local_queue_after_its_cluster_queue_and_namespace() -> None:
    records = by_name(run(_queues_program))
    urn = {name: r.urn for name, r in records.items()}
    assert sorted(records["q-ml-local-queue"].dependencies) == sorted([urn["q-ml-cluster-queue"], urn["ml-namespace"]])
    assert urn["q-kueue"] in records["q-flavor-a100"].dependencies
    # The guards wait for nothing: cluster-scoped, they need neither a namespace nor Kueue's CRDs.
    assert records["q-jobs-queue-policy"].dependencies == []


def test_an_aks_flavor_selects_its_pool_and_tolerates_its_taints() -> None:
    def program() -> None:
        Queues("q", QueuesArgs(flavors=(Flavor("ndh100", aks_pool=True, taints=("sku=gpu:NoSchedule",)),)))

    flavor = objects(run(program))["q-flavor-ndh100"][2]
    assert flavor["spec"] == {
        "nodeLabels": {"gpuaas.io/node-group": "ndh100", "kubernetes.azure.com/agentpool": "ndh100"},
        "tolerations": [{"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}],
    }


# --------------------------------------------------------------------------------------------
# The DRA model


def test_dra_model_alone_registers_its_classes_guards_and_team_templates() -> None:
    def program() -> None:
        tenancy = DraTenancy(
            "dra",
            DraTenancyArgs(
                mig_profiles=("1g.10gb",),
                teams=(DraTeam("ml", "team-ml", ("gpu.nvidia.com", "mig-1g.10gb.gpuaas.io"), ("ml-devs",)),),
            ),
        )
        tenancy.add_team_objects({"ml": k8s.core.v1.Namespace("ml-namespace", metadata={"name": "team-ml"})})

    records = run(program)
    got = objects(records)
    assert sorted(got) == [
        "dra-claims-binding",
        "dra-claims-policy",
        "dra-class-1g.10gb",
        "dra-ml-rolebinding",
        "dra-ml-template-gpuaas-gpu",
        "dra-ml-template-gpuaas-mig-1g.10gb",
        "dra-role",
        "ml-namespace",
    ]
    assert got["dra-ml-template-gpuaas-mig-1g.10gb"][2] == {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "gpuaas-mig-1g.10gb", "namespace": "team-ml", "labels": PART_OF},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "mig",
                            "exactly": {
                                "deviceClassName": "mig-1g.10gb.gpuaas.io",
                                "allocationMode": "ExactCount",
                                "count": 1,
                            },
                        }
                    ]
                }
            }
        },
    }
    assert got["dra-ml-rolebinding"][2] == {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "gpuaas-team-dra", "namespace": "team-ml", "labels": PART_OF},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gpuaas-team-dra"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "ml-devs"}],
    }
    assert got["dra-class-1g.10gb"][2]["metadata"] == {"name": "mig-1g.10gb.gpuaas.io", "labels": PART_OF}
    rec = by_name(records)
    # The claims RoleBinding waits for the guard: no claim is ever admitted unguarded.
    assert rec["dra-claims-policy"].urn in rec["dra-ml-rolebinding"].dependencies
    assert rec["dra-claims-binding"].urn in rec["dra-ml-rolebinding"].dependencies


def test_the_pool_guard_comes_with_node_pools_and_names_the_unowned_ones() -> None:
    def program() -> None:
        DraTenancy("dra", DraTenancyArgs(node_pools=True, unowned_pools=("ndshared",)))

    got = objects(run(program))
    assert {"dra-pool-policy", "dra-pool-binding"} <= set(got)
    variables = {v["name"]: v["expression"] for v in got["dra-pool-policy"][2]["spec"]["variables"]}
    assert variables["unownedPools"] == "['ndshared']"


def test_without_node_pools_there_is_no_pool_guard() -> None:
    def program() -> None:
        DraTenancy("dra", DraTenancyArgs(unowned_pools=("ndshared",)))

    got = objects(run(program))
    assert "dra-claims-policy" in got
    assert not {"dra-pool-policy", "dra-pool-binding"} & set(got)


# --------------------------------------------------------------------------------------------
# Observability and Verification


def test_observability_alone_without_kueue_reads_the_crds_and_ships_the_dashboards() -> None:
    def program() -> None:
        Observability("obs", ObservabilityArgs())

    got = objects(run(program))
    assert sorted(n for n in got if not n.startswith("obs-needs-")) == ["obs-dashboard-platform", "obs-dashboard-team"]
    assert got["obs-dashboard-team"][2]["metadata"]["name"] == "gpuaas-dashboard-team"
    assert "Borrowing" not in got["obs-dashboard-team"][2]["data"]["gpuaas-team.json"]


def _target() -> Target:
    return Target(
        key="ml",
        namespace="team-ml",
        prefix="verify",
        link_rate_gbps=400,
        rdma_resource="nvidia.com/sriov8001",
        network="team-ml-ib",
        socket_ifname="net1",
    )


def test_verification_alone_proves_one_hand_written_target() -> None:
    def program() -> None:
        Verification(
            "v",
            VerificationArgs(
                verification=VerificationConfig(ib_write_bw_min_fraction=0.5, nccl_gdr_min_fraction=0.25),
                targets=(_target(),),
            ),
        )

    got = objects(run(program))
    assert sorted(got) == [
        f"v-ml-{role}" for role in sorted(("scripts", "ib-service", "ib-server", "ib-client", "nccl-service", "nccl"))
    ]
    client = got["v-ml-ib-client"][2]
    assert client["metadata"]["namespace"] == "team-ml"
    env = {e["name"]: e.get("value") for e in client["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["IB_MIN_GBPS"] == "200"  # 0.5 x 400 Gb/s
    nccl = got["v-ml-nccl"][2]["spec"]["template"]["spec"]["containers"][0]
    assert {e["name"]: e.get("value") for e in nccl["env"]}["MIN_BUSBW_GBPS"] == "12.5"  # 0.25 x 400 / 8 GB/s
    assert nccl["resources"]["limits"] == {
        "nvidia.com/gpu": "1",
        "nvidia.com/sriov8001": "1",
        "cpu": "8",
        "memory": "32Gi",
    }


# --------------------------------------------------------------------------------------------
# Ordering and providers through ordinary ResourceOptions


COMPONENTS: dict[str, Callable[[str, pulumi.ResourceOptions], pulumi.ComponentResource]] = {
    "Queues": lambda name, opts: Queues(name, QueuesArgs(flavors=(Flavor("a100"),), teams=(_ml_queue(),)), opts),
    "DraTenancy": lambda name, opts: DraTenancy(name, DraTenancyArgs(mig_profiles=("1g.10gb",)), opts),
    "Observability": lambda name, opts: Observability(name, ObservabilityArgs(kueue_namespace="kueue"), opts),
    "Verification": lambda name, opts: Verification(name, VerificationArgs(targets=(_target(),)), opts),
}


@pytest.mark.parametrize("component", sorted(COMPONENTS))
def test_depends_on_and_the_provider_reach_every_child(component: str) -> None:
    assert_depends_on_and_provider_reach_every_child(COMPONENTS[component])
